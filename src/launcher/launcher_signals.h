// launcher_signals.h: the signals the launcher passes on to its workers
// (SIGINT, SIGTERM, SIGHUP) and SIGCHLD, taken through a signalfd so that
// the monitor's poll wakes for them without a handler.
#pragma once

namespace cohort::launcher {

class LauncherSignals {
 public:
  // Blocks the signals in this thread (before any other thread starts, so
  // that all inherit the mask) and opens the signalfd.
  LauncherSignals();
  ~LauncherSignals();
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

  int fd() const { return fd_; }
  // take reads what arrived without waiting; returns a terminating signal
  // (SIGINT, SIGTERM, SIGHUP) if one did, else 0. Once seen it stays.
  int take();

 private:
  int fd_ = -1;
  int terminating_ = 0;
};

}  // namespace cohort::launcher
