// launcher_signals.h: the signals the launcher passes on to its workers
// (--signals-to-handle; by default SIGTERM, SIGINT, SIGHUP, SIGQUIT) and
// SIGCHLD, taken through a signalfd so that the monitor's poll wakes for
// them without a handler.
#pragma once

#include <vector>

namespace cohort::launcher {

class LauncherSignals {
 public:
  // Blocks `handled` and SIGCHLD in this thread (before any other thread
  // starts, so that all inherit the mask) and opens the signalfd.
  explicit LauncherSignals(const std::vector<int>& handled);
  ~LauncherSignals();
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

  int fd() const { return fd_; }
  // take reads what arrived without waiting; returns a handled signal if
  // one did, else 0. Once seen it stays.
  int take();

 private:
  int fd_ = -1;
  int terminating_ = 0;
};

}  // namespace cohort::launcher
