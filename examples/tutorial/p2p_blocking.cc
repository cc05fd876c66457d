// The tutorial's blocking point-to-point (seeds/001, "Point-to-Point
// Communication"): rank 0 adds 1 to a zero and sends it; rank 1 receives.
// Run with two ranks: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set.
#include <cstdio>

#include "cohort/distributed.h"

int main() {
  cohort::init_process_group();  // env://
  const int rank = cohort::get_rank();
  float tensor = 0;
  if (rank == 0) {
    tensor += 1;
    cohort::send(cohort::Buffer::of(&tensor, 1), /*dst=*/1);  // blocks until sent
  } else {
    cohort::recv(cohort::Buffer::of(&tensor, 1), /*src=*/0);  // blocks until received
  }
  std::printf("Rank %d has data %.1f\n", rank, tensor);
  cohort::destroy_process_group();
}
