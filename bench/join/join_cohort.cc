// join_cohort: the cohort side of bench/join_bench.sh. Says "ready" once
// started, waits to be released (a shared lock on RELEASE_FILE, which the
// script holds exclusively until every worker is ready), then joins
// through env:// (cohortrun's store) and passes one barrier, printing the
// wall time it finished.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cohort/distributed.h"

int main() {
  std::printf("ready\n");
  std::fflush(stdout);
  const char* release = std::getenv("RELEASE_FILE");
  const int fd = release ? ::open(release, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0 || ::flock(fd, LOCK_SH) != 0) {
    std::perror("join_cohort: RELEASE_FILE");
    return 1;
  }
  cohort::init_process_group();
  cohort::barrier()->wait();
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  const double now = std::chrono::duration<double>(since_epoch).count();
  std::printf("done %.6f\n", now);
  std::fflush(stdout);
  ::close(fd);
  cohort::destroy_process_group();
  return 0;
}
