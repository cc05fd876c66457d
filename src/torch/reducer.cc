// reducer.cc: see reducer.h.
#include "reducer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <map>
#include <unordered_set>

#include "cohort/errors.h"
#include "cohort/tensor.h"
#include "rpc/dist_autograd.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;
using torch::autograd::Node;
using torch::autograd::variable_list;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string name_list(const std::vector<std::string>& names, const std::vector<size_t>& which) {
  std::string out;
  for (size_t i = 0; i < which.size() && i < 8; ++i) out += (i ? ", " : "") + names[which[i]];
  if (which.size() > 8) out += ", ... (" + std::to_string(which.size()) + " in all)";
  return out;
}

// alias_of shares `view`'s memory without being an autograd view: libtorch's
// Optimizer::zero_grad() detaches gradients in place, which views refuse.
at::Tensor alias_of(const at::Tensor& view) {
  return at::empty({0}, view.options())
      .set_(view.storage(), view.storage_offset(), view.sizes(), view.strides());
}

// bucket_storage makes a zeroed flat bucket. CPU buckets live in symmetric
// memory (ProcessGroup::alloc_symmetric; every rank builds its buckets in
// the same order, so the allocations match): on one host the ranks then
// reduce each other's buckets in place, with plain loads and stores.
// *shared tells whether they do.
at::Tensor bucket_storage(ProcessGroup& group, int64_t numel, const at::TensorOptions& options, bool* shared) {
  *shared = false;
  if (!options.device().is_cpu()) return at::zeros({numel}, options);
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(c10::typeMetaToScalarType(options.dtype()));
  std::shared_ptr<SymmetricMemory> block = group.alloc_symmetric(bytes);
  *shared = block->shared();
  void* data = block->data();
  return at::from_blob(data, {numel}, [block](void*) {}, options);
}

}  // namespace

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                 std::shared_ptr<ProcessGroup> group, const DDPOptions& options)
    : params_(std::move(params)), names_(std::move(names)), group_(std::move(group)), options_(options) {
  if (options_.bucket_cap_mb <= 0 || options_.first_bucket_cap_mb <= 0) {
    throw InvalidArgument(
        "DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be positive (got " +
        std::to_string(options_.bucket_cap_mb) + " and " + std::to_string(options_.first_bucket_cap_mb) +
        ")");
  }
  ready_.assign(params_.size(), 0);
  locally_used_.assign(params_.size(), 0);
  std::vector<size_t> reverse(params_.size());
  for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
  build_buckets(reverse);
  install_hooks();
}

// CapturedGradientHook: a tensor hook on a parameter, which the engine
// runs as its accumulator's tensor pre-hook (libtorch keeps a leaf's hooks
// on the tensor, since its accumulator may be made anew), and even where
// it does not run the accumulator:
// distributed autograd's backward takes leaf gradients as the engine's
// outputs (for the context, never .grad), so the accumulator and its post
// hook do not run there, and this hook is where DDP sees the gradient
// (torch's DDP does the same through its context's gradient callback).
// In a plain backward it passes the gradient on untouched.
struct CapturedGradientHook : torch::autograd::FunctionPreHook {
  CapturedGradientHook(std::function<at::Tensor(const at::Tensor&)> on_captured)
      : on_captured_(std::move(on_captured)) {}
  variable_list operator()(const variable_list& grads) override {
    if (!dist_autograd::capturing_leaf_gradients() || grads.empty() || !grads[0].defined()) return grads;
    return {on_captured_(grads[0])};
  }
  std::function<at::Tensor(const at::Tensor&)> on_captured_;
};

Reducer::~Reducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) remove_hooks(i);
  for (size_t i = 0; i < pre_hooks_.size(); ++i) {
    auto& hooks = torch::autograd::impl::hooks(params_[i]);
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.get() == pre_hooks_[i]; }),
                hooks.end());
  }
}

void Reducer::install_hooks() {
  accumulators_.resize(params_.size());
  hook_keys_.resize(params_.size());
  pre_hooks_.resize(params_.size(), nullptr);
  for (size_t i = 0; i < params_.size(); ++i) {
    install_hook(i);
    auto pre = std::make_unique<CapturedGradientHook>([this, i](const at::Tensor& g) { return captured_gradient(i, g); });
    pre_hooks_[i] = pre.get();
    torch::autograd::impl::add_hook(params_[i], std::move(pre));
  }
}

void Reducer::remove_hooks(size_t i) {
  auto& acc = accumulators_[i];
  if (!acc) return;
  acc->del_post_hook(hook_keys_[i]);
  index_of_accumulator_.erase(acc.get());
}

void Reducer::install_hook(size_t i) {
  auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
  if (acc == accumulators_[i]) return;
  remove_hooks(i);
  index_of_accumulator_[acc.get()] = i;
  // The accumulator's post hook runs once param.grad() holds this
  // backward's (accumulated) gradient: the moment DDP may take it.
  hook_keys_[i] = acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [this, i](const variable_list& outputs, const variable_list&) {
        autograd_hook(i);
        return outputs;
      }));
  accumulators_[i] = std::move(acc);
}

at::Tensor Reducer::captured_gradient(size_t index, const at::Tensor& grad) {
  if (!expect_hooks_) return grad;  // no_sync, or a backward DDP was not told of
  captured_mode_ = true;
  autograd_hook(index, &grad);
  const Place place = place_[index];
  return alias_of(buckets_[place.bucket].views[place.slot]);
}

void Reducer::register_comm_hook(CommHook hook) {
  if (hook_) throw InvalidArgument("DistributedDataParallel: register_comm_hook may be called only once");
  if (iterations_ > 0) {
    throw InvalidArgument(
        "DistributedDataParallel: register_comm_hook must be called before the first backward");
  }
  hook_ = std::move(hook);
}

bool Reducer::needs_used_map() const {
  return options_.find_unused_parameters || (options_.static_graph && !static_learnt_);
}

bool Reducer::should_rebuild() const {
  return !rebuilt_ && (options_.static_graph || !options_.find_unused_parameters);
}

void Reducer::build_buckets(const std::vector<size_t>& order) {
  torch::NoGradGuard no_grad;
  const size_t caps[2] = {static_cast<size_t>(options_.first_bucket_cap_mb * 1024 * 1024),
                          static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024)};
  // One open bucket per dtype; each dtype's first bucket is the small one.
  struct Open {
    std::vector<size_t> params;
    size_t bytes = 0;
    int buckets_closed = 0;
  };
  std::map<at::ScalarType, Open> open;
  std::vector<std::vector<size_t>> assignment;
  for (size_t index : order) {
    Open& o = open[params_[index].scalar_type()];
    o.params.push_back(index);
    o.bytes += params_[index].numel() * params_[index].element_size();
    if (o.bytes >= caps[o.buckets_closed > 0 ? 1 : 0]) {
      assignment.push_back(std::move(o.params));
      o.params.clear();
      o.bytes = 0;
      ++o.buckets_closed;
    }
  }
  for (auto& [dtype, o] : open) {
    if (!o.params.empty()) assignment.push_back(std::move(o.params));
  }
  // Reduce buckets in the order their first gradient is expected.
  std::vector<size_t> position(params_.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::stable_sort(assignment.begin(), assignment.end(),
                   [&](const auto& a, const auto& b) { return position[a.front()] < position[b.front()]; });

  std::vector<Bucket> buckets(assignment.size());
  place_.assign(params_.size(), Place{});
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.params = assignment[b];
    int64_t total = 0;
    for (size_t index : bucket.params) total += params_[index].numel();
    bucket.contents = bucket_storage(*group_, total, params_[bucket.params.front()].options(), &bucket.shared);
    int64_t offset = 0;
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const at::Tensor& p = params_[bucket.params[slot]];
      bucket.views.push_back(bucket.contents.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
      place_[bucket.params[slot]] = Place{b, slot};
    }
    bucket.inverse_world = at::scalar_tensor(1.0 / group_->size(), bucket.contents.options());
    bucket.pending = bucket.params.size();
    bucket.done_ns = std::make_shared<std::atomic<int64_t>>(0);
  }
  buckets_ = std::move(buckets);
  if (options_.gradient_as_bucket_view) {
    // From now on gradients accumulate straight into the buckets.
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& view = buckets_[place_[i].bucket].views[place_[i].slot];
      at::Tensor& grad = const_cast<at::Tensor&>(params_[i]).mutable_grad();
      if (grad.defined()) view.copy_(grad);
      grad = alias_of(view);
    }
  }
}

void Reducer::find_unused(const std::vector<at::Tensor>& outputs) {
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  auto visit = [&](const Node* n) {
    if (n != nullptr && seen.insert(n).second) stack.push_back(n);
  };
  for (const auto& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (out.grad_fn()) {
      visit(out.grad_fn().get());
    } else {
      visit(torch::autograd::impl::try_get_grad_accumulator(out).get());
    }
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& edge : n->next_edges()) visit(edge.function.get());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!seen.count(accumulators_[i].get())) unused_.push_back(i);
  }
}

void Reducer::prepare_for_backward(const std::vector<at::Tensor>& outputs) {
  // Loading a state dict into a wrapped module (Module::load) gives its
  // parameters new gradient accumulators; follow them.
  for (size_t i = 0; i < params_.size(); ++i) install_hook(i);
  expect_hooks_ = true;
  finalize_queued_ = false;
  next_launch_ = 0;
  ready_count_ = 0;
  pending_at_first_launch_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(locally_used_.begin(), locally_used_.end(), 0);
  for (auto& b : buckets_) b.pending = b.params.size();
  unused_.clear();
  if (needs_used_map()) {
    find_unused(outputs);
  } else if (options_.static_graph) {
    unused_ = static_unused_;
  }
}

void Reducer::autograd_hook(size_t index, const at::Tensor* captured) {
  if (!expect_hooks_) return;  // no_sync, or a backward DDP was not told of
  if (!finalize_queued_) {
    finalize_queued_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
    // Parameters that take no part in this backward are ready at once.
    for (size_t u : unused_) mark_ready(u);
  }
  if (ready_[index]) {
    throw InvalidArgument("DistributedDataParallel: parameter " + names_[index] +
                          " got its gradient twice in one backward (reentrant backward or activation "
                          "checkpointing, or a parameter used in several forward calls); this needs "
                          "static_graph=true");
  }
  locally_used_[index] = 1;
  if (!rebuilt_) ready_order_.push_back(index);
  mark_ready(index, captured);
}

void Reducer::mark_ready(size_t index, const at::Tensor* captured) {
  torch::NoGradGuard no_grad;
  ready_[index] = 1;
  const Place place = place_[index];
  Bucket& bucket = buckets_[place.bucket];
  at::Tensor& view = bucket.views[place.slot];
  static const at::Tensor kNone;
  const at::Tensor& grad = captured ? *captured : captured_mode_ ? kNone : params_[index].grad();
  // Without a hook the gradients are averaged: float16 ones divided by the
  // world size before the SUM (torch's order: the sum of undivided ones may
  // overflow float16's range), folded into this copy; the others by the
  // all_reduce's AVG, which divides each rank's block of the result while
  // it is in cache (no pass of its own over the bucket).
  const double scale = divides_before_sum(bucket) ? 1.0 / group_->size() : 1.0;
  if (may_reduce_in_place(bucket) && in_place_ready(index, bucket)) {
    // Left where it is: launch decides, once the bucket is full.
  } else if (grad.defined() && !captured && grad.is_alias_of(view)) {
    if (scale != 1.0) view.mul_(scale);
  } else if (adopts_gradients(bucket) && in_place_ready(index, bucket) && params_[index].is_contiguous()) {
    // From now on autograd accumulates this gradient in the bucket itself.
    view.copy_(grad);
    const_cast<at::Tensor&>(params_[index]).mutable_grad() = alias_of(view);
  } else if (grad.defined()) {
    if (scale != 1.0) {
      at::mul_out(view, grad, bucket.inverse_world);
    } else {
      view.copy_(grad);
    }
  } else {
    view.zero_();
  }
  // Backward's last gradient: what follows is communication it waits for.
  if (++ready_count_ == params_.size()) all_ready_ = Clock::now();
  if (--bucket.pending == 0) launch_ready_buckets();
}

bool Reducer::divides_before_sum(const Bucket& bucket) const {
  return !hook_ && bucket.contents.scalar_type() == at::kHalf;
}

bool Reducer::default_mode_fast_path(const Bucket& bucket) const {
  // The unused-parameter rules keep some gradients as they were, so those
  // modes reduce copies; view mode already reduces in place.
  return !hook_ && !captured_mode_ && !divides_before_sum(bucket) && !options_.gradient_as_bucket_view &&
         !options_.find_unused_parameters && !options_.static_graph && bucket.contents.device().is_cpu();
}

bool Reducer::may_reduce_in_place(const Bucket& bucket) const {
  return default_mode_fast_path(bucket) && !bucket.shared;
}

bool Reducer::adopts_gradients(const Bucket& bucket) const {
  return default_mode_fast_path(bucket) && bucket.shared;
}

bool Reducer::in_place_ready(size_t index, const Bucket& bucket) const {
  const at::Tensor& grad = params_[index].grad();
  return grad.defined() && grad.is_contiguous() && grad.device().is_cpu() &&
         grad.scalar_type() == bucket.contents.scalar_type() && !grad.is_alias_of(bucket.contents);
}

void Reducer::launch_ready_buckets() {
  // Strictly in bucket order, so that every rank issues the same sequence.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(next_launch_++);
}

c10::intrusive_ptr<c10::ivalue::Future> Reducer::reduce_bucket(size_t b, bool from_gradients) {
  Bucket& bucket = buckets_[b];
  if (hook_) {
    std::vector<at::Tensor> params;
    for (size_t index : bucket.params) params.push_back(params_[index]);
    GradBucket grad_bucket(b, b + 1 == buckets_.size(), bucket.contents, bucket.views, std::move(params),
                           group_);
    auto future = hook_(grad_bucket);
    if (!future) throw InvalidArgument("DistributedDataParallel: the communication hook returned no future");
    return future;
  }
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  // CPU buckets always go through all_reduce_coalesced, of the gradients or
  // of the contents, so that every rank (a joined one too) runs the same
  // protocol whichever it reduces.
  const bool coalesced = bucket.contents.device().is_cpu();
  std::vector<Buffer> pieces;
  bucket.in_place = false;
  if (coalesced && from_gradients && may_reduce_in_place(bucket)) {
    bucket.in_place = std::all_of(bucket.params.begin(), bucket.params.end(),
                                  [&](size_t index) { return in_place_ready(index, bucket); });
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const at::Tensor& grad = params_[bucket.params[slot]].grad();
      if (bucket.in_place) {
        pieces.push_back(to_buffer(grad, "a gradient"));
      } else if (in_place_ready(bucket.params[slot], bucket)) {
        bucket.views[slot].copy_(grad);  // mark_ready left it for this bucket to decide
      }
    }
  }
  if (coalesced && !bucket.in_place) pieces.push_back(to_buffer(bucket.contents, "a DDP bucket"));
  AllReduceOptions o;
  if (!divides_before_sum(bucket)) o.op = ReduceOp::AVG;
  // The last bucket is launched by the last gradient: backward is over and
  // would only wait for it, so it runs on this thread (inline when the
  // group is idle), saving the hand-off to the group's worker and back.
  if (b + 1 < buckets_.size()) o.async_op = true;
  std::shared_ptr<Work> work;
  try {
    work = coalesced ? group_->all_reduce_coalesced(pieces, o)
                     : group_->all_reduce(to_buffer(bucket.contents, "a DDP bucket"), o);
  } catch (...) {
    future->setError(std::current_exception());
    return future;
  }
  work->then([future, contents = bucket.contents](Work& w) {
    if (w.exception()) {
      future->setError(w.exception());
    } else {
      future->markCompleted(contents);
    }
  });
  return future;
}

void Reducer::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  if (b == 0) {
    pending_at_first_launch_ = static_cast<size_t>(std::count(ready_.begin(), ready_.end(), 0));
  }
  bucket.launched = Clock::now();
  bucket.done_ns->store(0);
  bucket.future = reduce_bucket(b);
  bucket.future->addCallback([done = bucket.done_ns](c10::ivalue::Future&) { done->store(now_ns()); });
}

void Reducer::wait_buckets() {
  for (auto& bucket : buckets_) {
    bucket.future->wait();
    if (bucket.future->hasError()) std::rethrow_exception(bucket.future->exception_ptr());
    at::Tensor result = bucket.future->value().toTensor();
    if (!result.is_same(bucket.contents)) {
      if (result.numel() != bucket.contents.numel()) {
        throw InvalidArgument("DistributedDataParallel: the communication hook returned " +
                              std::to_string(result.numel()) + " elements for a bucket of " +
                              std::to_string(bucket.contents.numel()));
      }
      bucket.contents.copy_(result.view({-1}));
    }
  }
}

std::vector<int32_t> Reducer::all_reduce_used_map(const std::vector<int32_t>& local) {
  std::vector<int32_t> global = local;
  group_->all_reduce(Buffer::of(global));
  return global;
}

void Reducer::learn_static_graph(const std::vector<int32_t>& globally_used) {
  if (!options_.static_graph || static_learnt_) return;
  static_learnt_ = true;
  static_unused_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!locally_used_[i]) static_unused_.push_back(i);
  }
  static_globally_used_ = globally_used;
}

void Reducer::write_back(const std::vector<int32_t>& globally_used) {
  for (size_t i = 0; i < params_.size(); ++i) {
    // A parameter no rank used keeps its gradient as it was (torch's rule),
    // so that optimizers skip it as they would without DDP.
    if (!globally_used.empty() && globally_used[i] == 0) continue;
    const Place place = place_[i];
    if (buckets_[place.bucket].in_place) continue;  // its gradient holds the average already
    at::Tensor& view = buckets_[place.bucket].views[place.slot];
    at::Tensor& grad = const_cast<at::Tensor&>(params_[i]).mutable_grad();
    if (options_.gradient_as_bucket_view) {
      if (!grad.defined() || !grad.is_alias_of(view)) grad = alias_of(view);
    } else if (grad.defined() && grad.data_ptr() == view.data_ptr()) {
      continue;  // adopted into the bucket (adopts_gradients): it is the average
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      grad = view.clone();
    }
  }
}

void Reducer::finalize() {
  torch::NoGradGuard no_grad;
  expect_hooks_ = false;
  std::vector<size_t> missing;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) missing.push_back(i);
  }
  if (!missing.empty()) {
    throw InvalidArgument(
        "DistributedDataParallel: " + std::to_string(missing.size()) +
        " parameter(s) got no gradient in this backward, so their buckets were never reduced: " +
        name_list(names_, missing) +
        ". They took no part in computing the loss: construct DDP with find_unused_parameters=true, "
        "or use them");
  }
  wait_buckets();
  exposed_seconds_ += std::chrono::duration<double>(Clock::now() - all_ready_).count();
  int64_t last_done = 0;
  for (auto& b : buckets_) last_done = std::max(last_done, b.done_ns->load());
  if (!buckets_.empty()) {
    const int64_t first_launch =
        std::chrono::duration_cast<std::chrono::nanoseconds>(buckets_.front().launched.time_since_epoch())
            .count();
    comm_seconds_ += static_cast<double>(std::max<int64_t>(0, last_done - first_launch)) * 1e-9;
  }
  std::vector<int32_t> globally_used;
  if (needs_used_map()) {
    globally_used = all_reduce_used_map(locally_used_);
    learn_static_graph(globally_used);
  } else if (options_.static_graph) {
    globally_used = static_globally_used_;
  }
  // Under distributed autograd the context takes the buckets' views (the
  // pre-hooks returned them): .grad stays as it was.
  if (!captured_mode_) write_back(globally_used);
  captured_mode_ = false;
  ++iterations_;
  if (should_rebuild()) rebuild_buckets();
}

void Reducer::rebuild_buckets() {
  // Rank 0's ready order, padded with parameters it never saw, for all.
  std::vector<int64_t> order;
  std::vector<char> seen(params_.size(), 0);
  for (size_t i : ready_order_) {
    if (!seen[i]) order.push_back(static_cast<int64_t>(i));
    seen[i] = 1;
  }
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) order.push_back(static_cast<int64_t>(i));
  }
  group_->broadcast(Buffer::of(order));
  std::vector<size_t> agreed(order.begin(), order.end());
  build_buckets(agreed);
  rebuilt_ = true;
  ready_order_.clear();
}

void Reducer::shadow_backward() {
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].contents.zero_();
    auto future = reduce_bucket(b, false);
    future->wait();
    if (future->hasError()) std::rethrow_exception(future->exception_ptr());
  }
  if (needs_used_map()) {
    std::fill(locally_used_.begin(), locally_used_.end(), 0);
    learn_static_graph(all_reduce_used_map(locally_used_));
  }
  if (should_rebuild()) rebuild_buckets();
}

DDPStats Reducer::stats() const {
  DDPStats s;
  s.iterations = iterations_;
  s.comm_seconds = comm_seconds_;
  s.exposed_seconds = exposed_seconds_;
  for (const auto& b : buckets_) s.bucket_bytes.push_back(b.contents.numel() * b.contents.element_size());
  s.buckets_rebuilt = rebuilt_;
  s.pending_at_first_launch = pending_at_first_launch_;
  s.num_parameters = params_.size();
  return s;
}

}  // namespace cohort
