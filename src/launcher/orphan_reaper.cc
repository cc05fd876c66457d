#include "launcher/orphan_reaper.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cohort::launcher {
namespace {

// helper_main is the helper's whole life: read "+PGID\n" and "-PGID\n"
// lines until the pipe closes, then kill what is left.
[[noreturn]] void helper_main(int fd) {
  // Its own process group: a signal to the launcher's group (Ctrl-C in a
  // terminal, kill -- -PGID) must leave the helper to do its work.
  setpgid(0, 0);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signal(s, SIG_IGN);
  // Nor may it hold the launcher's output open: whoever reads that until
  // its end would wait for the helper too.
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    for (int std_fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) dup2(null, std_fd);
    if (null > STDERR_FILENO) ::close(null);
  }
  std::vector<pid_t> groups;
  std::string pending;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) continue;  // EINTR
    if (n == 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      const pid_t group = static_cast<pid_t>(std::atol(pending.c_str() + 1));
      if (pending[0] == '+') groups.push_back(group);
      if (pending[0] == '-') groups.erase(std::remove(groups.begin(), groups.end(), group), groups.end());
    }
  }
  for (pid_t group : groups) ::kill(-group, SIGKILL);
  _exit(0);
}

}  // namespace

OrphanReaper::OrphanReaper() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;  // no helper: workers still die with the launcher (pdeathsig)
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[1]);
    helper_main(fds[0]);
  }
  ::close(fds[0]);
  fd_ = fds[1];
}

OrphanReaper::~OrphanReaper() {
  if (fd_ >= 0) ::close(fd_);
}

void OrphanReaper::watch(pid_t group) {
  tell('+', group);
}

void OrphanReaper::release(pid_t group) {
  tell('-', group);
}

void OrphanReaper::tell(char what, pid_t group) {
  if (fd_ < 0) return;
  char line[32];
  const int n = std::snprintf(line, sizeof line, "%c%ld\n", what, static_cast<long>(group));
  // One short write to a pipe is atomic; the helper reads it whole.
  ssize_t ignored = ::write(fd_, line, static_cast<size_t>(n));
  (void)ignored;
}

}  // namespace cohort::launcher
