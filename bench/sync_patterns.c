/* sync_patterns: the bare cost of one 2-rank exchange of a word through
 * shared memory, for the ways a rank can say "I have arrived, here is my
 * data". Two processes pinned to CPUs 0 and 1 ping-pong N times; each
 * line is nanoseconds per exchange (the 2-rank period of a 4-byte
 * all_reduce with no bookkeeping at all).
 *
 *   build/bench/sync_patterns [N=1000000] [ROUNDS=3]
 *
 * The patterns:
 *   own-line-xadd      what cohort's shm all_reduce does (arena.cc): the
 *                      rank writes the four stamp fields and the data on
 *                      its own line, then counts its arrival with a locked
 *                      add; the peer polls that line.
 *   own-line-store     the same with the count as a plain release store.
 *   own-line-2-stores  only sequence and data, then a release store.
 *   mailbox            what Open MPI's vader fastbox does: the data, then a
 *                      sequence number, written into a line of the peer's
 *                      that only the peer polls (one per slot half).
 * The machine moves between a fast state (~30-60 ns here, cores sharing a
 * cache) and a slow one (~230-300 ns); run it several times. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum Pattern { kOwnLineXadd, kOwnLineStore, kOwnLineTwoStores, kMailbox, kPatterns };
static const char* const kNames[kPatterns] = {"own-line-xadd", "own-line-store", "own-line-2-stores", "mailbox"};

/* One rank's line, laid out as cohort's RankControl is. */
typedef struct {
  _Alignas(64) _Atomic uint64_t count;
  _Atomic uint64_t sequence[2], bytes[2];
  _Atomic uint32_t op[2];
  _Atomic uint64_t word[2];
} Line;

/* One mailbox: written by the peer, polled by its owner. */
typedef struct {
  _Alignas(64) _Atomic uint64_t sequence;
  _Atomic uint64_t word;
} Box;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void wait_at_least(_Atomic uint64_t* at, uint64_t value) {
  while (atomic_load_explicit(at, memory_order_acquire) < value) _mm_pause();
}

/* exchange runs n exchanges as rank `me` and returns ns per exchange,
 * timed after 1000 warm-up ones. */
static double exchange(enum Pattern pattern, int me, Line* lines, Box* boxes, long n) {
  Line* mine = &lines[me];
  Line* peer = &lines[1 - me];
  uint64_t sum = (uint64_t)me + 1;
  double start = 0;
  for (long i = 1; i <= n; ++i) {
    if (i == 1000) start = now_ns();
    const int half = (int)(i & 1);
    const uint64_t seq = (uint64_t)i;
    switch (pattern) {
      case kOwnLineXadd:
      case kOwnLineStore:
        atomic_store_explicit(&mine->sequence[half], seq, memory_order_relaxed);
        atomic_store_explicit(&mine->bytes[half], 4, memory_order_relaxed);
        atomic_store_explicit(&mine->op[half], 7, memory_order_relaxed);
        atomic_store_explicit(&mine->word[half], sum, memory_order_relaxed);
        if (pattern == kOwnLineXadd) {
          atomic_fetch_add(&mine->count, 1);
        } else {
          atomic_store_explicit(&mine->count, seq, memory_order_release);
        }
        wait_at_least(&peer->count, seq);
        if (atomic_load_explicit(&peer->sequence[half], memory_order_relaxed) != seq) abort();
        sum += atomic_load_explicit(&peer->word[half], memory_order_relaxed);
        break;
      case kOwnLineTwoStores:
        atomic_store_explicit(&mine->sequence[half], seq, memory_order_relaxed);
        atomic_store_explicit(&mine->word[half], sum, memory_order_relaxed);
        atomic_store_explicit(&mine->count, seq, memory_order_release);
        wait_at_least(&peer->count, seq);
        if (atomic_load_explicit(&peer->sequence[half], memory_order_relaxed) != seq) abort();
        sum += atomic_load_explicit(&peer->word[half], memory_order_relaxed);
        break;
      case kMailbox: {
        Box* to = &boxes[2 * (1 - me) + half];
        Box* from = &boxes[2 * me + half];
        atomic_store_explicit(&to->word, sum, memory_order_relaxed);
        atomic_store_explicit(&to->sequence, seq, memory_order_release);
        while (atomic_load_explicit(&from->sequence, memory_order_acquire) != seq) _mm_pause();
        sum += atomic_load_explicit(&from->word, memory_order_relaxed);
        break;
      }
      default:
        abort();
    }
  }
  if (sum == 42) printf(" ");  /* keeps the sum alive */
  return (now_ns() - start) / (double)(n - 999);
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sync_patterns: sched_setaffinity");
}

/* run_pattern forks a peer and returns rank 0's ns per exchange. */
static double run_pattern(enum Pattern pattern, long n) {
  void* shared = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    perror("sync_patterns: mmap");
    exit(1);
  }
  Line* lines = shared;
  Box* boxes = (Box*)((char*)shared + 4096);
  double* result = (double*)((char*)shared + 8192);
  const pid_t child = fork();
  if (child < 0) {
    perror("sync_patterns: fork");
    exit(1);
  }
  const int me = child == 0;
  pin(me);
  result[me] = exchange(pattern, me, lines, boxes, n);
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  const double ns = result[0];
  munmap(shared, 3 * 4096);
  return ns;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 1000000;
  const int rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (n < 2000 || rounds < 1) {
    fprintf(stderr, "usage: sync_patterns [N>=2000] [ROUNDS>=1]\n");
    return 2;
  }
  printf("# ns per 2-rank exchange, %ld exchanges, patterns run back to back per round\n", n);
  printf("%-6s", "round");
  for (int p = 0; p < kPatterns; ++p) printf(" %18s", kNames[p]);
  printf("\n");
  for (int r = 0; r < rounds; ++r) {
    printf("%-6d", r + 1);
    for (int p = 0; p < kPatterns; ++p) printf(" %18.1f", run_pattern((enum Pattern)p, n));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
