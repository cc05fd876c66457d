// subprocess.h: real child processes for tests (cohort-store servers,
// store workers), with their stdout readable line by line.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace cohort::testing {

class Subprocess {
 public:
  // Starts `argv` with `extra_env` ("NAME=value") added to this environment.
  // With `merge_stderr` the child's stderr goes to the same pipe as its
  // stdout (for tests that read its log lines).
  explicit Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                      bool merge_stderr = false);
  ~Subprocess();  // kills (SIGKILL) and reaps a child still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // read_line returns the next stdout line, or "" at EOF or after `timeout`.
  std::string read_line(std::chrono::milliseconds timeout);

  // read_all returns everything the child writes to stdout until it closes
  // it (normally: exits), or until `timeout`.
  std::string read_all(std::chrono::milliseconds timeout);

  // wait reaps the child and returns its exit code, or 128+signal.
  int wait();

  // signal sends `sig` to the child.
  void signal(int sig) const { ::kill(pid_, sig); }

  // rss_kib reads the child's resident memory from /proc.
  long rss_kib() const;

  // alive is true while the child has not exited.
  bool alive();

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
  int status_ = 0;
};

// binary_path returns the path of a program built next to the tests
// (COHORT_BINARY_DIR is set by CMake).
std::string binary_path(const std::string& name);

}  // namespace cohort::testing
