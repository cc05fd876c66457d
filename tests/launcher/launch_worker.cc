// launch_worker: the worker program the launcher tests start under
// cohortrun. Its first argument picks a behaviour; most take the rank that
// misbehaves, while the others wait to be stopped by the launcher.
//
//   env                      print the launcher's variables as NAME=value
//   exit R CODE              rank R exits with CODE after 0.2 s
//   signal R SIG             rank R kills itself with SIG
//   throw R MESSAGE          rank R throws std::runtime_error(MESSAGE)
//   throw_all R MESSAGE      rank R throws MESSAGE; the others ignore SIGTERM
//                            and throw "failed after rank R" 0.4 s later, as
//                            ranks whose peer died do
//   hang R                   rank R ignores SIGTERM and sleeps; rank R+1 exits 1
//   fail_until N             every rank exits 3 while the restart count < N
//   sleep                    print "pid <pid> <grandchild pid>" and sleep
//   print N                  print N lines on stdout and on stderr, then exit 0
//   pg                       init env://, barrier, all_reduce, check the sum
//   steps N                  init env://, print "running", N x (all_reduce; 100 ms)
//   affinity                 print "affinity=<CPUs> bind=<COHORT_BIND>", the CPUs as 0,1,2
//   pg_affinity              init env:// (which may bind, COHORT_BIND), all_reduce,
//                            print "affinity=<CPUs> threads=<CPUs of every thread agree>"
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/elastic.h"

// throw_from_here is a named frame the error-file test looks for; outside
// the anonymous namespace so that -rdynamic exports its name.
[[noreturn]] __attribute__((noinline)) void throw_from_here(const std::string& message) {
  throw std::runtime_error(message);
}

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

// cpus_of lists the CPUs task `tid` (0: this thread) may run on, as "0,1".
std::string cpus_of(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

[[noreturn]] void sleep_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Under cohort-launch without --use-env the first argument is
  // --local-rank=N, as torch.distributed.launch passes it: say so.
  if (!args.empty() && args[0].rfind("--local-rank=", 0) == 0) {
    std::printf("argument %s\n", args[0].c_str());
    std::fflush(stdout);
    args.erase(args.begin());
  }
  if (args.empty()) return 2;
  const std::string mode = args[0];
  const int rank = env_int("RANK");
  auto arg = [&](size_t i) { return i < args.size() ? std::atoi(args[i].c_str()) : 0; };
  if (mode == "env") {
    for (const char* name : {"RANK",
                             "LOCAL_RANK",
                             "GROUP_RANK",
                             "ROLE_RANK",
                             "ROLE_NAME",
                             "LOCAL_WORLD_SIZE",
                             "WORLD_SIZE",
                             "GROUP_WORLD_SIZE",
                             "ROLE_WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "TORCHELASTIC_RESTART_COUNT",
                             "TORCHELASTIC_MAX_RESTARTS",
                             "TORCHELASTIC_RUN_ID",
                             "TORCHELASTIC_ERROR_FILE",
                             "COHORT_RESTART_COUNT",
                             "COHORT_MAX_RESTARTS",
                             "COHORT_RUN_ID",
                             "COHORT_ERROR_FILE",
                             "OMP_NUM_THREADS"}) {
      const char* v = std::getenv(name);
      std::printf("%s=%s\n", name, v ? v : "<unset>");
    }
    std::printf("local_rank()=%d local_world_size()=%d args=", cohort::local_rank(),
                cohort::local_world_size());
    for (size_t i = 1; i < args.size(); ++i) std::printf("[%s]", args[i].c_str());
    std::printf("\n");
    return 0;
  }
  if (mode == "exit" || mode == "signal" || mode == "throw") {
    if (rank != arg(1)) sleep_forever();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (mode == "exit") return arg(2);
    if (mode == "signal") raise(arg(2));
    throw_from_here(args.at(2));
  }
  if (mode == "throw_all") {
    if (rank == arg(1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      throw_from_here(args.at(2));
    }
    signal(SIGTERM, SIG_IGN);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    throw_from_here("failed after rank " + args.at(1));
  }
  if (mode == "hang") {
    if (rank == arg(1)) {
      signal(SIGTERM, SIG_IGN);
      std::printf("ignoring SIGTERM\n");
      std::fflush(stdout);
      sleep_forever();
    }
    if (rank == arg(1) + 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return 1;
    }
    sleep_forever();
  }
  if (mode == "fail_until") {
    int restarts = env_int("TORCHELASTIC_RESTART_COUNT");
    std::printf("attempt with restart count %d\n", restarts);
    return restarts < arg(1) ? 3 : 0;
  }
  if (mode == "sleep") {
    pid_t child = fork();
    if (child == 0) sleep_forever();
    std::printf("pid %d %d\n", getpid(), child);
    std::fflush(stdout);
    sleep_forever();
  }
  if (mode == "print") {
    for (int i = 0; i < arg(1); ++i) {
      std::printf("out %d of rank %d\n", i, rank);
      std::fprintf(stderr, "err %d of rank %d\n", i, rank);
    }
    return 0;
  }
  if (mode == "affinity") {
    const char* bind = std::getenv("COHORT_BIND");
    std::printf("affinity=%s bind=%s\n", cpus_of(0).c_str(), bind ? bind : "<unset>");
    return 0;
  }
  if (mode == "pg_affinity") {
    // A thread started before init: binding must reach it too.
    std::thread early([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
    try {
      cohort::init_process_group();
    } catch (...) {
      early.join();  // an init that refuses its binding leaves no thread behind
      throw;
    }
    int64_t x = 1;
    cohort::all_reduce(cohort::Buffer::of(&x, 1))->wait();
    const std::string mine = cpus_of(0);
    bool agree = true;
    if (DIR* dir = opendir("/proc/self/task")) {
      while (dirent* e = readdir(dir)) {
        const int tid = std::atoi(e->d_name);
        if (tid > 0 && cpus_of(tid) != mine && cpus_of(tid) != "?") agree = false;
      }
      closedir(dir);
    }
    early.join();
    std::printf("affinity=%s threads=%s sum=%lld\n", mine.c_str(), agree ? "agree" : "differ", (long long)x);
    cohort::destroy_process_group();
    return 0;
  }
  if (mode == "pg" || mode == "steps") {
    cohort::init_process_group();
    const int world = cohort::get_world_size();
    cohort::barrier()->wait();
    if (mode == "steps") {
      std::printf("running rank %d of %d\n", cohort::get_rank(), world);
      std::fflush(stdout);
    }
    int steps = mode == "steps" ? arg(1) : 1;
    for (int i = 0; i < steps; ++i) {
      int64_t x = cohort::get_rank() + 1;
      cohort::all_reduce(cohort::Buffer::of(&x, 1))->wait();
      if (x != int64_t(world) * (world + 1) / 2) {
        std::printf("rank %d: all_reduce gave %lld, expected %lld\n", cohort::get_rank(), (long long)x,
                    (long long)world * (world + 1) / 2);
        return 1;
      }
      if (mode == "steps") std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    cohort::barrier()->wait();
    std::printf("ok rank %d of %d restart %d\n", cohort::get_rank(), world,
                env_int("TORCHELASTIC_RESTART_COUNT"));
    cohort::destroy_process_group();
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  return cohort::record_errors([&] { return run(argc, argv); });
}
