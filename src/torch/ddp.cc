// ddp.cc: DistributedDataParallel's construction (model check, broadcast
// from rank 0), its steps around forward, no_sync and the Join hooks. The
// gradient side is reducer.cc.
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <sstream>

#include "cohort/ddp.h"
#include "cohort/errors.h"
#include "cohort/tensor.h"
#include "reducer.h"

namespace cohort {
namespace {

std::string describe(const std::string& kind, const std::string& name, const at::Tensor& t) {
  std::ostringstream out;
  std::string dtype = c10::toString(t.scalar_type());
  try {
    dtype = dtype_name(to_dtype(t.scalar_type()));  // torch's user-facing name, "float32"
  } catch (const InvalidArgument&) {
  }
  out << kind << ' ' << name << ' ' << dtype << " [";
  for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
  out << ']';
  return out.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// gather_text gives every rank every rank's `mine`.
std::vector<std::string> gather_text(ProcessGroup& group, const std::string& mine) {
  const size_t p = static_cast<size_t>(group.size());
  std::vector<int64_t> lengths(p);
  int64_t my_length = static_cast<int64_t>(mine.size());
  group.all_gather_into_tensor(Buffer::of(lengths), Buffer::of(&my_length, 1));
  std::vector<std::vector<uint8_t>> texts(p);
  std::vector<Buffer> outputs;
  for (size_t q = 0; q < p; ++q) {
    texts[q].resize(static_cast<size_t>(lengths[q]));
    outputs.push_back(Buffer::of(texts[q]));
  }
  std::vector<uint8_t> bytes(mine.begin(), mine.end());
  group.all_gather(outputs, Buffer::of(bytes));
  std::vector<std::string> out;
  for (auto& t : texts) out.emplace_back(t.begin(), t.end());
  return out;
}

// check_same_model throws, on every rank alike, when any rank's parameter
// and buffer list differs from rank 0's.
void check_same_model(ProcessGroup& group, const std::string& mine) {
  const auto all = gather_text(group, mine);
  const auto reference = split_lines(all[0]);
  for (size_t q = 1; q < all.size(); ++q) {
    const auto other = split_lines(all[q]);
    for (size_t i = 0; i < std::max(reference.size(), other.size()); ++i) {
      if (i < reference.size() && i < other.size() && reference[i] == other[i]) continue;
      std::string message = "DistributedDataParallel: the model differs across ranks: ";
      if (i >= other.size()) {
        message += "rank 0 has " + std::to_string(reference.size()) + " parameters and buffers, rank " +
                   std::to_string(q) + " only " + std::to_string(other.size()) + "; the first it lacks is " +
                   reference[i];
      } else if (i >= reference.size()) {
        message += "rank " + std::to_string(q) + " has " + std::to_string(other.size()) +
                   " parameters and buffers, rank 0 only " + std::to_string(reference.size()) +
                   "; the first extra one is " + other[i];
      } else {
        message += "entry " + std::to_string(i) + " is " + reference[i] + " on rank 0 but " + other[i] +
                   " on rank " + std::to_string(q);
      }
      throw InvalidArgument(message);
    }
  }
}

// broadcast_tensors sends `tensors` from group rank `src`, one flat
// buffer per dtype.
void broadcast_tensors(ProcessGroup& group, const std::vector<at::Tensor>& tensors, int src) {
  torch::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, list] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : list) flat_parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    BroadcastOptions o;
    o.src = src;
    group.broadcast(to_buffer(flat, "DDP state"), o);
    if (group.rank() == src) continue;
    int64_t offset = 0;
    for (const auto& t : list) {
      const_cast<at::Tensor&>(t).copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

int32_t all_reduce_int(ProcessGroup& group, int32_t value, ReduceOp op) {
  AllReduceOptions o;
  o.op = op;
  group.all_reduce(Buffer::of(&value, 1), o);
  return value;
}

}  // namespace

DistributedDataParallelBase::DistributedDataParallelBase(std::shared_ptr<torch::nn::Module> module,
                                                         DDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  if (!module_) throw InvalidArgument("DistributedDataParallel was given a null module");
  group_ = options_.process_group ? options_.process_group : default_group();
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::string description;
  for (const auto& item : module_->named_parameters()) {
    description += describe("parameter", item.key(), item.value()) + "\n";
    if (!item.value().requires_grad()) continue;
    params.push_back(item.value());
    names.push_back(item.key());
  }
  for (const auto& item : module_->named_buffers())
    description += describe("buffer", item.key(), item.value()) + "\n";
  check_same_model(*group_, description);
  broadcast_state(0);
  reducer_ = std::make_unique<Reducer>(std::move(params), std::move(names), group_, options_);
}

DistributedDataParallelBase::~DistributedDataParallelBase() = default;

DistributedDataParallelBase::NoSyncGuard::NoSyncGuard(DistributedDataParallelBase& ddp)
    : ddp_(ddp), previous_(ddp.require_backward_grad_sync_) {
  ddp_.require_backward_grad_sync_ = false;
}

DistributedDataParallelBase::NoSyncGuard::~NoSyncGuard() {
  ddp_.require_backward_grad_sync_ = previous_;
}

void DistributedDataParallelBase::register_comm_hook(CommHook hook) {
  reducer_->register_comm_hook(std::move(hook));
}

DDPStats DistributedDataParallelBase::stats() const {
  return reducer_->stats();
}

void DistributedDataParallelBase::sync_buffers(int src) {
  std::vector<at::Tensor> buffers = module_->buffers();
  if (!buffers.empty()) broadcast_tensors(*group_, buffers, src);
}

void DistributedDataParallelBase::broadcast_state(int src) {
  std::vector<at::Tensor> state = module_->parameters();
  for (auto& b : module_->buffers()) state.push_back(b);
  if (!state.empty()) broadcast_tensors(*group_, state, src);
}

void DistributedDataParallelBase::pre_forward() {
  const bool in_join = Join::notify_join_context(*this);
  if (options_.broadcast_buffers && !module_->buffers().empty()) {
    // Inside a Join the highest rank still training is the authority
    // (rank 0 may have joined); otherwise rank 0, as torch.
    const int src = in_join ? all_reduce_int(*group_, group_->rank(), ReduceOp::MAX) : 0;
    sync_buffers(src);
  }
  if (in_join) all_reduce_int(*group_, require_backward_grad_sync_ ? 1 : 0, ReduceOp::SUM);
}

void DistributedDataParallelBase::post_forward(const std::vector<at::Tensor>& outputs) {
  if (torch::GradMode::is_enabled() && require_backward_grad_sync_) {
    reducer_->prepare_for_backward(outputs);
  } else {
    reducer_->disarm();
  }
}

void DistributedDataParallelBase::join_main_hook() {
  if (options_.broadcast_buffers && !module_->buffers().empty()) {
    sync_buffers(all_reduce_int(*group_, -1, ReduceOp::MAX));
  }
  if (all_reduce_int(*group_, 0, ReduceOp::SUM) > 0) reducer_->shadow_backward();
}

void DistributedDataParallelBase::join_post_hook(bool is_last_joiner) {
  // The ranks that joined last trained longest: their state is the final one.
  broadcast_state(all_reduce_int(*group_, is_last_joiner ? group_->rank() : -1, ReduceOp::MAX));
}

}  // namespace cohort
