/* cross_core_mix: what bounds a large all_reduce through shared memory on
 * one host. One thread (on CPU 0) adds a 256 KiB block y into each 256 KiB
 * chunk of x, in place, over X MiB of x, 64 MiB of chunks in all; y is
 * either this thread's, in its cache (local), or written anew for each
 * chunk by a thread on CPU 1 (remote: double-buffered, so that the writer
 * works while the adder reads the other block, as ranks do through their
 * slots). X = 1 keeps x in
 * cache; X = 64 streams it from memory. Prints GB/s of x, the median of 5.
 *
 *   cross_core_mix X_MIB local|remote
 *
 * If streaming x from memory and reading y from the other core overlapped,
 * remote at 64 MiB would run near the slower of remote at 1 MiB and local
 * at 64 MiB; on the machine of docs/performance.md the times add instead. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (256 << 10)
#define FLOATS (BLOCK / 4)

static float* y[2];
static _Atomic long written, consumed;
static long chunks;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void fill(float* b, long k) {
  const float v = (float)(k & 1023);
  for (size_t i = 0; i < FLOATS; ++i) b[i] = v;
}

/* The other core writes block k once the adder is done with block k - 2. */
static void* writer(void* unused) {
  (void)unused;
  pin(1);
  for (long k = 0; k < chunks; ++k) {
    while (atomic_load(&consumed) < k - 1) {
    }
    fill(y[k & 1], k);
    atomic_store(&written, k + 1);
  }
  return NULL;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, z = *(const double*)b;
  return (x > z) - (x < z);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[2], "local") != 0 && strcmp(argv[2], "remote") != 0)) {
    fprintf(stderr, "usage: cross_core_mix X_MIB local|remote\n");
    return 2;
  }
  const size_t bytes = (size_t)atol(argv[1]) << 20;
  const int remote = strcmp(argv[2], "remote") == 0;
  if (bytes < BLOCK) {
    fprintf(stderr, "cross_core_mix: X_MIB must be at least 1\n");
    return 2;
  }
  float* x = aligned_alloc(64, bytes);
  y[0] = aligned_alloc(64, BLOCK);
  y[1] = aligned_alloc(64, BLOCK);
  memset(x, 0, bytes);
  memset(y[0], 0, BLOCK);
  memset(y[1], 0, BLOCK);
  pin(0);
  const long per_pass = (long)(bytes / BLOCK);
  chunks = ((long)64 << 20) / BLOCK;
  if (chunks < per_pass) chunks = per_pass;
  double rates[5];
  for (int r = 0; r < 5; ++r) {
    atomic_store(&written, 0);
    atomic_store(&consumed, 0);
    pthread_t t;
    if (remote) pthread_create(&t, NULL, writer, NULL);
    const double t0 = now();
    for (long k = 0; k < chunks; ++k) {
      float* b = y[k & 1];
      float* xc = x + (size_t)(k % per_pass) * FLOATS;
      if (remote) {
        while (atomic_load(&written) < k + 1) {
        }
      }  /* local: y stays as this thread left it, in its cache */
      for (size_t i = 0; i < FLOATS; ++i) xc[i] += b[i];
      atomic_store(&consumed, k + 1);
    }
    const double t1 = now();
    if (remote) pthread_join(t, NULL);
    rates[r] = (double)chunks * BLOCK / (t1 - t0) / 1e9;
  }
  qsort(rates, 5, sizeof rates[0], by_value);
  printf("%.1f\n", rates[2]);
  free(x);
  free(y[0]);
  free(y[1]);
  return 0;
}
