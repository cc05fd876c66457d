// dtensor_worker: one rank of tests/torch/dtensor_process_test.cc, joined
// by env:// (3 or 4 ranks). Lays a known 10 x 6 tensor out over a 1-D mesh
// (and, at 4 ranks, a 2 x 2 mesh), moves it between placements, runs
// backward through each kind of redistribution, and checks every local
// piece and gradient against the same arithmetic on the whole tensor.
// Prints "rank R ok: ..." and exits 0, or says what was wrong and exits 1.
// With the argument "compare" it prints instead, a line each, what
// tests/python/dtensor_reference.py prints of torch's DTensor (4 ranks).
// With "tensor_parallel" it checks cohort/tensor_parallel.h instead: a
// two-layer MLP cut column- then row-wise gives the one-process model's
// output, input gradient and (cut the same way) parameter gradients, and
// three SGD steps leave every shard as the one-process model's.
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "cohort/dtensor.h"
#include "cohort/dtensor_ops.h"
#include "cohort/errors.h"
#include "cohort/tensor_parallel.h"
#include "torch/worker_checks.h"

using namespace cohort;
using cohort::testing::check;

namespace {

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a, b);
}

// rows(t, k, j): piece j of k of t along dimension d, as torch.chunk cuts.
at::Tensor piece(const at::Tensor& t, int d, int k, int j) {
  const auto [start, length] = shard_range(t.size(d), k, j);
  return t.narrow(d, start, length);
}

template <class Call>
std::string invalid(Call call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

void one_dimension(const DeviceMesh& mesh, const at::Tensor& base) {
  const int k = mesh.size(), r = mesh.get_local_rank();
  // Every rank passes its own data; rank 0's is laid out.
  DTensor rows = distribute_tensor(base + r, mesh, {Shard(0)});
  check(same(rows.to_local(), piece(base, 0, k, r)), "Shard(0) piece");
  check(rows.shape() == std::vector<int64_t>{10, 6}, "global shape");
  check(same(rows.full_tensor(), base), "full_tensor of Shard(0)");
  check(same(rows.redistribute({Shard(1)}).to_local(), piece(base, 1, k, r)), "Shard(0) -> Shard(1)");
  check(same(rows.redistribute({Replicate()}).redistribute({Shard(1)}).to_local(), piece(base, 1, k, r)),
        "Replicate -> Shard(1)");

  // Partial: the value is the sum (or mean) of the ranks' tensors.
  const double sum_of_factors = k * (k + 1) / 2.0;
  DTensor partial = DTensor::from_local(base * (r + 1), mesh, {Partial()});
  check(same(partial.full_tensor(), base * sum_of_factors), "Partial(sum) -> Replicate");
  check(same(partial.redistribute({Shard(0)}).to_local(), piece(base * sum_of_factors, 0, k, r)),
        "Partial(sum) -> Shard(0)");
  DTensor mean = DTensor::from_local(base * (r + 1), mesh, {Partial(ReduceOp::AVG)});
  check(at::allclose(mean.full_tensor(), base * (sum_of_factors / k)), "Partial(avg) -> Replicate");
  DTensor replicated = DTensor::from_local(base.clone(), mesh, {Replicate()});
  const std::string to_partial = invalid([&] { replicated.redistribute({Partial()}); });
  check(to_partial.find("redistributing to Partial is for internal use only") != std::string::npos,
        "Replicate -> Partial is refused, as torch refuses it: " + to_partial);

  // Backward through each kind: the gradient of (y * coefficient).sum().
  const at::Tensor coefficient = at::arange(60, at::kDouble).reshape({10, 6}) * 0.5;
  {  // all_gather's backward is a cut
    DTensor w = distribute_tensor(base.clone().requires_grad_(), mesh, {Shard(0)});
    (w.redistribute({Replicate()}).to_local() * coefficient).sum().backward();
    check(w.to_local().grad().defined() && same(w.to_local().grad(), piece(coefficient, 0, k, r)),
          "backward of Shard(0) -> Replicate");
  }
  {  // a cut's backward is an all_gather
    at::Tensor x = base.clone().requires_grad_();
    DTensor s = DTensor::from_local(x, mesh, {Replicate()}).redistribute({Shard(0)});
    (s.to_local() * piece(coefficient, 0, k, r)).sum().backward();
    check(x.grad().defined() && same(x.grad(), coefficient), "backward of Replicate -> Shard(0)");
  }
  {  // all_reduce's backward hands every rank the whole gradient
    at::Tensor x = (base * (r + 1)).requires_grad_();
    (DTensor::from_local(x, mesh, {Partial()}).full_tensor() * coefficient).sum().backward();
    check(x.grad().defined() && same(x.grad(), coefficient), "backward of Partial -> Replicate");
  }
  {  // reduce_scatter's backward is an all_gather
    at::Tensor x = (base * (r + 1)).requires_grad_();
    DTensor s = DTensor::from_local(x, mesh, {Partial()}).redistribute({Shard(0)});
    (s.to_local() * piece(coefficient, 0, k, r)).sum().backward();
    check(x.grad().defined() && same(x.grad(), coefficient), "backward of Partial -> Shard(0)");
  }
  {  // all_to_all's backward is the all_to_all back
    DTensor w = distribute_tensor(base.clone().requires_grad_(), mesh, {Shard(0)});
    (w.redistribute({Shard(1)}).to_local() * piece(coefficient, 1, k, r)).sum().backward();
    check(w.to_local().grad().defined() && same(w.to_local().grad(), piece(coefficient, 0, k, r)),
          "backward of Shard(0) -> Shard(1)");
  }

  const std::string count = invalid([&] { distribute_tensor(base, mesh, {Shard(0), Shard(1)}); });
  check(
      count.find("2 placements (Shard(dim=0), Shard(dim=1)) for a mesh of 1 dimensions") != std::string::npos,
      "too many placements: " + count);
  const std::string partial_in = invalid([&] { distribute_tensor(base, mesh, {Partial()}); });
  check(partial_in.find("has a Partial placement") != std::string::npos,
        "Partial in distribute_tensor: " + partial_in);
  const std::string short_shape =
      invalid([&] { DTensor::from_local(base, mesh, {Shard(1)}, std::vector<int64_t>{8}); });
  check(short_shape.find("the shape [8] has 1 dimensions; the local tensor has 2") != std::string::npos,
        "from_local with a short shape: " + short_shape);
  const std::string dim = invalid([&] { distribute_tensor(base, mesh, {Shard(2)}); });
  check(dim.find("Shard(dim=2) of a tensor of 2 dimensions") != std::string::npos, "Shard(2): " + dim);
}

void two_dimensions(const DeviceMesh& mesh, const at::Tensor& base) {
  const int dp = mesh.get_local_rank("dp"), tp = mesh.get_local_rank("tp");
  DTensor grid = distribute_tensor(base, mesh, {Shard(0), Shard(1)});
  check(same(grid.to_local(), piece(piece(base, 0, 2, dp), 1, 2, tp)), "(Shard(0), Shard(1)) piece");
  check(same(grid.full_tensor(), base), "full_tensor of a 2-D layout");
  // Swapping the sharded dimensions goes through Replicate.
  DTensor swapped = grid.redistribute({Shard(1), Shard(0)});
  check(same(swapped.to_local(), piece(piece(base, 1, 2, dp), 0, 2, tp)),
        "(Shard(0), Shard(1)) -> (Shard(1), Shard(0))");
  // HSDP's layout: replicated over dp, sharded over tp.
  DTensor hsdp = distribute_tensor(base, mesh, {Replicate(), Shard(0)});
  check(same(hsdp.to_local(), piece(base, 0, 2, tp)), "(Replicate(), Shard(0)) piece");
  DTensor both = DTensor::from_local(base * (dp + 1), mesh, {Partial(), Replicate()});
  check(same(both.redistribute({Shard(0), Replicate()}).to_local(), piece(base * 3, 0, 2, dp)),
        "(Partial, Replicate) -> (Shard(0), Replicate)");
  const std::string twice = invalid([&] { distribute_tensor(base, mesh, {Shard(0), Shard(0)}); });
  check(twice.find("along two mesh dimensions") != std::string::npos, "Shard(0) twice: " + twice);
}

// operators: every rule of dtensor_ops.h, on a 1-D mesh, against the same
// operation on whole tensors: the result's layout, its whole value, and
// for a tensor-parallel MLP every gradient.
void operators(const DeviceMesh& mesh) {
  const int k = mesh.size(), r = mesh.get_local_rank();
  auto random = [](std::vector<int64_t> shape, int seed) {
    torch::manual_seed(seed);
    return torch::randn(shape, at::kDouble);
  };
  auto laid_out = [&](const DTensor& d, const Placement& p, const std::string& what) {
    check(d.placements()[0] == p, what + " is laid out as " + d.to_string() + ", not " + p.to_string());
  };
  auto whole = [&](const DTensor& d, const at::Tensor& want, const std::string& what) {
    const at::Tensor got = d.full_tensor();
    check(got.sizes() == want.sizes() && at::allclose(got, want), what + ": the whole differs");
  };
  const at::Tensor A = random({6, 5}, 1), B = random({6, 5}, 2);
  auto on = [&](const at::Tensor& t, const Placement& p) { return distribute_tensor(t, mesh, {p}); };

  // Elementwise.
  DTensor c = add(on(A, Shard(0)), on(B, Shard(0)));
  laid_out(c, Shard(0), "Shard(0) + Shard(0)");
  whole(c, A + B, "add");
  c = mul(on(A, Shard(0)), on(B, Replicate()));
  laid_out(c, Shard(0), "Shard(0) * Replicate");
  whole(c, A * B, "mul");
  c = sub(on(A, Shard(1)), on(B, Shard(0)));
  laid_out(c, Shard(1), "Shard(1) - Shard(0)");
  whole(c, A - B, "sub");
  c = gelu(on(A, Shard(1)));
  laid_out(c, Shard(1), "gelu(Shard(1))");
  whole(c, at::gelu(A), "gelu");
  const double f = k * (k + 1) / 2.0;  // a Partial of x * (rank + 1) is x * f
  const DTensor p = DTensor::from_local(A * (r + 1), mesh, {Partial()});
  const DTensor q = DTensor::from_local(B * (r + 1), mesh, {Partial()});
  c = add(p, q);
  laid_out(c, Partial(), "Partial + Partial");
  whole(c, (A + B) * f, "add of partials");
  c = mul(p, on(B, Replicate()));
  laid_out(c, Partial(), "Partial * Replicate");
  whole(c, A * f * B, "mul of a partial by a replicate");
  c = mul(p, q);
  laid_out(c, Replicate(), "Partial * Partial");
  whole(c, A * f * B * f, "mul of partials");
  c = neg(mul(p, 2.0));
  laid_out(c, Partial(), "-(Partial * 2)");
  whole(c, -A * f * 2, "neg and mul by a number");
  c = relu(p);
  laid_out(c, Replicate(), "relu(Partial)");
  whole(c, at::relu(A * f), "relu of a partial");

  // matmul, every pair of layouts of a [6, 4] and a [4, 5].
  const at::Tensor X = random({6, 4}, 3), M = random({4, 5}, 4);
  struct Case {
    Placement a, b, out;
  };
  for (const Case& m : {Case{Shard(0), Replicate(), Shard(0)}, Case{Replicate(), Shard(1), Shard(1)},
                        Case{Shard(1), Shard(0), Partial()}, Case{Replicate(), Replicate(), Replicate()},
                        Case{Shard(1), Replicate(), Partial()}, Case{Replicate(), Shard(0), Partial()},
                        Case{Shard(0), Shard(1), Shard(0)}, Case{Shard(1), Shard(1), Partial()},
                        Case{Shard(0), Shard(0), Partial()}}) {
    const std::string what = "matmul of " + m.a.to_string() + " and " + m.b.to_string();
    c = matmul(on(X, m.a), on(M, m.b));
    laid_out(c, m.out, what);
    whole(c, at::matmul(X, M), what);
  }
  c = sum(on(A, Shard(0)), 0);
  laid_out(c, Partial(), "sum over the sharded dimension");
  whole(c, A.sum(0), "sum(0)");
  c = sum(on(A, Shard(1)), 0);
  laid_out(c, Shard(0), "sum before the sharded dimension");
  whole(c, A.sum(0), "sum(0) of Shard(1)");
  whole(sum(on(A, Shard(1))), A.sum(), "sum of everything");
  c = reshape(on(A, Shard(0)), {6, 1, 5});
  laid_out(c, Shard(0), "reshape after the sharded dimension");
  whole(c, A.reshape({6, 1, 5}), "reshape");
  c = view(on(A.reshape({6, 5, 1}), Shard(0)), {6, 5});
  laid_out(c, Shard(0), "view that drops a trailing dimension");
  whole(c, A, "view");

  // A tensor-parallel MLP, column-wise then row-wise (Megatron's), its
  // input's layer replicated: output and every gradient as the whole
  // model's.
  const at::Tensor x = random({6, 4}, 5), w1 = random({5, 4}, 6), b1 = random({5}, 7), w2 = random({3, 5}, 8),
                   b2 = random({3}, 9), coefficient = random({6, 3}, 10);
  std::vector<at::Tensor> ref = {x.clone().requires_grad_(), w1.clone().requires_grad_(),
                                 b1.clone().requires_grad_(), w2.clone().requires_grad_(),
                                 b2.clone().requires_grad_()};
  const at::Tensor want = at::linear(at::relu(at::linear(ref[0], ref[1], ref[2])), ref[3], ref[4]);
  (want * coefficient).sum().backward();
  DTensor dx = on(x.clone().requires_grad_(), Replicate());
  DTensor dw1 = on(w1.clone().requires_grad_(), Shard(0)), db1 = on(b1.clone().requires_grad_(), Shard(0));
  DTensor dw2 = on(w2.clone().requires_grad_(), Shard(1)), db2 = on(b2.clone().requires_grad_(), Replicate());
  const DTensor h = relu(linear(dx, dw1, db1));
  laid_out(h, Shard(1), "column-wise linear and relu");
  const DTensor y = linear(h, dw2, db2);
  laid_out(y, Replicate(), "row-wise linear with a bias");
  whole(y, want.detach(), "the tensor-parallel MLP");
  (y.to_local() * coefficient).sum().backward();
  auto gradient = [&](const DTensor& d, const at::Tensor& full, const std::string& what) {
    const at::Tensor& g = d.to_local().grad();
    const Placement& pl = d.placements()[0];
    const at::Tensor expect = pl.is_shard() ? piece(full, pl.dim, k, r) : full;
    check(g.defined() && g.sizes() == expect.sizes() && at::allclose(g, expect), "the gradient of " + what);
  };
  gradient(dx, ref[0].grad(), "the replicated input (summed over the column shards)");
  gradient(dw1, ref[1].grad(), "the column-wise weight");
  gradient(db1, ref[2].grad(), "the column-wise bias");
  gradient(dw2, ref[3].grad(), "the row-wise weight");
  gradient(db2, ref[4].grad(), "the row-wise bias");
  // Data parallel: a batch-sharded input and a replicated weight.
  DTensor rows = on(x, Shard(0)), weight = on(w1.clone().requires_grad_(), Replicate());
  (linear(rows, weight).full_tensor() * random({6, 5}, 11)).sum().backward();
  const at::Tensor w_ref = w1.clone().requires_grad_();
  (at::linear(x, w_ref) * random({6, 5}, 11)).sum().backward();
  gradient(weight, w_ref.grad(), "a replicated weight of a batch-sharded input (summed over the batch)");

  const std::string shapes = invalid([&] { add(on(A, Shard(0)), on(X, Shard(0))); });
  check(shapes.find("add: the shapes differ") != std::string::npos &&
            shapes.find("Shard(dim=0)") != std::string::npos,
        "add of two shapes names the operation and layouts: " + shapes);
  const std::string sharded = invalid([&] { reshape(on(A, Shard(1)), {30}); });
  check(sharded.find("reshape: to [30] changes dimension 1, which the mesh shards") != std::string::npos,
        "a reshape of the sharded dimension: " + sharded);
}

std::string line(const std::string& name, const at::Tensor& t) {
  std::string shape = "[", values;
  for (int64_t i = 0; i < t.dim(); ++i) shape += (i ? ", " : "") + std::to_string(t.size(i));
  const at::Tensor flat = t.detach().contiguous().to(at::kDouble).flatten();
  char buf[32];
  for (int64_t i = 0; i < flat.numel(); ++i) {
    std::snprintf(buf, sizeof buf, "%.1f", flat[i].item<double>());
    values += (i ? " " : "") + std::string(buf);
  }
  return name + ": " + shape + "] " + values;
}

// compare: what tests/python/dtensor_reference.py does with torch's DTensor,
// printed the same way (4 ranks).
void compare(const at::Tensor& base) {
  const int r = cohort::testing::worker_checks().rank, k = get_world_size();
  const at::Tensor coefficient = at::arange(60, at::kDouble).reshape({10, 6}) * 0.5;
  DeviceMesh mesh = init_device_mesh("cpu", {k});
  std::vector<std::string> out;
  DTensor rows = distribute_tensor(base + r, mesh, {Shard(0)});
  out.push_back(line("Shard(0)", rows.to_local()));
  out.push_back(line("Shard(0) -> Shard(1)", rows.redistribute({Shard(1)}).to_local()));
  DTensor partial = DTensor::from_local(base * (r + 1), mesh, {Partial()});
  out.push_back(line("Partial -> Replicate", partial.redistribute({Replicate()}).to_local()));
  out.push_back(line("Partial -> Shard(0)", partial.redistribute({Shard(0)}).to_local()));
  DTensor mean = DTensor::from_local(base * (r + 1), mesh, {Partial(ReduceOp::AVG)});
  out.push_back(line("Partial(avg) -> Replicate", mean.redistribute({Replicate()}).to_local()));
  DTensor w = distribute_tensor(base.clone().requires_grad_(), mesh, {Shard(0)});
  (w.redistribute({Replicate()}).to_local() * coefficient).sum().backward();
  out.push_back(line("grad of Shard(0) -> Replicate", w.to_local().grad()));
  at::Tensor x = (base * (r + 1)).requires_grad_();
  DTensor s = DTensor::from_local(x, mesh, {Partial()}).redistribute({Shard(0)});
  (s.to_local() * piece(coefficient, 0, k, r)).sum().backward();
  out.push_back(line("grad of Partial -> Shard(0)", x.grad()));
  DeviceMesh square = init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
  DTensor grid = distribute_tensor(base, square, {Shard(0), Shard(1)});
  out.push_back(line("(Shard(0), Shard(1))", grid.to_local()));
  out.push_back(line("-> (Shard(1), Shard(0))", grid.redistribute({Shard(1), Shard(0)}).to_local()));
  out.push_back(
      line("(Replicate(), Shard(0))", distribute_tensor(base, square, {Replicate(), Shard(0)}).to_local()));
  for (const std::string& text : out) std::printf("rank %d %s\n", r, text.c_str());
}

// close: equal up to the rounding of sums taken in another order (double).
bool close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::allclose(a, b, 1e-12, 1e-12);
}

// A user module holding its parallel Linears as members: the pattern
// tensor_parallel.h documents for modules that are not a Sequential.
struct TpMlpImpl : torch::nn::Module {
  TpMlpImpl(const torch::nn::Linear& a, const torch::nn::Linear& b, const DeviceMesh& mesh)
      : fc1(register_module("fc1", parallelize_linear(a, mesh, ColwiseParallel()))),
        fc2(register_module("fc2", parallelize_linear(b, mesh, RowwiseParallel()))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  TensorParallelLinear fc1, fc2;
};
TORCH_MODULE(TpMlp);

// whole_mlp: 8 -> 10 -> 5, the same on every rank (10 hidden features cut
// 4, 4, 2 at 3 ranks and 3, 3, 3, 1 at 4).
torch::nn::Sequential whole_mlp() {
  torch::manual_seed(7);
  torch::nn::Sequential mlp(torch::nn::Linear(8, 10), torch::nn::ReLU(), torch::nn::Linear(10, 5));
  mlp->to(at::kDouble);
  return mlp;
}

// check_shards: each parallel Linear's weight and bias (or their
// gradients) are the whole model's, cut as its style cuts.
void check_shards(const std::vector<std::pair<TensorParallelLinear, torch::nn::Linear>>& pairs, int k, int r,
                  bool grads, const std::string& when) {
  auto of = [&](const at::Tensor& t) { return grads ? t.grad() : t.detach(); };
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [tp, whole] = pairs[i];
    const bool colwise = std::holds_alternative<ColwiseParallel>(tp->style());
    const std::string what = when + ", layer " + std::to_string(i) + (grads ? " gradient" : "");
    check(close(of(tp->weight), piece(of(whole->weight), colwise ? 0 : 1, k, r)), what + ": weight");
    check(close(of(tp->bias), colwise ? piece(of(whole->bias), 0, k, r) : of(whole->bias)), what + ": bias");
  }
}

void tensor_parallel(int world) {
  const DeviceMesh mesh = init_device_mesh("cpu", {world});
  const int k = mesh.size(), r = mesh.get_local_rank();
  torch::nn::Sequential whole = whole_mlp();
  torch::nn::Sequential tp = parallelize_module(whole, mesh, {{"0", ColwiseParallel()}, {"2", RowwiseParallel()}});
  auto pairs_of = [](const torch::nn::Sequential& parallel, const torch::nn::Sequential& one) {
    return std::vector<std::pair<TensorParallelLinear, torch::nn::Linear>>{
        {TensorParallelLinear(parallel->ptr<TensorParallelLinearImpl>(0)),
         torch::nn::Linear(one->ptr<torch::nn::LinearImpl>(0))},
        {TensorParallelLinear(parallel->ptr<TensorParallelLinearImpl>(2)),
         torch::nn::Linear(one->ptr<torch::nn::LinearImpl>(2))}};
  };
  const auto pairs = pairs_of(tp, whole);
  check_shards(pairs, k, r, false, "after parallelize_module");

  // Forward and backward of one batch.
  torch::manual_seed(11);
  const at::Tensor x = torch::randn({6, 8}, at::kDouble), coefficient = torch::randn({6, 5}, at::kDouble);
  at::Tensor x_whole = x.clone().requires_grad_(), x_tp = x.clone().requires_grad_();
  const at::Tensor y_whole = whole->forward(x_whole);
  const at::Tensor y_tp = tp->forward(x_tp);
  check(close(y_tp, y_whole), "Sequential forward: output as the one-process model's");
  (y_whole * coefficient).sum().backward();
  (y_tp * coefficient).sum().backward();
  check(close(x_tp.grad(), x_whole.grad()), "input gradient as the one-process model's");
  check_shards(pairs, k, r, true, "one backward");

  // Three SGD steps on the shards against three on the whole model; the
  // user-module form trains alongside, from its own copy of the start.
  torch::nn::Sequential start = whole_mlp();
  TpMlp user(torch::nn::Linear(start->ptr<torch::nn::LinearImpl>(0)),
             torch::nn::Linear(start->ptr<torch::nn::LinearImpl>(2)), mesh);
  torch::nn::Sequential reference = whole_mlp();
  torch::nn::Sequential parallel = parallelize_module(reference, mesh, {{"0", ColwiseParallel()}, {"2", RowwiseParallel()}});
  torch::optim::SGD on_whole(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD on_shards(parallel->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD on_user(user->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const at::Tensor batch = torch::randn({6, 8}, at::kDouble), target = torch::randn({6, 5}, at::kDouble);
    for (auto* opt : {&on_whole, &on_shards, &on_user}) opt->zero_grad();
    torch::mse_loss(reference->forward(batch), target).backward();
    torch::mse_loss(parallel->forward(batch), target).backward();
    torch::mse_loss(user->forward(batch), target).backward();
    for (auto* opt : {&on_whole, &on_shards, &on_user}) opt->step();
  }
  check_shards(pairs_of(parallel, reference), k, r, false, "three SGD steps");
  check_shards({{user->fc1, torch::nn::Linear(reference->ptr<torch::nn::LinearImpl>(0))},
                {user->fc2, torch::nn::Linear(reference->ptr<torch::nn::LinearImpl>(2))}},
               k, r, false, "three SGD steps of a user module");

  // Other layouts: a column-wise Linear whose output is gathered whole, a
  // row-wise one whose input arrives whole (each rank cuts its part).
  torch::nn::Sequential other = parallelize_module(
      whole, mesh, {{"0", ColwiseParallel{Replicate(), Replicate()}}, {"2", RowwiseParallel{Replicate(), Replicate()}}});
  check(close(other->forward(x), whole->forward(x)), "Colwise to Replicate, Rowwise from Replicate: output");

  // A plan that names what is not there says so.
  check(invalid([&] { parallelize_module(whole, mesh, {{"fc1", ColwiseParallel()}}); })
                .find("the plan names 'fc1', which is not an entry of the 3-entry Sequential") != std::string::npos,
        "a plan naming no entry is refused, naming it");
  check(invalid([&] { parallelize_module(whole, mesh, {{"1", RowwiseParallel()}}); })
                .find("entry '1' is a torch::nn::ReLU; RowwiseParallel applies to a Linear or an Embedding") !=
                std::string::npos,
        "a plan naming a ReLU is refused, naming it: " +
            invalid([&] { parallelize_module(whole, mesh, {{"1", RowwiseParallel()}}); }));
}

// tensor_parallel_embedding: an Embedding cut column- and row-wise, each
// output layout, against the whole table's lookup and gradient (float64,
// 11 rows: uneven at 2, 3 and 4 ranks; padding_idx 3 on one rank's rows).
void tensor_parallel_embedding(int world) {
  const DeviceMesh mesh = init_device_mesh("cpu", {world});
  const int k = mesh.size(), r = mesh.get_local_rank();
  torch::manual_seed(21);
  torch::nn::Embedding whole(torch::nn::EmbeddingOptions(11, 6).padding_idx(3));
  whole->to(at::kDouble);
  // 2 x 12 indices (12 columns: cut evenly at 2, 3 and 4 ranks), every
  // row of the table and the padding row among them.
  const at::Tensor indices = torch::tensor({0, 3, 10, 5, 7, 7, 1, 9, 2, 4, 6, 8, 3, 10, 10, 0, 1, 2, 5, 5, 9, 8, 7, 6},
                                           at::kLong)
                                 .reshape({2, 12});
  const at::Tensor coefficient = torch::randn({2, 12, 6}, at::kDouble);
  whole->weight.mutable_grad() = at::Tensor();
  const at::Tensor y_whole = whole->forward(indices);
  (y_whole * coefficient).sum().backward();
  const at::Tensor grad_whole = whole->weight.grad().clone();

  struct Case {
    std::string name;
    ParallelStyle style;
    int weight_dim;  // the table's cut
    int output_dim;  // the output's cut (-1: whole)
    int input_dim;   // how the indices arrive (-1: whole)
  };
  const std::vector<Case> cases = {
      {"ColwiseParallel (output Shard(-1))", ColwiseParallel(), 1, 2, -1},
      {"ColwiseParallel to Replicate", ColwiseParallel{Replicate(), Replicate()}, 1, -1, -1},
      {"RowwiseParallel{Replicate()} (output Replicate)", RowwiseParallel{Replicate()}, 0, -1, -1},
      {"RowwiseParallel to Shard(1) (sequence)", RowwiseParallel{Replicate(), Shard(1)}, 0, 1, -1},
      {"RowwiseParallel (indices arriving Shard(-1))", RowwiseParallel(), 0, -1, 1},
  };
  for (const Case& c : cases) {
    TensorParallelEmbedding tp = parallelize_embedding(whole, mesh, c.style);
    check(same(tp->weight, piece(whole->weight.detach(), c.weight_dim, k, r)), c.name + ": this rank's shard");
    const at::Tensor in = c.input_dim < 0 ? indices : piece(indices, c.input_dim, k, r).contiguous();
    const at::Tensor y = tp->forward(in);
    const at::Tensor want = c.output_dim < 0 ? y_whole : piece(y_whole, c.output_dim, k, r);
    check(y.sizes() == want.sizes() && at::allclose(y, want), c.name + ": output as the whole table's");
    const at::Tensor coefficient_here = c.output_dim < 0 ? coefficient : piece(coefficient, c.output_dim, k, r);
    // A whole output's loss is every rank's (its gradient the whole
    // coefficient); a cut one's is this rank's part of the sum.
    (y * coefficient_here).sum().backward();
    check(tp->weight.grad().defined() && at::allclose(tp->weight.grad(), piece(grad_whole, c.weight_dim, k, r)),
          c.name + ": the shard's gradient as the whole table's");
  }

  // In a plan, beside a Linear.
  torch::manual_seed(22);
  torch::nn::Sequential model(torch::nn::Embedding(11, 6), torch::nn::Linear(6, 5));
  model->to(at::kDouble);
  torch::nn::Sequential parallel = parallelize_module(
      model, mesh, {{"0", RowwiseParallel{Replicate()}}, {"1", ColwiseParallel{Replicate(), Replicate()}}});
  check(close(parallel->forward(indices), model->forward(indices)), "a plan with an Embedding: output");
  check(invalid([&] {
          parallelize_embedding(torch::nn::Embedding(torch::nn::EmbeddingOptions(11, 6).max_norm(1.0)), mesh,
                                RowwiseParallel{Replicate()});
        }).find("max_norm renormalises rows of the whole table in place") != std::string::npos,
        "max_norm is refused, saying why");
}

// Block: a transformer block (pre-norm attention with 4 heads, then a
// pre-norm MLP) over modules held as AnyModule, so that the same code runs
// whole and with its modules swapped for parallel ones. The attention
// takes its heads from what q gives: all of them whole, this rank's under
// tensor parallelism.
struct BlockImpl : torch::nn::Module {
  static constexpr int64_t kWidth = 12, kHeadDim = 3;
  BlockImpl() {
    torch::manual_seed(31);
    ln1 = torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})));
    q = torch::nn::AnyModule(torch::nn::Linear(kWidth, kWidth));
    k = torch::nn::AnyModule(torch::nn::Linear(kWidth, kWidth));
    v = torch::nn::AnyModule(torch::nn::Linear(kWidth, kWidth));
    o = torch::nn::AnyModule(torch::nn::Linear(kWidth, kWidth));
    ln2 = torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})));
    fc1 = torch::nn::AnyModule(torch::nn::Linear(kWidth, 2 * kWidth));
    fc2 = torch::nn::AnyModule(torch::nn::Linear(2 * kWidth, kWidth));
    for (auto* m : {&ln1, &q, &k, &v, &o, &ln2, &fc1, &fc2}) m->ptr()->to(at::kDouble);
    for (auto* m : {&ln1, &ln2}) {  // not the identity LayerNorm starts as
      torch::NoGradGuard no_grad;
      for (auto& p : m->ptr()->parameters()) p.copy_(torch::randn_like(p));
    }
    enroll();
  }
  void enroll() {
    const char* names[] = {"ln1", "q", "k", "v", "o", "ln2", "fc1", "fc2"};
    torch::nn::AnyModule* mods[] = {&ln1, &q, &k, &v, &o, &ln2, &fc1, &fc2};
    for (int i = 0; i < 8; ++i) {
      if (named_children().contains(names[i])) {
        replace_module(names[i], mods[i]->ptr());
      } else {
        register_module(names[i], mods[i]->ptr());
      }
    }
  }
  at::Tensor attention(const at::Tensor& h) {
    const at::Tensor Q = q.forward(h), K = k.forward(h), V = v.forward(h);
    const int64_t b = Q.size(0), s = Q.size(1), heads = Q.size(2) / kHeadDim;
    auto split = [&](const at::Tensor& t) { return t.reshape({b, s, heads, kHeadDim}).transpose(1, 2); };
    const at::Tensor scores = torch::softmax(split(Q).matmul(split(K).transpose(-2, -1)) / std::sqrt(3.0), -1);
    return o.forward(scores.matmul(split(V)).transpose(1, 2).reshape({b, s, heads * kHeadDim}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = x + attention(ln1.forward(x));
    return h + fc2.forward(torch::gelu(fc1.forward(ln2.forward(h))));
  }
  torch::nn::AnyModule ln1, q, k, v, o, ln2, fc1, fc2;
};
TORCH_MODULE(Block);

// tensor_parallel_block: the Block under tensor and sequence parallelism,
// as torch's tutorial plans a Llama block: the norms SequenceParallel (on
// this rank's part of the sequence), q/k/v ColwiseParallel from a
// sequence-cut input (gathered), o RowwiseParallel to a sequence-cut
// output (the partial products reduced and cut), the MLP likewise; output,
// input gradient and every parameter's gradient against the whole block,
// at 2 and 4 ranks (2 heads a rank, then 1).
void tensor_parallel_block(int world) {
  if (world != 2 && world != 4) return;  // 8 positions, 4 heads: cut evenly
  const DeviceMesh mesh = init_device_mesh("cpu", {world});
  const int k = mesh.size(), r = mesh.get_local_rank();
  Block whole, parallel;
  const ColwiseParallel from_sequence{Shard(1), Shard(-1)};
  const RowwiseParallel to_sequence{Shard(-1), Shard(1)};
  auto linear = [&](torch::nn::AnyModule& m, const ParallelStyle& style) {
    m = torch::nn::AnyModule(parallelize_linear(torch::nn::Linear(m.ptr<torch::nn::LinearImpl>()), mesh, style));
  };
  auto sequence = [&](torch::nn::AnyModule& m) {
    m = torch::nn::AnyModule(SequenceParallelModule(m.ptr(), mesh, SequenceParallel()));
  };
  sequence(parallel->ln1);
  sequence(parallel->ln2);
  for (auto* m : {&parallel->q, &parallel->k, &parallel->v, &parallel->fc1}) linear(*m, from_sequence);
  for (auto* m : {&parallel->o, &parallel->fc2}) linear(*m, to_sequence);
  parallel->enroll();

  torch::manual_seed(32);
  const at::Tensor x = torch::randn({2, 8, BlockImpl::kWidth}, at::kDouble), coefficient = torch::randn_like(x);
  at::Tensor x_whole = x.clone().requires_grad_(), x_part = piece(x, 1, k, r).clone().requires_grad_();
  const at::Tensor y_whole = whole->forward(x_whole), y_part = parallel->forward(x_part);
  check(close(y_part, piece(y_whole, 1, k, r)), "block: this rank's part of the sequence as the whole block's");
  (y_whole * coefficient).sum().backward();
  (y_part * piece(coefficient, 1, k, r)).sum().backward();
  check(close(x_part.grad(), piece(x_whole.grad(), 1, k, r)), "block: the input's gradient");
  // Each parallel parameter against the whole one's gradient, cut as the
  // parameter is: the norms whole, q/k/v/fc1 by rows (bias too), o/fc2 by
  // columns (bias whole).
  struct Expect {
    const char* name;
    int weight_dim, bias_dim;  // -1: whole
  };
  const Expect expects[] = {{"ln1", -1, -1}, {"q", 0, 0},   {"k", 0, 0},    {"v", 0, 0},
                            {"o", 1, -1},    {"ln2", -1, -1}, {"fc1", 0, 0}, {"fc2", 1, -1}};
  const auto parallel_parameters = parallel->named_parameters(), whole_parameters = whole->named_parameters();
  for (const Expect& e : expects) {
    for (const char* which : {"weight", "bias"}) {
      const at::Tensor* mine = parallel_parameters.find(std::string(e.name) + "." + which);
      if (!mine) mine = parallel_parameters.find(std::string(e.name) + ".norm." + which);
      const at::Tensor* theirs = whole_parameters.find(std::string(e.name) + "." + which);
      check(mine && theirs, std::string("block: ") + e.name + "." + which + " is there");
      if (!mine || !theirs) continue;
      const int dim = std::string(which) == "weight" ? e.weight_dim : e.bias_dim;
      const at::Tensor want = dim < 0 ? theirs->grad() : piece(theirs->grad(), dim, k, r);
      check(mine->grad().defined() && close(mine->grad(), want),
            std::string("block: the gradient of ") + e.name + "." + which);
    }
  }
  // PrepareModuleInput and PrepareModuleOutput around a column-wise Linear:
  // the sequence-cut input gathered, the feature-cut output gathered; the
  // input's gradient comes back cut as the input came.
  {
    torch::manual_seed(33);
    torch::nn::Linear fc(BlockImpl::kWidth, 8);
    fc->to(at::kDouble);
    PrepareModuleInputModule gathered(torch::nn::AnyModule(parallelize_linear(fc, mesh, ColwiseParallel())), mesh,
                                      PrepareModuleInput{Shard(1), Replicate()});
    PrepareModuleOutputModule wrapped(torch::nn::AnyModule(gathered), mesh, PrepareModuleOutput{Shard(-1), Replicate()});
    at::Tensor in_whole = x.clone().requires_grad_(), in_part = piece(x, 1, k, r).clone().requires_grad_();
    const at::Tensor want = fc->forward(in_whole), got = wrapped->forward(in_part);
    check(close(got, want), "PrepareModuleInput/Output around a ColwiseParallel Linear: output whole");
    const at::Tensor c = torch::randn_like(want);
    (want * c).sum().backward();
    (got * c).sum().backward();
    check(close(in_part.grad(), piece(in_whole.grad(), 1, k, r)), "PrepareModuleInput: the input's gradient, cut");
  }

  // Through a plan: a LayerNorm entry runs on this rank's part; a ReLU
  // entry is refused, naming what the style applies to.
  torch::nn::Sequential norm_then_relu(torch::nn::LayerNorm(torch::nn::LayerNormOptions({BlockImpl::kWidth})),
                                       torch::nn::ReLU());
  norm_then_relu->to(at::kDouble);
  check(close(parallelize_module(norm_then_relu, mesh, {{"0", SequenceParallel()}})->forward(piece(x, 1, k, r)),
              piece(norm_then_relu->forward(x), 1, k, r)),
        "a SequenceParallel LayerNorm through parallelize_module");
  check(invalid([&] { parallelize_module(norm_then_relu, mesh, {{"1", SequenceParallel()}}); })
                .find("entry '1' is a torch::nn::ReLU; SequenceParallel applies to a LayerNorm or a Dropout") !=
            std::string::npos,
        "SequenceParallel on a ReLU is refused");
  check(invalid([&] { parallelize_linear(torch::nn::Linear(4, 4), mesh, SequenceParallel()); })
                .find("SequenceParallel applies to a LayerNorm or a Dropout; a Linear takes ColwiseParallel or "
                      "RowwiseParallel") != std::string::npos,
        "SequenceParallel on a Linear is refused, saying what applies");
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const bool comparing = argc > 1 && std::string(argv[1]) == "compare";
  try {
    init_process_group();
    cohort::testing::worker_checks().rank = get_rank();
    const int world = get_world_size();
    const at::Tensor base = at::arange(60, at::kDouble).reshape({10, 6});
    if (comparing) {
      compare(base);
    } else if (argc > 1 && std::string(argv[1]) == "tensor_parallel") {
      tensor_parallel(world);
      tensor_parallel_embedding(world);
      tensor_parallel_block(world);
    } else {
      const DeviceMesh flat = init_device_mesh("cpu", {world});
      one_dimension(flat, base);
      operators(flat);
      if (world == 4) two_dimensions(init_device_mesh("cpu", {2, 2}, {"dp", "tp"}), base);
    }
    destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d wrong: %s\n", cohort::testing::worker_checks().rank, e.what());
    return 1;
  }
  if (cohort::testing::worker_checks().failures) return 1;
  std::printf("rank %d ok: every piece and gradient as the whole tensor's\n",
              cohort::testing::worker_checks().rank);
  return 0;
}
