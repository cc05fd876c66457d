// dtensor_worker: one rank of tests/torch/dtensor_process_test.cc, joined
// by env:// (3 or 4 ranks). Lays a known 10 x 6 tensor out over a 1-D mesh
// (and, at 4 ranks, a 2 x 2 mesh), moves it between placements, runs
// backward through each kind of redistribution, and checks every local
// piece and gradient against the same arithmetic on the whole tensor.
// Prints "rank R ok: ..." and exits 0, or says what was wrong and exits 1.
// With the argument "compare" it prints instead, a line each, what
// tests/python/dtensor_reference.py prints of torch's DTensor (4 ranks).
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "cohort/dtensor.h"
#include "cohort/errors.h"

using namespace cohort;

namespace {

int rank_ = -1;
int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("rank %d wrong: %s\n", rank_, what.c_str());
  std::fflush(stdout);
}

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
  const int r = rank_, k = get_world_size();
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

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const bool comparing = argc > 1 && std::string(argv[1]) == "compare";
  try {
    init_process_group();
    rank_ = get_rank();
    const int world = get_world_size();
    const at::Tensor base = at::arange(60, at::kDouble).reshape({10, 6});
    if (comparing) {
      compare(base);
    } else {
      one_dimension(init_device_mesh("cpu", {world}), base);
      if (world == 4) two_dimensions(init_device_mesh("cpu", {2, 2}, {"dp", "tp"}), base);
    }
    destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d wrong: %s\n", rank_, e.what());
    return 1;
  }
  if (failures) return 1;
  std::printf("rank %d ok: every piece and gradient as the whole tensor's\n", rank_);
  return 0;
}
