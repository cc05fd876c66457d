#include "launcher/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "cohort/errors.h"
#include "common/cpu_binding.h"

namespace cohort::launcher {

std::string ExitState::describe() const {
  if (!exited) return "running";
  if (signal != 0) return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  return "exit code " + std::to_string(exit_code);
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "SIG" + std::to_string(sig);
}

std::string why_not_runnable(const std::string& name) {
  struct stat st;
  if (name.find('/') == std::string::npos) return "no such executable (also searched PATH)";
  if (::stat(name.c_str(), &st) != 0) return "no such file";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (::access(name.c_str(), X_OK) != 0) return "it is not executable (chmod +x " + name + ")";
  return "it cannot be run";
}

std::string resolve_program(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return runnable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    if (colon == std::string::npos) return "";
    start = colon + 1;
  }
}

WorkerProcess::WorkerProcess(const std::string& path, const std::vector<std::string>& argv,
                             const std::vector<std::string>& env, const std::vector<int>& cpus) {
  // Everything the child needs is built before fork: after fork in a
  // threaded process only async-signal-safe calls are allowed.
  std::vector<std::string> args = argv, envs = env;
  std::vector<char*> arg_ptrs, env_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  for (auto& e : envs) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The launcher may have died between fork and prctl; then no signal
    // will come, and we were reparented.
    if (getppid() != parent) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    // The launcher blocks the signals it handles; a worker must not inherit
    // that mask, or it could not be stopped by them.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Nor the dispositions it may have inherited ignored (a launcher run in
    // the background by a script ignores SIGINT; the launcher itself
    // ignores SIGPIPE): the signal that stops the job must stop the worker.
    struct sigaction default_action;
    std::memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE})
      sigaction(s, &default_action, nullptr);
    // Bound before exec, the program's first thread and every thread it
    // starts run on its share from the start.
    if (!cpus.empty() && !bind_this_thread(cpus)) {
      const char bind_msg[] = "cohortrun: could not bind the worker to its CPUs; it runs unbound\n";
      ssize_t ignored = ::write(STDERR_FILENO, bind_msg, sizeof bind_msg - 1);
      (void)ignored;
    }
    execve(path.c_str(), arg_ptrs.data(), env_ptrs.data());
    const char msg[] = "cohortrun: exec failed\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  // Also from the parent, so that a signal sent right away finds the group.
  setpgid(pid_, pid_);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

WorkerProcess::~WorkerProcess() {
  if (!state_.exited && pid_ > 0) {
    signal_group(SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  close_output(out_fd_);
  close_output(err_fd_);
}

void WorkerProcess::close_output(int fd) {
  if (fd < 0) return;
  ::close(fd);
  if (fd == out_fd_) out_fd_ = -1;
  if (fd == err_fd_) err_fd_ = -1;
}

const ExitState& WorkerProcess::poll() {
  if (state_.exited) return state_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    state_.exited = true;
    if (WIFSIGNALED(status)) state_.signal = WTERMSIG(status);
    if (WIFEXITED(status)) state_.exit_code = WEXITSTATUS(status);
  }
  return state_;
}

void WorkerProcess::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

}  // namespace cohort::launcher
