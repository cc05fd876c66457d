// Sharding propagation (cohort/dtensor_ops.h): each operation decides, one
// mesh dimension at a time, how its inputs must be laid out and how its
// result is, moves the inputs that must move (redistribute, which carries
// the gradient back), runs the local operation on the pieces, and wraps
// the result with from_local, which checks the pieces' shape.
#include "cohort/dtensor_ops.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include <set>

#include "cohort/errors.h"
#include "cohort/tensor.h"

namespace cohort {
namespace {

std::string describe(std::initializer_list<const DTensor*> inputs) {
  std::string s;
  for (const DTensor* d : inputs) s += (s.empty() ? "" : " and ") + d->to_string();
  return s;
}

[[noreturn]] void no_rule(const std::string& op, std::initializer_list<const DTensor*> inputs,
                          const std::string& why) {
  throw InvalidArgument(op + ": " + why + " (" + describe(inputs) + ")");
}

void same_mesh(const std::string& op, const DTensor& a, const DTensor& b) {
  if (a.device_mesh().ranks() != b.device_mesh().ranks() ||
      a.device_mesh().shape() != b.device_mesh().shape())
    no_rule(op, {&a, &b}, "the DTensors lie on different meshes");
}

DTensor make(const at::Tensor& local, const DeviceMesh& mesh, std::vector<Placement> placements,
             std::vector<int64_t> shape) {
  return DTensor::from_local(local, mesh, std::move(placements), std::move(shape));
}

// one_shard_per_dimension keeps a tensor dimension from being sharded by
// two mesh dimensions (not supported): where the result would be, that
// mesh dimension falls back to Replicate for the inputs and the result.
void one_shard_per_dimension(std::vector<Placement>& out, std::vector<std::vector<Placement>*> inputs) {
  std::set<int> used;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_shard()) continue;
    if (used.insert(out[i].dim).second) continue;
    out[i] = Replicate();
    for (auto* in : inputs) (*in)[i] = Replicate();
  }
}

// SumGradient is the identity forward; backward it sums the gradient over
// the mesh dimensions given: a replicated input that met a sharded or
// partial partner gets, on each rank, only its part of the gradient (the
// weight of a row-sharded batch, the input of a column-sharded weight).
struct SumGradient : public torch::autograd::Node {
  SumGradient(DeviceMesh mesh_, std::vector<int> dims_) : mesh(std::move(mesh_)), dims(std::move(dims_)) {}
  std::string name() const override { return "cohort::SumGradient"; }
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    at::NoGradGuard no_grad;
    at::Tensor g = grads[0].contiguous().clone();
    for (int i : dims) all_reduce(g, ReduceOp::SUM, mesh.get_group(i));
    return {g};
  }
  DeviceMesh mesh;
  std::vector<int> dims;
};

// local_of is `input`'s piece for an operation whose result is laid out
// as `out`, with its gradient summed where it would come back partial.
at::Tensor local_of(const DTensor& input, const std::vector<Placement>& out) {
  const at::Tensor& local = input.to_local();
  if (!at::GradMode::is_enabled() || !local.requires_grad()) return local;
  std::vector<int> dims;
  for (size_t i = 0; i < out.size(); ++i) {
    if (input.placements()[i].is_replicate() && !out[i].is_replicate()) dims.push_back(static_cast<int>(i));
  }
  if (dims.empty()) return local;
  at::Tensor copy;
  {
    at::NoGradGuard no_grad;
    copy = local.clone();
  }
  auto node = c10::make_intrusive<SumGradient>(input.device_mesh(), std::move(dims));
  node->set_next_edges(torch::autograd::collect_next_edges(local));
  torch::autograd::set_history(copy, node);
  return copy;
}

enum class Linear { kAddLike, kMulLike };

DTensor binary(const std::string& op, const DTensor& a, const DTensor& b, Linear kind,
               at::Tensor (*f)(const at::Tensor&, const at::Tensor&)) {
  same_mesh(op, a, b);
  if (a.shape() != b.shape()) no_rule(op, {&a, &b}, "the shapes differ (no broadcasting between DTensors)");
  const int n = a.device_mesh().ndim();
  std::vector<Placement> pa = a.placements(), pb = b.placements(), out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Placement A = pa[i], B = pb[i];
    if (A.is_partial() || B.is_partial()) {
      if (kind == Linear::kAddLike && A == B) {  // (x1 + x2 + ...) + (y1 + y2 + ...)
        out[i] = A;
        continue;
      }
      if (kind == Linear::kMulLike && A.is_partial() && B.is_replicate()) {
        out[i] = A;
        continue;
      }
      if (kind == Linear::kMulLike && B.is_partial() && A.is_replicate()) {
        out[i] = B;
        continue;
      }
      if (A.is_partial()) A = Replicate();  // reduced first
      if (B.is_partial()) B = Replicate();
    }
    if (A.is_shard() && B.is_replicate()) B = A;  // the replicated side is cut here
    if (B.is_shard() && A.is_replicate()) A = B;
    if (A != B) B = A;  // two different Shards: b laid out as a
    pa[i] = A;
    pb[i] = B;
    out[i] = A;
  }
  one_shard_per_dimension(out, {&pa, &pb});
  const DTensor x = a.redistribute(pa), y = b.redistribute(pb);
  return make(f(local_of(x, out), local_of(y, out)), a.device_mesh(), out, a.shape());
}

DTensor unary(const DTensor& a, bool linear, const std::function<at::Tensor(const at::Tensor&)>& f) {
  std::vector<Placement> p = a.placements();
  if (!linear) {
    for (Placement& x : p) {
      if (x.is_partial()) x = Replicate();
    }
  }
  const DTensor x = a.redistribute(p);
  return make(f(x.to_local()), a.device_mesh(), p, a.shape());
}

int64_t wrap_dim(const std::string& op, const DTensor& a, int64_t dim) {
  const int64_t n = static_cast<int64_t>(a.shape().size());
  if (dim < -n || dim >= n) no_rule(op, {&a}, "dimension " + std::to_string(dim) + " is out of range");
  return dim < 0 ? dim + n : dim;
}

}  // namespace

DTensor add(const DTensor& a, const DTensor& b) {
  return binary("add", a, b, Linear::kAddLike,
                [](const at::Tensor& x, const at::Tensor& y) { return x + y; });
}

DTensor sub(const DTensor& a, const DTensor& b) {
  return binary("sub", a, b, Linear::kAddLike,
                [](const at::Tensor& x, const at::Tensor& y) { return x - y; });
}

DTensor mul(const DTensor& a, const DTensor& b) {
  return binary("mul", a, b, Linear::kMulLike,
                [](const at::Tensor& x, const at::Tensor& y) { return x * y; });
}

DTensor mul(const DTensor& a, double factor) {
  return unary(a, true, [factor](const at::Tensor& x) { return x * factor; });
}

DTensor neg(const DTensor& a) {
  return unary(a, true, [](const at::Tensor& x) { return -x; });
}

DTensor relu(const DTensor& a) {
  return unary(a, false, [](const at::Tensor& x) { return at::relu(x); });
}

DTensor gelu(const DTensor& a) {
  return unary(a, false, [](const at::Tensor& x) { return at::gelu(x); });
}

DTensor tanh(const DTensor& a) {
  return unary(a, false, [](const at::Tensor& x) { return at::tanh(x); });
}

DTensor t(const DTensor& a) {
  if (a.shape().size() != 2) no_rule("t", {&a}, "t() takes a 2-D DTensor");
  std::vector<Placement> p = a.placements();
  for (Placement& x : p) {
    if (x.is_shard()) x = Shard(1 - x.dim);
  }
  return make(a.to_local().t(), a.device_mesh(), p, {a.shape()[1], a.shape()[0]});
}

DTensor matmul(const DTensor& a, const DTensor& b) {
  same_mesh("matmul", a, b);
  const int64_t nd = static_cast<int64_t>(a.shape().size());
  if (nd < 2 || b.shape().size() != 2 || a.shape().back() != b.shape()[0]) {
    no_rule("matmul", {&a, &b}, "takes a [..., m, k] and a [k, n] DTensor");
  }
  const int ka = static_cast<int>(nd - 1);    // a's contracted dimension
  const int last = static_cast<int>(nd - 1);  // the result's column dimension
  const int n = a.device_mesh().ndim();
  std::vector<Placement> pa = a.placements(), pb = b.placements(), out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Placement A = pa[i], B = pb[i];
    if (A.is_partial() && B.is_replicate()) {
      out[i] = A;
      continue;
    }
    if (B.is_partial() && A.is_replicate()) {
      out[i] = B;
      continue;
    }
    if (A.is_partial()) A = Replicate();
    if (B.is_partial()) B = Replicate();
    const bool a_k = A.is_shard() && A.dim == ka, b_k = B.is_shard() && B.dim == 0;
    const bool a_rows = A.is_shard() && A.dim < ka, b_cols = B.is_shard() && B.dim == 1;
    if (a_k && !b_k) B = b_cols ? Replicate() : B;
    if (b_k && !a_k) A = a_rows ? Replicate() : A;
    if (a_k || b_k) {
      // The contraction is split: each rank multiplies its slices, and
      // the sum of their products is the result.
      if ((a_k || A.is_replicate()) && (b_k || B.is_replicate())) {
        A = Shard(ka);
        B = Shard(0);
        out[i] = Partial(ReduceOp::SUM);
      } else {
        A = Replicate();
        B = Replicate();
        out[i] = Replicate();
      }
    } else if (a_rows) {
      B = Replicate();
      out[i] = A;
    } else if (b_cols) {
      out[i] = Shard(last);
    } else {
      out[i] = Replicate();
    }
    pa[i] = A;
    pb[i] = B;
  }
  one_shard_per_dimension(out, {&pa, &pb});
  const DTensor x = a.redistribute(pa), y = b.redistribute(pb);
  std::vector<int64_t> shape = a.shape();
  shape.back() = b.shape()[1];
  return make(at::matmul(local_of(x, out), local_of(y, out)), a.device_mesh(), out, shape);
}

DTensor linear(const DTensor& x, const DTensor& weight, const std::optional<DTensor>& bias) {
  if (weight.shape().size() != 2) no_rule("linear", {&x, &weight}, "the weight must be 2-D [out, in]");
  const DTensor y = matmul(x, t(weight));
  if (!bias) return y;
  same_mesh("linear", y, *bias);
  if (bias->shape() != std::vector<int64_t>{weight.shape()[0]}) {
    no_rule("linear", {&weight, &*bias}, "the bias must be 1-D [out]");
  }
  const int last = static_cast<int>(y.shape().size() - 1);
  std::vector<Placement> py = y.placements(), pb = bias->placements();
  for (size_t i = 0; i < py.size(); ++i) {
    if (py[i].is_partial()) py[i] = Replicate();  // adding to a partial value would add the bias k times
    pb[i] = py[i].is_shard() && py[i].dim == last ? Shard(0) : Replicate();
  }
  const DTensor out = y.redistribute(py), b = bias->redistribute(pb);
  return make(out.to_local() + local_of(b, py), y.device_mesh(), py, y.shape());
}

DTensor sum(const DTensor& a, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim("sum", a, dim);
  std::vector<Placement> p = a.placements();
  for (Placement& x : p) {
    if (!x.is_shard()) continue;  // Partial stays: a sum is linear
    if (x.dim == d) {
      x = Partial(ReduceOp::SUM);
    } else if (x.dim > d && !keepdim) {
      x = Shard(x.dim - 1);
    }
  }
  std::vector<int64_t> shape = a.shape();
  if (keepdim) {
    shape[static_cast<size_t>(d)] = 1;
  } else {
    shape.erase(shape.begin() + d);
  }
  return make(a.to_local().sum(d, keepdim), a.device_mesh(), p, shape);
}

DTensor sum(const DTensor& a) {
  std::vector<Placement> p = a.placements();
  for (Placement& x : p) {
    if (x.is_shard()) x = Partial(ReduceOp::SUM);
  }
  return make(a.to_local().sum(), a.device_mesh(), p, {});
}

DTensor reshape(const DTensor& a, const std::vector<int64_t>& requested) {
  const std::vector<int64_t>& in = a.shape();
  int64_t numel = 1;
  for (int64_t s : in) numel *= s;
  // The requested shape, its one -1 (if any) inferred.
  std::vector<int64_t> out = requested;
  int64_t known = 1, unknown = -1;
  bool fits = true;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1 && unknown < 0) {
      unknown = static_cast<int64_t>(d);
    } else if (out[d] < 0) {
      fits = false;
    } else {
      known *= out[d];
    }
  }
  if (fits && unknown >= 0) {
    fits = known != 0 && numel % known == 0;
    if (fits) out[static_cast<size_t>(unknown)] = numel / known;
  } else if (fits) {
    fits = known == numel;
  }
  if (!fits) {
    no_rule("reshape", {&a},
            "the shape " + c10::str(c10::IntArrayRef(requested)) + " does not fit " + std::to_string(numel) +
                " elements");
  }
  // The dimensions kept whole at the front and at the back.
  size_t prefix = 0;
  while (prefix < in.size() && prefix < out.size() && in[prefix] == out[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < in.size() - prefix && suffix < out.size() - prefix &&
         in[in.size() - 1 - suffix] == out[out.size() - 1 - suffix])
    ++suffix;
  const int64_t shift = static_cast<int64_t>(out.size()) - static_cast<int64_t>(in.size());
  std::vector<Placement> p = a.placements();
  std::vector<int64_t> local_out = out;
  for (Placement& x : p) {
    if (!x.is_shard()) continue;
    const size_t d = static_cast<size_t>(x.dim);
    int64_t to;
    if (d < prefix) {
      to = x.dim;
    } else if (d >= in.size() - suffix) {
      to = x.dim + shift;
    } else {
      no_rule("reshape", {&a},
              "to " + c10::str(c10::IntArrayRef(out)) + " changes dimension " + std::to_string(x.dim) +
                  ", which the mesh shards (only dimensions before and after the part that changes may be)");
    }
    local_out[static_cast<size_t>(to)] = a.to_local().size(x.dim);
    x = Shard(static_cast<int>(to));
  }
  return make(a.to_local().reshape(local_out), a.device_mesh(), p, out);
}

}  // namespace cohort
