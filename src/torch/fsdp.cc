// FSDP units (cohort/fsdp.h).
//
// A unit swaps what its parameters' tensors hold: between steps this
// rank's rows (the shard, which the optimizer updates in place), during
// forward and backward the whole parameter, gathered. Autograd records
// the parameter tensors themselves, so a backward that runs while they
// are whole accumulates whole gradients into them; the unit then
// reduce-scatters those into the shards' gradients. A parameter's
// version counter is not touched by the swap (set_data keeps it), so the
// tensors autograd saved stay valid once gathered again.
#include "cohort/fsdp.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <mutex>
#include <unordered_map>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "cohort/tensor.h"
#include "torch/fsdp_memory.h"

namespace cohort {

struct FSDPUnit::Param {
  std::string name;
  at::Tensor param;               // the module's own tensor
  at::Tensor shard;               // this rank's rows, contiguous (what param holds between steps)
  std::vector<int64_t> shape;     // whole
  int64_t rows = 0;               // of the whole parameter (dimension 0; 1 for a scalar)
  int64_t chunk = 0;              // rows per rank, padded: ceil(rows / shard size)
  int64_t start = 0, length = 0;  // this rank's rows
  int64_t row_numel = 1;
  at::Tensor padded;      // chunk rows per rank, gathered into (its memory freed while resharded)
  at::Tensor whole;       // the gathered parameter: the first `rows` rows of `padded`
  at::Tensor saved_grad;  // the shard's gradient while param is whole
  at::Tensor unsynced;    // whole gradients summed while sync is off
};

// Gather is a unit's all_gathers (one per parameter, straight into the
// whole parameters' memory), maybe still in flight.
struct FSDPUnit::Gather {
  std::vector<std::shared_ptr<Work>> works;
  // The parameters' versions when it started: an optimizer step (or a
  // load) since then makes a prefetched gather stale.
  std::vector<uint32_t> versions;
};

// Reduction is a unit's reduce_scatters of its gradients (one per
// parameter), in flight.
struct FSDPUnit::Reduction {
  std::vector<at::Tensor> reduced;  // per parameter: this rank's chunk of rows
  std::vector<std::shared_ptr<Work>> works;
};

namespace {

// wait_all waits for every Work and then rethrows the first error: one
// collective failing still lets the others end before the tensors they
// write go.
void wait_all(std::vector<std::shared_ptr<Work>>& works) {
  std::exception_ptr failed;
  for (auto& w : works) {
    try {
      w->wait();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  works.clear();
  if (failed) std::rethrow_exception(failed);
}

// The unit whose forward this thread is in, outermost first: the root
// learns its units' order from the units that start inside its forward.
thread_local std::vector<FSDPUnit*> forward_stack;

// Which unit shards a parameter, by its tensor: a unit takes only the
// parameters no other unit took, and full_state_dict finds their unit.
std::mutex registry_mu;
std::unordered_map<const c10::TensorImpl*, FSDPUnit*>& registry() {
  static std::unordered_map<const c10::TensorImpl*, FSDPUnit*> units;
  return units;
}

FSDPUnit* unit_of(const at::Tensor& t) {
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = registry().find(t.unsafeGetTensorImpl());
  return it == registry().end() ? nullptr : it->second;
}

// default_mesh is every rank of the default group in one dimension, made
// once per default group: each unit making its own would connect a new
// group per unit. Kept until exit, as the default group's subgroups are.
DeviceMesh default_mesh() {
  struct Cache {
    std::mutex mu;
    std::weak_ptr<ProcessGroup> of;
    std::optional<DeviceMesh> mesh;
  };
  static Cache* cache = new Cache;  // never destroyed: groups outlive static destruction
  std::lock_guard<std::mutex> lock(cache->mu);
  GroupPtr group = default_group();
  if (!group) {
    throw InvalidArgument(
        "fully_shard: no mesh was given and the default process group is not initialized (call "
        "init_process_group, or give FullyShardOptions a mesh)");
  }
  if (!cache->mesh || cache->of.lock() != group) {
    cache->mesh = init_device_mesh("cpu", {get_world_size()});
    cache->of = group;
  }
  return *cache->mesh;
}

// GradReady tells a unit that autograd has accumulated one of its
// parameters' gradients (once per backward: autograd sums every use
// first).
struct GradReady : torch::autograd::PostAccumulateGradHook {
  GradReady(std::function<void()> ready) : ready_(std::move(ready)) {}
  void operator()(const torch::autograd::Variable&) override { ready_(); }
  std::function<void()> ready_;
};

// empty_in_fsdp_memory: an uninitialized contiguous tensor over
// fsdp_memory's blocks (fsdp_memory.h says why).
at::Tensor empty_in_fsdp_memory(at::IntArrayRef sizes, at::ScalarType dtype, fsdp_memory::Use use) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, fsdp_memory::allocate(bytes, use), nullptr,
                       false);
  return at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage, 0, sizes, c10::contiguous_strides(sizes));
}

at::ScalarType or_else(const std::optional<at::ScalarType>& type, at::ScalarType fallback) {
  return type ? *type : fallback;
}

}  // namespace

FSDPUnit::FSDPUnit(torch::nn::Module& module, FullyShardOptions options)
    : options_(std::move(options)), mesh_(options_.mesh ? *options_.mesh : default_mesh()) {
  if (mesh_.ndim() != 1 && mesh_.ndim() != 2) {
    throw InvalidArgument("fully_shard: the mesh must be 1-D (shard) or 2-D (replicate, shard), not " +
                          mesh_.to_string());
  }
  const int shard_dim = mesh_.ndim() - 1;
  shard_group_ = mesh_.get_group(shard_dim);
  if (mesh_.ndim() == 2) replicate_group_ = mesh_.get_group(0);
  shard_size_ = mesh_.size(shard_dim);
  shard_index_ = mesh_.get_local_rank(shard_dim);
  if (shard_index_ < 0) throw InvalidArgument("fully_shard: this rank is not in " + mesh_.to_string());

  std::lock_guard<std::mutex> lock(registry_mu);
  for (auto& named : module.named_parameters(/*recurse=*/true)) {
    at::Tensor p = named.value();
    if (registry().count(p.unsafeGetTensorImpl())) continue;  // an inner unit's
    if (!p.device().is_cpu()) {
      throw InvalidArgument("fully_shard: parameter " + named.key() + " is on " + p.device().str() +
                            "; cohort's FSDP shards CPU parameters (its collectives run on the CPU backend)");
    }
    if (!params_.empty() && p.scalar_type() != params_.front().shard.scalar_type()) {
      throw InvalidArgument("fully_shard: parameters " + params_.front().name + " (" +
                            std::string(c10::toString(params_.front().shard.scalar_type())) + ") and " +
                            named.key() + " (" + std::string(c10::toString(p.scalar_type())) +
                            ") differ in dtype; one unit gathers its parameters as one buffer: wrap them "
                            "in separate units");
    }
    Param x;
    x.name = named.key();
    x.param = p;
    x.shape = p.sizes().vec();
    x.rows = p.dim() == 0 ? 1 : p.size(0);
    x.row_numel = x.rows == 0 ? 0 : p.numel() / x.rows;
    x.chunk = (x.rows + shard_size_ - 1) / shard_size_;
    x.start = std::min<int64_t>(x.rows, x.chunk * shard_index_);
    x.length = std::max<int64_t>(0, std::min<int64_t>(x.chunk, x.rows - x.start));
    const at::Tensor rows_view = p.dim() == 0 ? p.detach().reshape({1}) : p.detach();
    x.shard = rows_view.narrow(0, x.start, x.length).clone().contiguous();
    {
      at::NoGradGuard no_grad;
      p.set_data(x.shard);
    }
    registry()[p.unsafeGetTensorImpl()] = this;
    std::weak_ptr<bool> alive = alive_;
    torch::autograd::impl::set_post_acc_grad_hooks(p, std::make_unique<GradReady>([this, alive] {
                                                     if (auto a = alive.lock(); a && *a) grad_ready();
                                                   }));
    params_.push_back(std::move(x));
  }
}

FSDPUnit::~FSDPUnit() {
  *alive_ = false;
  std::lock_guard<std::mutex> lock(registry_mu);
  for (const Param& x : params_) {
    registry().erase(x.param.unsafeGetTensorImpl());
    torch::autograd::impl::set_post_acc_grad_hooks(x.param, nullptr);
  }
  // Gradients a zero_grad let go after the last backward wait for the next
  // one: with a unit gone, none may come.
  fsdp_memory::release_kept();
}

std::vector<std::pair<std::string, at::Tensor>> FSDPUnit::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const Param& x : params_) out.emplace_back(x.name, x.param);
  return out;
}

const FSDPUnit::Param& FSDPUnit::param_of(const at::Tensor& parameter, const char* what) const {
  for (const Param& x : params_) {
    if (x.param.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) return x;
  }
  throw InvalidArgument(std::string(what) + ": the tensor is not a parameter of this FSDP unit");
}

std::vector<int64_t> FSDPUnit::full_shape(const at::Tensor& parameter) const {
  return param_of(parameter, "full_shape").shape;
}

int64_t FSDPUnit::shard_offset(const at::Tensor& parameter) const {
  return param_of(parameter, "shard_offset").start;
}

FSDPUnit* fsdp_unit_of(const at::Tensor& parameter) {
  return unit_of(parameter);
}

void FSDPUnit::start_gather() {
  if (unsharded_ || pending_gather_ || params_.empty()) return;
  const at::ScalarType dtype = or_else(options_.mp_policy.param_dtype, params_.front().shard.scalar_type());
  auto gather = std::make_unique<Gather>();
  for (const Param& x : params_) gather->versions.push_back(x.param._version());
  for (Param& x : params_) {
    // Each parameter is gathered into `padded`, chunk rows from each rank
    // one after the other, so that its first `rows` rows are the whole
    // parameter: no copy out. The memory is given back on reshard and
    // taken again here (as torch's FSDP resizes its storage), so that what
    // autograd saved of the whole parameter (a transposed view of a
    // Linear's weight) sees the gathered values again in backward instead
    // of keeping a copy alive in between.
    const int64_t piece = x.chunk * x.row_numel;
    const size_t bytes = static_cast<size_t>(shard_size_ * piece) * c10::elementSize(dtype);
    if (!x.padded.defined() || x.padded.scalar_type() != dtype) {
      x.padded = empty_in_fsdp_memory({shard_size_ * piece}, dtype, fsdp_memory::Use::kWholeParameter);
      x.whole = x.padded.narrow(0, 0, x.rows * x.row_numel).view(x.shape);
    } else if (x.padded.storage().nbytes() != bytes) {
      c10::StorageImpl* storage = x.padded.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(fsdp_memory::allocate(bytes, fsdp_memory::Use::kWholeParameter));
      storage->set_nbytes(bytes);
    }
    if (piece == 0) continue;
    // This rank's rows go as they are when they fill the chunk in the
    // gathered type; else (the last ranks of an uneven split, mixed
    // precision) through a padded copy.
    at::Tensor mine;
    if (x.length == x.chunk && x.shard.scalar_type() == dtype) {
      mine = x.shard.view({-1});
    } else {
      mine = at::zeros({piece}, at::TensorOptions().dtype(dtype));
      if (x.length > 0) mine.narrow(0, 0, x.length * x.row_numel).copy_(x.shard.reshape({-1}));
    }
    gather->works.push_back(all_gather_into_tensor(x.padded, mine, shard_group_, /*async_op=*/true));
  }
  pending_gather_ = std::move(gather);
}

void FSDPUnit::finish_gather(Gather& gather) {
  wait_all(gather.works);
  at::NoGradGuard no_grad;
  for (Param& x : params_) {
    // The shard's gradient waits aside while the parameter is whole: a
    // gradient accumulated now is whole too.
    if (x.param.grad().defined()) {
      x.saved_grad = x.param.grad();
      x.param.mutable_grad() = at::Tensor();
    }
    x.param.set_data(x.whole);
  }
}

void FSDPUnit::unshard() {
  if (unsharded_) return;
  if (!params_.empty()) {
    start_gather();  // unless a prefetch started it
    std::unique_ptr<Gather> gather = std::move(pending_gather_);
    bool stale = false;
    for (size_t i = 0; i < params_.size(); ++i)
      stale = stale || params_[i].param._version() != gather->versions[i];
    if (stale) {
      // The shards changed after the prefetch began (every rank sees the
      // same, having run the same steps): gather them again.
      wait_all(gather->works);
      start_gather();
      gather = std::move(pending_gather_);
    }
    finish_gather(*gather);
  }
  unsharded_ = true;
}

void FSDPUnit::reshard() {
  if (!unsharded_) return;
  at::NoGradGuard no_grad;
  for (Param& x : params_) {
    x.param.set_data(x.shard);
    // Its memory goes back; the tensor (and autograd's views of it) stays.
    if (x.padded.defined()) x.padded.storage().unsafeGetStorageImpl()->reset();
    if (x.saved_grad.defined()) {
      x.param.mutable_grad() = x.saved_grad;
      x.saved_grad = at::Tensor();
    }
  }
  unsharded_ = false;
}

void FSDPUnit::record_forward(FSDPUnit* unit) {
  if (!learning_order_) return;
  forward_order_.push_back(unit);
}

void FSDPUnit::learn_order() {
  if (!learning_order_) return;
  learning_order_ = false;
  // A unit that ran twice in one forward (shared weights) makes the order
  // ambiguous: no prefetching then.
  for (size_t i = 0; i < forward_order_.size(); ++i) {
    for (size_t j = i + 1; j < forward_order_.size(); ++j) {
      if (forward_order_[i] == forward_order_[j]) return;
    }
  }
  std::vector<FSDPUnit*> order{this};
  order.insert(order.end(), forward_order_.begin(), forward_order_.end());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i]->forward_next_ = i + 1 < order.size() ? order[i + 1] : nullptr;
    order[i]->backward_next_ = i > 0 ? order[i - 1] : nullptr;
  }
}

void FSDPUnit::before_forward() {
  // A backward of ours that failed never ended: a new forward starts over.
  in_backward_ = false;
  finish_reduction();
  if (!forward_stack.empty()) forward_stack.front()->record_forward(this);
  forward_stack.push_back(this);
  unshard();
  // The next unit's gather runs on the group's worker while this one
  // computes.
  if (forward_next_ && !forward_next_->unsharded_ && !forward_next_->pending_gather_) {
    forward_next_->start_gather();
    ++forward_next_->prefetches_;
  }
}

at::Tensor FSDPUnit::before_forward(const at::Tensor& input) {
  before_forward();
  if (options_.mp_policy.param_dtype && input.is_floating_point())
    return input.to(*options_.mp_policy.param_dtype);
  return input;
}

void FSDPUnit::forward_failed() {
  if (!forward_stack.empty() && forward_stack.back() == this) forward_stack.pop_back();
}

at::Tensor FSDPUnit::after_forward(const at::Tensor& output) {
  if (!forward_stack.empty() && forward_stack.back() == this) forward_stack.pop_back();
  if (forward_stack.empty()) learn_order();  // the root's forward ends
  const bool backward_comes = output.requires_grad() && !params_.empty();
  if (!backward_comes || options_.reshard_after_forward) reshard();
  at::Tensor out = output;
  if (backward_comes) {
    // The gradient of the output comes first in backward, before any of
    // this unit's own backward: gather there, and queue the reduction of
    // the gradients for the end of backward.
    std::weak_ptr<bool> alive = alive_;
    out.register_hook([this, alive](const at::Tensor& grad) {
      if (auto a = alive.lock(); a && *a) pre_backward();
      return grad;
    });
  }
  if (options_.mp_policy.output_dtype && out.is_floating_point())
    out = out.to(*options_.mp_policy.output_dtype);
  return out;
}

void FSDPUnit::pre_backward() {
  unshard();
  // Backward meets the units in the reverse order of forward.
  if (backward_next_ && !backward_next_->unsharded_ && !backward_next_->pending_gather_) {
    backward_next_->start_gather();
    ++backward_next_->prefetches_;
  }
  if (in_backward_) return;
  in_backward_ = true;
  grads_ready_ = 0;
  reduced_ = false;
  // A parameter that backward does not reach never says it is ready: the
  // end of backward reduces what is left.
  std::weak_ptr<bool> alive = alive_;
  torch::autograd::Engine::get_default_engine().queue_callback([this, alive] {
    if (auto a = alive.lock(); !a || !*a) return;
    if (!reduced_) post_backward();
    finish_reduction();
    in_backward_ = false;
    // Between steps no whole parameter is held, kept blocks included.
    fsdp_memory::release_kept();
  });
}

void FSDPUnit::grad_ready() {
  if (!in_backward_ || reduced_) return;
  // Every parameter's gradient is in: reduce now, and free the whole
  // parameters and gradients, before backward reaches the units before.
  if (++grads_ready_ == params_.size()) post_backward();
}

void FSDPUnit::post_backward() {
  reduced_ = true;
  at::NoGradGuard no_grad;
  // Whole gradients (zeros for a parameter backward did not reach: every
  // rank must reduce the same layout).
  std::vector<at::Tensor> whole(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& x = params_[i];
    at::Tensor g = x.param.grad();
    x.param.mutable_grad() = at::Tensor();
    if (!g.defined()) g = at::zeros(x.shape, x.shard.options());
    whole[i] = g;
  }
  if (!sync_gradients_) {
    for (size_t i = 0; i < params_.size(); ++i) {
      Param& x = params_[i];
      at::Tensor g = whole[i].to(x.shard.scalar_type());
      x.unsynced = x.unsynced.defined() ? x.unsynced + g : g;
    }
    reshard();
    return;
  }
  // As torch: reduce in reduce_dtype, else in param_dtype, else in the
  // parameters' own.
  const at::ScalarType dtype =
      or_else(options_.mp_policy.reduce_dtype,
              or_else(options_.mp_policy.param_dtype,
                      params_.empty() ? at::kFloat : params_.front().shard.scalar_type()));
  // Each parameter's gradient is reduce-scattered as it is when its rows
  // split evenly (rank j's rows are chunk j): no copy in. An uneven split
  // (or another type) goes through a copy padded with zeros.
  auto reduction = std::make_unique<Reduction>();
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& x = params_[i];
    at::Tensor g = whole[i];
    whole[i] = at::Tensor();  // the reduction holds it now: freed when done
    if (x.unsynced.defined()) {
      g = g + x.unsynced.view(g.sizes());
      x.unsynced = at::Tensor();
    }
    const int64_t piece = x.chunk * x.row_numel;
    at::Tensor input;
    if (g.scalar_type() == dtype && g.is_contiguous() && x.rows == shard_size_ * x.chunk) {
      input = g.view({-1});
    } else {
      input = at::empty({shard_size_ * piece}, at::TensorOptions().dtype(dtype));
      input.narrow(0, 0, x.rows * x.row_numel).copy_(g.reshape({-1}));
      input.narrow(0, x.rows * x.row_numel, shard_size_ * piece - x.rows * x.row_numel).zero_();
    }
    // The reduced chunk has the shard's shape when no padding is in it
    // (so that it can be the gradient itself, not a view).
    const auto use = fsdp_memory::Use::kReducedGradient;
    at::Tensor reduced = x.length == x.chunk ? empty_in_fsdp_memory(x.shard.sizes(), dtype, use)
                                             : empty_in_fsdp_memory({piece}, dtype, use);
    reduction->reduced.push_back(reduced);
    if (piece == 0) continue;
    // The reductions run on the group's worker while backward goes on to
    // the units before; the end of backward collects them
    // (finish_reduction).
    reduction->works.push_back(
        reduce_scatter_tensor(reduced, input, ReduceOp::AVG, shard_group_, /*async_op=*/true));
  }
  pending_reduction_ = std::move(reduction);
  reshard();  // the shards' earlier gradients are back in param.grad
}

void FSDPUnit::finish_reduction() {
  if (!pending_reduction_) return;
  std::unique_ptr<Reduction> reduction = std::move(pending_reduction_);
  wait_all(reduction->works);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& x = params_[i];
    at::Tensor reduced = reduction->reduced[i];
    if (replicate_group_) all_reduce(reduced, ReduceOp::AVG, replicate_group_);
    if (reduced.scalar_type() != x.shard.scalar_type()) reduced = reduced.to(x.shard.scalar_type());
    // A tensor of its own, never a view (optimizers may detach gradients
    // in place): the padded chunk's rows are copied out.
    at::Tensor g = x.length == x.chunk ? reduced
                                       : reduced.narrow(0, 0, x.length * x.row_numel).view(x.shard.sizes()).clone();
    x.param.mutable_grad() = x.param.grad().defined() ? x.param.grad() + g : g;
  }
}

at::Tensor FSDPUnit::full_tensor(const at::Tensor& parameter) const {
  const Param& x = param_of(parameter, "full_tensor");
  at::Tensor mine = at::zeros({x.chunk * x.row_numel}, x.shard.options());
  if (x.length > 0) mine.narrow(0, 0, x.length * x.row_numel).copy_(x.shard.reshape({-1}));
  at::Tensor all = at::empty({shard_size_ * x.chunk * x.row_numel}, mine.options());
  all_gather_into_tensor(all, mine, shard_group_);
  return all.narrow(0, 0, x.rows * x.row_numel).view(x.shape).clone();
}

DTensor FSDPUnit::sharded_parameter(const at::Tensor& parameter) const {
  const Param& x = param_of(parameter, "sharded_parameter");
  if (x.shape.empty()) {
    throw InvalidArgument("sharded_parameter: " + x.name +
                          " is a scalar: it has no rows to shard, so it is no Shard(0) DTensor");
  }
  if (unsharded_) {
    throw InvalidArgument("sharded_parameter: " + x.name +
                          " is gathered whole now (inside forward or backward); its sharded form exists between "
                          "steps");
  }
  std::vector<Placement> placements;
  if (mesh_.ndim() == 2) placements.push_back(Replicate());
  placements.push_back(Shard(0));
  return DTensor::from_local(x.param, mesh_, placements, x.shape);
}

void FSDPUnit::load_full(const at::Tensor& parameter, const at::Tensor& value) {
  const Param& x = param_of(parameter, "load_full");
  if (value.sizes().vec() != x.shape) {
    throw InvalidArgument("load_full_state_dict: " + x.name + " has shape " + c10::str(value.sizes()) +
                          " in the state but " + c10::str(c10::IntArrayRef(x.shape)) + " in the module");
  }
  at::NoGradGuard no_grad;
  const at::Tensor rows = value.dim() == 0 ? value.reshape({1}) : value;
  x.shard.copy_(rows.narrow(0, x.start, x.length).reshape(x.shard.sizes()));
  // A gather prefetched before this holds the old values: every rank
  // loads the same state, so every rank drops it and gathers again.
  if (pending_gather_) {
    std::unique_ptr<Gather> stale = std::move(pending_gather_);
    wait_all(stale->works);
  }
}

void set_requires_gradient_sync(torch::nn::Module& module, bool sync) {
  for (const at::Tensor& p : module.parameters(true)) {
    if (FSDPUnit* unit = unit_of(p)) unit->set_requires_gradient_sync(sync);
  }
}

std::map<std::string, at::Tensor> full_state_dict(torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (auto& named : module.named_parameters(true)) {
    FSDPUnit* unit = unit_of(named.value());
    out[named.key()] = unit ? unit->full_tensor(named.value()) : named.value().detach().clone();
  }
  for (auto& named : module.named_buffers(true)) out[named.key()] = named.value().detach().clone();
  return out;
}

void load_full_state_dict(torch::nn::Module& module, const std::map<std::string, at::Tensor>& state) {
  at::NoGradGuard no_grad;
  auto take = [&](const std::string& name) -> const at::Tensor& {
    auto it = state.find(name);
    if (it == state.end()) throw InvalidArgument("load_full_state_dict: the state has no '" + name + "'");
    return it->second;
  };
  for (auto& named : module.named_parameters(true)) {
    const at::Tensor& value = take(named.key());
    if (FSDPUnit* unit = unit_of(named.value())) {
      unit->load_full(named.value(), value);
    } else {
      named.value().copy_(value);
    }
  }
  for (auto& named : module.named_buffers(true)) named.value().copy_(take(named.key()));
}

}  // namespace cohort
