// gloo_bench: libtorch's ProcessGroupGloo (the anchor cohort's TCP path is
// measured against), timed exactly as cohort-bench times cohort, and printed
// in the same columns.
//
//   gloo_bench all_reduce [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] --spawn N
//
// Each rank is a process; --spawn N starts them (fork before libtorch does
// any work), ranks meet through a c10d::FileStore. float32, SUM.
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "common/size_text.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int run_rank(int rank, int n, const std::string& path, size_t min_bytes, size_t max_bytes, double factor,
             int iters, int warmup) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, n);
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(120));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  c10d::ProcessGroupGloo pg(store, rank, n, options);
  if (rank == 0) {
    std::printf("# gloo_bench all_reduce, %d ranks, %d iterations after %d warm-up\n", n, iters, warmup);
    std::printf("%12s %12s %8s %6s %5s %10s %10s %10s %7s\n", "size", "count", "type", "redop", "root",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  double busbw_sum = 0;
  int sizes = 0;
  for (size_t bytes = std::max<size_t>(min_bytes, 4); bytes <= max_bytes;
       bytes = std::max(bytes + 4, static_cast<size_t>(std::llround(static_cast<double>(bytes) * factor)))) {
    const int64_t count = static_cast<int64_t>(bytes / 4);
    std::vector<at::Tensor> tensors = {at::full({count}, static_cast<float>(rank % 4), at::kFloat)};
    for (int i = 0; i < warmup; ++i) pg.allreduce(tensors)->wait();
    std::vector<at::Tensor> none;
    pg.barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) pg.allreduce(tensors)->wait();
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    std::vector<at::Tensor> t = {at::full({1}, us, at::kDouble)};
    c10d::AllreduceOptions max;
    max.reduceOp = c10d::ReduceOp::MAX;
    pg.allreduce(t, max)->wait();
    us = t[0].item<double>();
    double algbw = static_cast<double>(count * 4) / us / 1e3;
    double busbw = algbw * 2.0 * (n - 1) / n;
    busbw_sum += busbw;
    ++sizes;
    if (rank == 0) {
      std::printf("%12lld %12lld %8s %6s %5d %10.3f %10.3f %10.3f %7s\n", static_cast<long long>(count * 4),
                  static_cast<long long>(count), "float32", "SUM", -1, us, algbw, busbw, "-");
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("# Avg bus bandwidth    : %.3f GB/s\n", sizes ? busbw_sum / sizes : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t min_bytes = 8, max_bytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 5, spawn = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "-b")
      min_bytes = cohort::parse_size_text(argv[i + 1]);
    else if (f == "-e")
      max_bytes = cohort::parse_size_text(argv[i + 1]);
    else if (f == "-f")
      factor = std::atof(argv[i + 1]);
    else if (f == "-n")
      iters = std::atoi(argv[i + 1]);
    else if (f == "-w")
      warmup = std::atoi(argv[i + 1]);
    else if (f == "--spawn")
      spawn = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: gloo_bench all_reduce [-b MIN] [-e MAX] [-f F] [-n N] [-w W] [--spawn P]\n");
      return 2;
    }
  }
  if (argc < 2 || std::string(argv[1]) != "all_reduce") {
    std::fprintf(stderr, "gloo_bench measures all_reduce only\n");
    return 2;
  }
  std::string path = "/tmp/gloo-bench-" + std::to_string(getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < spawn; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(run_rank(r, spawn, path, min_bytes, max_bytes, factor, iters, warmup));
    pids.push_back(pid);
  }
  int status = 0;
  for (pid_t p : pids) {
    int s;
    waitpid(p, &s, 0);
    if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) status = 1;
  }
  unlink(path.c_str());
  return status;
}
