// Built against an install tree by check_install.cmake where cohort has its
// libtorch layer: proves that cohort::cohort_torch is usable from there.
#include <cohort/torch.h>  // the umbrella header of cohort::cohort_torch
#include <torch/torch.h>

#include <cstdio>

int main() {
  auto group = cohort::make_group(std::make_shared<cohort::HashStore>(), 0, 1, std::chrono::seconds(30));
  torch::Tensor t = torch::arange(4, torch::kFloat32);
  cohort::all_reduce(t, cohort::ReduceOp::SUM, group);
  std::printf("tensor sum from an installed cohort_torch: %g\n", t.sum().item<double>());
  return t.sum().item<double>() == 6.0 ? 0 : 1;
}
