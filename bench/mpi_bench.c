/* mpi_bench: Open MPI's collectives in cohort-bench's columns, so that
 * bench/compare_shm.sh can put them side by side.
 *
 *   mpirun -np P mpi_bench all_reduce|all_gather|reduce_scatter|broadcast|barrier|ping_pong
 *          [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-R ROUNDS]
 *
 * float32 SUM, root 0; size is the total bytes (nccl-tests' convention);
 * time is the slowest rank's mean per iteration (with -R, the median of
 * that many rounds' means). ping_pong: rank 0 sends
 * to rank 1 (MPI_Send/MPI_Recv), which sends it back; time is half the
 * round trip (osu_latency's convention), the other ranks idle.
 *
 * MPI_BENCH_THREAD_LEVEL=serialized asks MPI_Init_thread for
 * MPI_THREAD_SERIALIZED, the level cohort's mpi backend (and torch's
 * ProcessGroupMPI) needs; Open MPI then locks inside every call. The
 * default is plain MPI_Init (MPI_THREAD_SINGLE, no locks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return (long long)v;
}

int main(int argc, char** argv) {
  const char* level = getenv("MPI_BENCH_THREAD_LEVEL");
  if (level && !strcmp(level, "serialized")) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: mpi_bench COLLECTIVE [-b MIN] [-e MAX] [-f F] [-n N] [-w W]\n");
    MPI_Finalize();
    return 2;
  }
  const char* c = argv[1];
  long long min_bytes = 4, max_bytes = 64 << 20;
  double factor = 4;
  int iters = 20, warmup = 5, rounds = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) min_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) max_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-R")) rounds = atoi(argv[i + 1]);
  }
  /* Picked once, not by strcmp in every timed call (as cohort-bench). */
  enum { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll, kBarrier, kPingPong } which;
  double bus = 1;
  if (!strcmp(c, "all_reduce")) {
    which = kAllReduce;
    bus = 2.0 * (n - 1) / n;
  } else if (!strcmp(c, "all_gather")) {
    which = kAllGather;
    bus = (double)(n - 1) / n;
  } else if (!strcmp(c, "reduce_scatter")) {
    which = kReduceScatter;
    bus = (double)(n - 1) / n;
  } else if (!strcmp(c, "broadcast")) {
    which = kBroadcast;
  } else if (!strcmp(c, "reduce")) {
    which = kReduce;
  } else if (!strcmp(c, "all_to_all")) {
    which = kAllToAll;
    bus = (double)(n - 1) / n;
  } else if (!strcmp(c, "barrier")) {
    which = kBarrier;
  } else if (!strcmp(c, "ping_pong") && n >= 2) {
    which = kPingPong;
  } else {
    if (rank == 0) fprintf(stderr, "mpi_bench: unknown collective '%s' (ping_pong needs 2 ranks)\n", c);
    MPI_Finalize();
    return 2;
  }
  const int barrier = which == kBarrier;
  if (barrier) min_bytes = max_bytes = 0;
  /* Buffers start on a page, as cohort-bench's do: where a buffer starts
   * changes the speed of its copies (this program's 64 KiB all_gather at 2
   * ranks ran 10-15% slower from a heap block than from a page). */
  float *in = NULL, *out = NULL;
  if (posix_memalign((void**)&in, 4096, (size_t)max_bytes + 64) || posix_memalign((void**)&out, 4096, (size_t)max_bytes + 64)) {
    fprintf(stderr, "mpi_bench: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* Fill the input with data, as cohort-bench does. A zero fill is not a
   * fill: GCC turns malloc + memset(0) into calloc, the pages stay unmapped
   * and every read of them hits the kernel's one shared zero page, which
   * sits in L1. Broadcast and all_gather then read their source from cache
   * and looked ~1.8x faster than any real buffer allows (found 2026-11-23;
   * the tables before that overstate Open MPI there). */
  for (size_t i = 0; i < (size_t)max_bytes / 4 + 16; ++i) {
    in[i] = (float)(rank + 1 + i % 1000);
    out[i] = 0.5f;
  }
  if (rank == 0) {
    printf("# mpi_bench %s, %d ranks, %d iterations after %d warm-up\n", c, n, iters, warmup);
    printf("%12s %12s %8s %6s %5s %10s %10s %10s %7s\n", "size", "count", "type", "redop", "root", "time(us)",
           "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  for (long long bytes = min_bytes; bytes <= max_bytes;) {
    long long count = bytes / 4;
    int per_rank = 0;
    if (which == kAllGather || which == kReduceScatter || which == kAllToAll) {
      per_rank = (int)(count / n > 0 ? count / n : 1);
      count = (long long)per_rank * n;
    }
    /* Warm-up, then `rounds` timed rounds of `iters` calls; the time is the
     * median round's mean (as cohort-bench -R). */
    double times[64];
    if (rounds > 64) rounds = 64;
    if (rounds < 1) rounds = 1;
    for (int r = -1; r < rounds; ++r) {
      const int calls = r < 0 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < calls; ++i) {
        switch (which) {
          case kAllReduce:
            MPI_Allreduce(MPI_IN_PLACE, in, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
          case kAllGather:
            MPI_Allgather(in, per_rank, MPI_FLOAT, out, per_rank, MPI_FLOAT, MPI_COMM_WORLD);
            break;
          case kReduceScatter:
            MPI_Reduce_scatter_block(in, out, per_rank, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
          case kBroadcast:
            MPI_Bcast(in, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
            break;
          case kReduce:
            /* In place at the root, as cohort's reduce (the others' buffers
             * are only read). */
            MPI_Reduce(rank == 0 ? MPI_IN_PLACE : in, rank == 0 ? in : NULL, (int)count, MPI_FLOAT, MPI_SUM, 0,
                       MPI_COMM_WORLD);
            break;
          case kAllToAll:
            MPI_Alltoall(in, per_rank, MPI_FLOAT, out, per_rank, MPI_FLOAT, MPI_COMM_WORLD);
            break;
          case kBarrier:
            MPI_Barrier(MPI_COMM_WORLD);
            break;
          case kPingPong:
            if (rank == 0) {
              MPI_Send(in, (int)count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
              MPI_Recv(out, (int)count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
              MPI_Recv(out, (int)count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
              MPI_Send(out, (int)count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
            }
            break;
        }
      }
      if (r < 0) continue;
      double us = (MPI_Wtime() - t0) * 1e6 / iters / (which == kPingPong ? 2 : 1), slowest = 0;
      MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      times[r] = slowest;
    }
    if (rank == 0) {
      for (int a = 1; a < rounds; ++a) /* insertion sort: a handful of rounds */
        for (int b = a; b > 0 && times[b - 1] > times[b]; --b) {
          double t = times[b];
          times[b] = times[b - 1];
          times[b - 1] = t;
        }
      const double slowest = rounds % 2 ? times[rounds / 2] : (times[rounds / 2 - 1] + times[rounds / 2]) / 2;
      double algbw = slowest > 0 ? (double)(count * 4) / slowest / 1e3 : 0;
      printf("%12lld %12lld %8s %6s %5d %10.3f %10.3f %10.3f %7d\n", count * 4, count, "float32", "SUM", 0,
             slowest, algbw, algbw * bus, 0);
    }
    if (bytes == max_bytes) break;
    long long next = (long long)(bytes * factor);
    bytes = next > max_bytes ? max_bytes : (next == bytes ? bytes + 1 : next);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
