// comm_hooks.cc: the hooks of include/cohort/comm_hooks.h.
#include "cohort/comm_hooks.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <map>

#include "cohort/errors.h"
#include "cohort/tensor.h"

namespace cohort {
namespace {

std::shared_ptr<Work> all_reduce_async(ProcessGroup& group, const at::Tensor& t) {
  AllReduceOptions o;
  o.async_op = true;
  return group.all_reduce(to_buffer(t, "a DDP bucket"), o);
}

// compress_hook casts to `dtype`, sums, and casts back into the bucket.
CommHook compress_hook(at::ScalarType dtype) {
  return [dtype](GradBucket& bucket) {
    torch::NoGradGuard no_grad;
    ProcessGroup& group = *bucket.process_group();
    at::Tensor compressed = bucket.buffer().to(dtype).div_(group.size());
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    all_reduce_async(group, compressed)->then([future, compressed, out = bucket.buffer()](Work& w) {
      if (w.exception()) return future->setError(w.exception());
      out.copy_(compressed);
      future->markCompleted(out);
    });
    return future;
  };
}

// orthogonalize makes the columns of `m` orthonormal (Gram-Schmidt, in place).
void orthogonalize(at::Tensor m, double epsilon) {
  const int64_t cols = m.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    at::Tensor col = m.narrow(1, i, 1);
    const double norm = col.norm().item<double>();
    if (epsilon == 0 && norm == 0) {
      col.zero_();  // an all-zero column (a rank with no gradient) stays zero
    } else {
      col.div_(norm + epsilon);
    }
    if (i + 1 < cols) {
      at::Tensor rest = m.narrow(1, i + 1, cols - i - 1);
      rest.sub_((col * rest).sum(0, true) * col);
    }
  }
}

struct PowerSGDState {
  PowerSGDOptions options;
  int64_t iteration = 0;
  std::map<size_t, at::Tensor> error;  // per bucket
  std::map<size_t, std::vector<at::Tensor>> qs;
};

// add_error_feedback adds what compression lost from bucket `index` last
// time to `input` (or starts a zero record of it, for a new or resized
// bucket); returns a copy of the sum, to measure this time's loss against.
at::Tensor add_error_feedback(PowerSGDState& state, size_t index, at::Tensor& input) {
  auto it = state.error.find(index);
  if (it != state.error.end() && it->second.numel() == input.numel()) {
    input.add_(it->second);
  } else {
    state.error[index] = at::zeros_like(input);
  }
  return input.clone();
}

// split_for_compression sorts a bucket's gradients into matrices worth
// compressing at rank r (those that min_compression_rate says shrink
// enough), viewed as n x m, and the rest.
void split_for_compression(const std::vector<at::Tensor>& gradients, const PowerSGDOptions& o,
                           std::vector<at::Tensor>& matrices, std::vector<at::Tensor>& rest) {
  for (const at::Tensor& g : gradients) {
    if (g.dim() > 1) {
      const int64_t n = g.size(0), m = g.numel() / g.size(0);
      const int64_t r = std::min<int64_t>({n, m, o.matrix_approximation_rank});
      if (static_cast<double>((n + m) * r) * o.min_compression_rate < static_cast<double>(n * m)) {
        matrices.push_back(g.view({n, m}));
        continue;
      }
    }
    rest.push_back(g);
  }
}

// start_qs sets one random orthonormal Q per matrix, from the same seed on
// every rank: the Qs start equal everywhere.
void start_qs(std::vector<at::Tensor>& qs, const std::vector<at::Tensor>& matrices,
              const PowerSGDOptions& o) {
  qs.clear();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.random_seed);
  for (auto& m : matrices) {
    const int64_t r = std::min<int64_t>({m.size(0), m.size(1), o.matrix_approximation_rank});
    at::Tensor q = at::randn({m.size(1), r}, gen, m.options());
    orthogonalize(q, o.orthogonalization_epsilon);
    qs.push_back(q);
  }
}

// compress_matrices replaces each matrix M with a rank-r approximation of
// its average over the ranks: P = M Q, summed and orthogonalized; Q = M^T
// P, averaged; M = P Q^T. The Ps, then the Qs, travel in one flat
// all_reduce each, so a bucket costs two collectives however many
// matrices it holds.
void compress_matrices(ProcessGroup& group, std::vector<at::Tensor>& matrices, std::vector<at::Tensor>& qs,
                       const PowerSGDOptions& o) {
  const double world = group.size();
  std::vector<at::Tensor> ps;
  for (size_t i = 0; i < matrices.size(); ++i) ps.push_back(at::matmul(matrices[i], qs[i]));
  std::vector<at::Tensor> ps_flat_parts;
  for (auto& p : ps) ps_flat_parts.push_back(p.reshape({-1}));
  at::Tensor ps_flat = at::cat(ps_flat_parts);
  all_reduce_async(group, ps_flat)->wait();
  int64_t offset = 0;
  for (auto& p : ps) {
    p.copy_(ps_flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
    orthogonalize(p, o.orthogonalization_epsilon);
  }
  std::vector<at::Tensor> qs_flat_parts;
  for (size_t i = 0; i < matrices.size(); ++i) {
    qs[i] = at::matmul(matrices[i].t(), ps[i]);
    qs_flat_parts.push_back(qs[i].reshape({-1}));
  }
  at::Tensor qs_flat = at::cat(qs_flat_parts);
  all_reduce_async(group, qs_flat)->wait();
  offset = 0;
  for (size_t i = 0; i < matrices.size(); ++i) {
    qs[i].copy_(qs_flat.narrow(0, offset, qs[i].numel()).view(qs[i].sizes())).div_(world);
    offset += qs[i].numel();
    at::matmul_out(matrices[i], ps[i], qs[i].t());
  }
}

// unflatten_average copies the all-reduced `flat` back into `parts`,
// averaged over `world` ranks.
void unflatten_average(at::Tensor& flat, std::vector<at::Tensor>& parts, double world) {
  flat.div_(world);
  int64_t offset = 0;
  for (auto& t : parts) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

c10::intrusive_ptr<c10::ivalue::Future> powersgd(PowerSGDState& state, GradBucket& bucket) {
  torch::NoGradGuard no_grad;
  ProcessGroup& group = *bucket.process_group();
  const double world = group.size();
  at::Tensor& input = bucket.buffer();
  // The iteration count moves on after the last bucket, so that all
  // buckets of one iteration take the same path.
  const bool plain = state.iteration < state.options.start_powerSGD_iter;
  if (bucket.is_last()) ++state.iteration;
  if (plain) {
    input.div_(world);
    return future_of(all_reduce_async(group, input), input);
  }
  const PowerSGDOptions& o = state.options;
  at::Tensor input_copy;
  if (o.use_error_feedback) input_copy = add_error_feedback(state, bucket.index(), input);
  std::vector<at::Tensor> matrices, rest;
  split_for_compression(bucket.gradients(), o, matrices, rest);
  // The uncompressed part travels in one flat all_reduce beside the Ps.
  std::shared_ptr<Work> rest_work;
  at::Tensor rest_flat;
  if (!rest.empty()) {
    std::vector<at::Tensor> flat;
    for (auto& t : rest) flat.push_back(t.reshape({-1}));
    rest_flat = at::cat(flat);
    rest_work = all_reduce_async(group, rest_flat);
  }
  if (!matrices.empty()) {
    auto& qs = state.qs[bucket.index()];
    if (qs.size() != matrices.size() || !o.warm_start) start_qs(qs, matrices, o);
    compress_matrices(group, matrices, qs, o);
  }
  if (rest_work) {
    rest_work->wait();
    unflatten_average(rest_flat, rest, world);
  }
  if (o.use_error_feedback) state.error[bucket.index()] = input_copy - input;
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  done->markCompleted(input);
  return done;
}

}  // namespace

c10::intrusive_ptr<c10::ivalue::Future> future_of(const std::shared_ptr<Work>& work,
                                                  const at::Tensor& result) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  work->then([future, result](Work& w) {
    if (w.exception()) {
      future->setError(w.exception());
    } else {
      future->markCompleted(result);
    }
  });
  return future;
}

CommHook allreduce_hook() {
  return [](GradBucket& bucket) {
    torch::NoGradGuard no_grad;
    bucket.buffer().div_(bucket.process_group()->size());
    return future_of(all_reduce_async(*bucket.process_group(), bucket.buffer()), bucket.buffer());
  };
}

CommHook fp16_compress_hook() {
  return compress_hook(at::kHalf);
}
CommHook bf16_compress_hook() {
  return compress_hook(at::kBFloat16);
}

CommHook powersgd_hook(PowerSGDOptions options) {
  if (options.matrix_approximation_rank < 1) {
    throw InvalidArgument("powersgd_hook: matrix_approximation_rank must be at least 1, got " +
                          std::to_string(options.matrix_approximation_rank));
  }
  auto state = std::make_shared<PowerSGDState>();
  state->options = options;
  return [state](GradBucket& bucket) { return powersgd(*state, bucket); };
}

}  // namespace cohort
