#include "launcher/launcher_signals.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cohort/errors.h"

namespace cohort::launcher {

LauncherSignals::LauncherSignals(const std::vector<int>& handled) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : handled) {
    // A launcher started in the background by a script inherits SIGINT
    // (and SIGQUIT) ignored, and an ignored signal is dropped even while
    // blocked: the default disposition makes it reach the signalfd.
    signal(s, SIG_DFL);
    sigaddset(&set, s);
  }
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw Error(std::string("signalfd: ") + std::strerror(errno));
  // A console that went away must not kill the launcher before it stops
  // its workers.
  signal(SIGPIPE, SIG_IGN);
}

LauncherSignals::~LauncherSignals() {
  if (fd_ >= 0) ::close(fd_);
}

int LauncherSignals::take() {
  signalfd_siginfo info;
  while (::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int s = static_cast<int>(info.ssi_signo);
    if (s != SIGCHLD && terminating_ == 0) terminating_ = s;
  }
  return terminating_;
}

}  // namespace cohort::launcher
