// The tutorial's non-blocking point-to-point: isend/irecv return at once;
// the buffer is the operation's until wait() returns.
#include <cstdio>

#include "cohort/distributed.h"

int main() {
  cohort::init_process_group();
  const int rank = cohort::get_rank();
  float tensor = 0;
  std::shared_ptr<cohort::Work> req;
  if (rank == 0) {
    tensor += 1;
    req = cohort::isend(cohort::Buffer::of(&tensor, 1), 1);
    std::printf("Rank 0 started sending\n");
  } else {
    req = cohort::irecv(cohort::Buffer::of(&tensor, 1), 0);
    std::printf("Rank 1 started receiving\n");
  }
  req->wait();
  std::printf("Rank %d has data %.1f\n", rank, tensor);
  cohort::destroy_process_group();
}
