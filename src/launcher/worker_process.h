// worker_process.h: one worker as a child process: started in a process
// group of its own (so a signal reaches its children too), tied to the
// launcher's life (PR_SET_PDEATHSIG: a launcher killed with SIGKILL leaves
// no worker behind), its stdout and stderr on pipes the launcher reads.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace cohort::launcher {

// ExitState is how a worker ended: an exit code, or the signal that killed it.
struct ExitState {
  bool exited = false;  // false: still running
  int exit_code = 0;
  int signal = 0;  // non-zero: killed by this signal
  bool ok() const { return exited && signal == 0 && exit_code == 0; }
  // describe: "exit code 3" or "signal 9 (SIGKILL)".
  std::string describe() const;
};

// signal_name returns "SIGKILL" for 9, "SIG<n>" for unknown numbers.
std::string signal_name(int sig);

// resolve_program finds `name` on PATH (or as given when it has a '/');
// returns "" when it is not an executable file.
std::string resolve_program(const std::string& name);
// why_not_runnable says why resolve_program found nothing for `name`: no
// such file, a directory, or a file without the execute bit.
std::string why_not_runnable(const std::string& name);

class WorkerProcess {
 public:
  // start forks and execs `path` with `argv` and `env` ("NAME=value"),
  // bound to `cpus` when there are any (common/cpu_binding.h).
  // Must run on the thread that lives as long as the launcher, since the
  // kernel's parent-death signal follows the thread that forked. Throws
  // Error when fork or pipe fails.
  WorkerProcess(const std::string& path, const std::vector<std::string>& argv,
                const std::vector<std::string>& env, const std::vector<int>& cpus = {});
  ~WorkerProcess();  // kills (SIGKILL) and reaps the group if still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  // close_output closes a pipe after it reached EOF.
  void close_output(int fd);

  // poll reaps the worker without blocking and returns its state.
  const ExitState& poll();
  const ExitState& state() const { return state_; }

  // signal_group sends `sig` to the worker's whole process group.
  void signal_group(int sig) const;

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  ExitState state_;
};

}  // namespace cohort::launcher
