/* memcpy_bench: one thread's memcpy bandwidth on BYTES (default 64 MiB),
 * the median of REPS copies, in GB/s (bytes copied per second). Shared
 * memory collectives are bounded by it, so compare_shm.sh reports
 * cohort's busbw as a fraction of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? (size_t)atoll(argv[1]) : (size_t)64 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 9;
  char* src = malloc(bytes);
  char* dst = malloc(bytes);
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  double* gbs = malloc(sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; ++r) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcpy(dst, src, bytes);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    gbs[r] = (double)bytes / s / 1e9;
    src[r % bytes] ^= 1; /* keep the copies from being folded together */
  }
  qsort(gbs, (size_t)reps, sizeof(double), by_value);
  printf("%.3f\n", gbs[reps / 2]);
  free(src);
  free(dst);
  free(gbs);
  return 0;
}
