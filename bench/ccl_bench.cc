// ccl_bench: Intel oneCCL's collectives in cohort-bench's columns, so that
// bench/compare_peers.sh can put them beside cohort, Open MPI and Intel MPI.
//
//   mpiexec.hydra -n P ccl_bench all_reduce|all_gather|reduce_scatter|broadcast|all_to_all
//                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-R ROUNDS]
//
// Same conventions as bench/mpi_bench.c: float32 SUM, root 0, size is the
// total bytes (nccl-tests'), time the slowest rank's mean per iteration
// (with -R, the median of that many rounds' means).
// MPI (Intel MPI's, under which oneCCL's own transport runs with
// CCL_ATL_TRANSPORT=mpi) starts the ranks and hands rank 0's key-value
// store address to the others. Not built by CMake: bench/compare_peers.sh
// builds it against the oneCCL it installs in a folder of its own.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "oneapi/ccl.hpp"

namespace {

long long parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
  }
  return static_cast<long long>(v);
}

enum class Which { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };

}  // namespace

int main(int argc, char** argv) {
  // oneCCL over MPI (CCL_ATL_TRANSPORT=mpi) asks for MPI_THREAD_MULTIPLE.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0)
      std::fprintf(stderr, "usage: ccl_bench COLLECTIVE [-b MIN] [-e MAX] [-f F] [-n N] [-w W]\n");
    MPI_Finalize();
    return 2;
  }
  const std::string c = argv[1];
  long long min_bytes = 4, max_bytes = 64 << 20;
  double factor = 4;
  int iters = 20, warmup = 5, rounds = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-b"))
      min_bytes = parse_size(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-e"))
      max_bytes = parse_size(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-f"))
      factor = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-n"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w"))
      warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-R"))
      rounds = std::max(1, std::atoi(argv[i + 1]));
  }
  Which which;
  double bus = 1;
  if (c == "all_reduce") {
    which = Which::kAllReduce;
    bus = 2.0 * (n - 1) / n;
  } else if (c == "all_gather") {
    which = Which::kAllGather;
    bus = static_cast<double>(n - 1) / n;
  } else if (c == "reduce_scatter") {
    which = Which::kReduceScatter;
    bus = static_cast<double>(n - 1) / n;
  } else if (c == "broadcast") {
    which = Which::kBroadcast;
  } else if (c == "all_to_all") {
    which = Which::kAllToAll;
    bus = static_cast<double>(n - 1) / n;
  } else {
    if (rank == 0) std::fprintf(stderr, "ccl_bench: unknown collective '%s'\n", c.c_str());
    MPI_Finalize();
    return 2;
  }

  ccl::init();
  ccl::shared_ptr_class<ccl::kvs> kvs;
  ccl::kvs::address_type address;
  if (rank == 0) {
    kvs = ccl::create_main_kvs();
    address = kvs->get_address();
  }
  MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank != 0) kvs = ccl::create_kvs(address);
  auto comm = ccl::create_communicator(n, rank, kvs);

  // On pages and filled with data, as cohort-bench's and mpi_bench's are.
  float *in = nullptr, *out = nullptr;
  if (posix_memalign(reinterpret_cast<void**>(&in), 4096, static_cast<size_t>(max_bytes) + 64) ||
      posix_memalign(reinterpret_cast<void**>(&out), 4096, static_cast<size_t>(max_bytes) + 64)) {
    std::fprintf(stderr, "ccl_bench: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < static_cast<size_t>(max_bytes) / 4 + 16; ++i) {
    in[i] = static_cast<float>(rank + 1 + i % 1000);
    out[i] = 0.5f;
  }
  if (rank == 0) {
    std::printf("# ccl_bench %s, %d ranks, %d iterations after %d warm-up\n", c.c_str(), n, iters, warmup);
    std::printf("%12s %12s %8s %6s %5s %10s %10s %10s %7s\n", "size", "count", "type", "redop", "root",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  for (long long bytes = min_bytes; bytes <= max_bytes;) {
    long long count = bytes / 4;
    size_t per_rank = 0;
    if (which == Which::kAllGather || which == Which::kReduceScatter || which == Which::kAllToAll) {
      per_rank = static_cast<size_t>(count / n > 0 ? count / n : 1);
      count = static_cast<long long>(per_rank) * n;
    }
    // Warm-up, then `rounds` timed rounds of `iters` calls; the time is the
    // median round's mean (as cohort-bench -R).
    std::vector<double> times;
    for (int r = -1; r < rounds; ++r) {
      const int calls = r < 0 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < calls; ++i) {
        switch (which) {
          case Which::kAllReduce:
            ccl::allreduce(in, out, static_cast<size_t>(count), ccl::reduction::sum, comm).wait();
            break;
          case Which::kAllGather:
            ccl::allgather(in, out, per_rank, comm).wait();
            break;
          case Which::kReduceScatter:
            ccl::reduce_scatter(in, out, per_rank, ccl::reduction::sum, comm).wait();
            break;
          case Which::kBroadcast:
            ccl::broadcast(in, static_cast<size_t>(count), 0, comm).wait();
            break;
          case Which::kAllToAll:
            ccl::alltoall(in, out, per_rank, comm).wait();
            break;
        }
      }
      if (r < 0) continue;
      double us = (MPI_Wtime() - t0) * 1e6 / iters, slowest = 0;
      MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      times.push_back(slowest);
    }
    if (rank == 0) {
      std::sort(times.begin(), times.end());
      const size_t mid = times.size() / 2;
      const double slowest = times.size() % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
      const double algbw = slowest > 0 ? static_cast<double>(count * 4) / slowest / 1e3 : 0;
      std::printf("%12lld %12lld %8s %6s %5d %10.3f %10.3f %10.3f %7d\n", count * 4, count, "float32", "SUM",
                  0, slowest, algbw, algbw * bus, 0);
    }
    if (bytes == max_bytes) break;
    const long long next = static_cast<long long>(bytes * factor);
    bytes = next > max_bytes ? max_bytes : (next == bytes ? bytes + 1 : next);
  }
  std::free(in);
  std::free(out);
  MPI_Finalize();
  return 0;
}
