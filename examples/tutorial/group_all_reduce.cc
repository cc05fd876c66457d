// The tutorial's collective: a group of ranks 0 and 1 sums a tensor of ones.
// Every rank calls new_group and all_reduce, as in torch: on ranks outside
// the group the handle is not a member and the call does nothing.
#include <cstdio>

#include "cohort/distributed.h"

int main() {
  cohort::init_process_group();
  const int rank = cohort::get_rank();
  auto group = cohort::new_group({0, 1});
  float tensor = 1;
  cohort::AllReduceOptions options;
  options.op = cohort::ReduceOp::SUM;
  cohort::all_reduce(cohort::Buffer::of(&tensor, 1), options, group);
  std::printf("Rank %d has data %.1f\n", rank, tensor);
  cohort::destroy_process_group();
}
