// The tutorial's ring all-reduce with addition, built from isend and recv:
// size-1 rounds, each sending the last thing received to the right and
// adding what comes from the left.
#include <cstdio>
#include <vector>

#include "cohort/distributed.h"

// allreduce stores in `recv` the sum over ranks of `send` (the tutorial's
// signature).
void allreduce(const std::vector<float>& send, std::vector<float>& recv) {
  const int rank = cohort::get_rank(), size = cohort::get_world_size();
  std::vector<float> send_buff = send, recv_buff = send, accum = send;
  const int left = (rank - 1 + size) % size, right = (rank + 1) % size;
  for (int i = 0; i < size - 1; ++i) {
    std::vector<float>& out = i % 2 == 0 ? send_buff : recv_buff;
    std::vector<float>& in = i % 2 == 0 ? recv_buff : send_buff;
    auto send_req = cohort::isend(cohort::Buffer::of(out), right);
    cohort::recv(cohort::Buffer::of(in), left);
    for (size_t k = 0; k < accum.size(); ++k) accum[k] += in[k];
    send_req->wait();
  }
  recv = accum;
}

int main() {
  cohort::init_process_group();
  const int rank = cohort::get_rank();
  std::vector<float> send(1000, static_cast<float>(rank + 1)), recv(1000);
  allreduce(send, recv);
  std::printf("Rank %d has data %.1f\n", rank, recv[0]);
  cohort::destroy_process_group();
}
