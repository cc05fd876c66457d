#include "diagnostics/group_monitor.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "diagnostics/group_trace.h"
#include "diagnostics/metrics_server.h"
#include "diagnostics/stall_inspector.h"

namespace cohort {
namespace {

// The eventfd SIGUSR1's handler writes to. Made once and never closed: a
// signal may come at any time, also while no monitor runs.
std::atomic<int> signal_fd{-1};

void on_dump_signal(int) {
  const int saved = errno;  // write(2) may change it under the interrupted code
  const int fd = signal_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const uint64_t one = 1;
    ssize_t ignored = ::write(fd, &one, sizeof one);
    (void)ignored;
  }
  errno = saved;
}

// install_dump_signal makes the eventfd and installs the handler, once per
// process; caller holds the slot's mutex.
void install_dump_signal() {
  static bool done = false;
  if (done) return;
  done = true;
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    COHORT_LOG(kWarning) << "flight recorder: eventfd failed, so SIGUSR1 will not dump";
    return;
  }
  signal_fd.store(fd);
  struct sigaction old {};
  ::sigaction(SIGUSR1, nullptr, &old);
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
    // The program handles (or ignores) SIGUSR1 itself: leave it that way.
    COHORT_LOG(kWarning) << "flight recorder: SIGUSR1 already has a handler; it is left alone, so SIGUSR1 "
                            "will not dump (the dumps on failure still happen)";
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
}

double stall_warn_s() {
  const double s = config_float(knobs::kStallWarnS);
  if (s < 0) {
    throw InvalidArgument(std::string(knobs::kStallWarnS.name) + " is " + std::to_string(s) +
                          "; it must be a number of seconds, or 0 to disable the stall inspector");
  }
  return s;
}

}  // namespace

class GroupMonitor {
 public:
  GroupMonitor();
  ~GroupMonitor();
  void add(std::shared_ptr<GroupTrace> group);
  void remove(const GroupTrace* group);
  void dump(const std::string& reason);

 private:
  struct Watched {
    std::shared_ptr<GroupTrace> group;
    std::shared_ptr<StallInspector> inspector;  // touched by the monitor thread only
  };
  void run();
  std::vector<Watched> watched() const;

  const double warn_s_;
  const double straggler_s_;  // COHORT_STRAGGLER_INTERVAL_S; 0: no accounting
  mutable std::mutex mu_;
  std::vector<Watched> watched_;  // guarded by mu_
  std::mutex dump_mu_;            // one dump at a time
  int stop_fd_ = -1;
  std::thread thread_;
  // Last: it is stopped before the members it reads go.
  std::unique_ptr<MetricsServer> metrics_;
};

namespace {

// The monitor of this process, while any group holds a lease. Never
// destroyed: a group kept in a static may go after this file's statics.
struct MonitorSlot {
  std::mutex mu;
  std::weak_ptr<GroupMonitor> monitor;
};

MonitorSlot& slot() {
  static MonitorSlot* s = new MonitorSlot;  // owned by the process, see above
  return *s;
}

}  // namespace

GroupMonitor::GroupMonitor() : warn_s_(stall_warn_s()), straggler_s_(straggler_interval_s()) {
  metrics_ = MetricsServer::start([this] {
    std::vector<GroupMetrics> groups;
    for (const Watched& w : watched()) groups.push_back({w.group->name(), w.group->arrivals().report()});
    return metrics_text(groups);
  });
  const bool dumps = !config_string(knobs::kTraceDir).empty();
  if (dumps) install_dump_signal();
  if (!dumps && warn_s_ <= 0 && straggler_s_ <= 0) return;  // nothing to watch for: no thread
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    COHORT_LOG(kWarning) << "group monitor: eventfd failed; no stall warnings and no dumps on SIGUSR1";
    return;
  }
  thread_ = std::thread([this] { run(); });
}

GroupMonitor::~GroupMonitor() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void GroupMonitor::add(std::shared_ptr<GroupTrace> group) {
  auto inspector = warn_s_ > 0 ? std::make_shared<StallInspector>(warn_s_) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  watched_.push_back(Watched{std::move(group), std::move(inspector)});
}

void GroupMonitor::remove(const GroupTrace* group) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = watched_.begin(); it != watched_.end(); ++it) {
    if (it->group.get() == group) {
      watched_.erase(it);
      return;
    }
  }
}

std::vector<GroupMonitor::Watched> GroupMonitor::watched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watched_;
}

void GroupMonitor::run() {
  // Each duty keeps its own cadence; the thread wakes for the nearer one.
  const int64_t stall_ns = warn_s_ > 0 ? StallInspector(warn_s_).tick_interval_ns() : -1;
  const int64_t straggler_ns = straggler_s_ > 0 ? static_cast<int64_t>(straggler_s_ * 1e9) : -1;
  int64_t next_stall_ns = trace_clock_ns() + stall_ns;
  int64_t next_straggler_ns = trace_clock_ns() + straggler_ns;
  for (;;) {
    int64_t wait_ns = -1;
    const int64_t now = trace_clock_ns();
    if (stall_ns > 0) wait_ns = std::max<int64_t>(0, next_stall_ns - now);
    if (straggler_ns > 0) {
      const int64_t until = std::max<int64_t>(0, next_straggler_ns - now);
      wait_ns = wait_ns < 0 ? until : std::min(wait_ns, until);
    }
    const int timeout_ms = wait_ns < 0 ? -1 : static_cast<int>(std::max<int64_t>(1, wait_ns / 1000000));
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {signal_fd.load(), POLLIN, 0}};  // a negative fd is skipped
    ::poll(fds, 2, timeout_ms);
    if (fds[0].revents) return;
    if (fds[1].revents) {
      uint64_t count;
      ssize_t ignored = ::read(fds[1].fd, &count, sizeof count);
      (void)ignored;
      dump("SIGUSR1");
    }
    // Copies: a group may be destroyed meanwhile; its trace stays alive
    // until this tick is done with it, and the group never waits for us.
    const int64_t after = trace_clock_ns();
    if (stall_ns > 0 && after >= next_stall_ns) {
      next_stall_ns = after + stall_ns;
      for (const Watched& w : watched()) w.inspector->tick(*w.group, trace_clock_ns());
    }
    if (straggler_ns > 0 && after >= next_straggler_ns) {
      next_straggler_ns = after + straggler_ns;
      for (const Watched& w : watched()) w.group->arrivals().tick(*w.group, trace_clock_ns());
    }
  }
}

void GroupMonitor::dump(const std::string& reason) {
  const std::string dir = config_string(knobs::kTraceDir);
  if (dir.empty()) return;
  // One file per global rank (several only when ranks are threads of one
  // process, as in tests).
  std::map<int, RankDump> dumps;
  const int64_t offset = unix_offset_ns();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (const Watched& w : watched()) {
    RankDump& d = dumps[w.group->global_rank()];
    d.global_rank = w.group->global_rank();
    d.pid = ::getpid();
    d.host = host;
    d.reason = reason;
    d.dumped_us = (trace_clock_ns() + offset) / 1000;
    d.groups.push_back(w.group->dump(offset));
  }
  std::lock_guard<std::mutex> lock(dump_mu_);
  for (const auto& [rank, d] : dumps) {
    Status st = write_rank_dump(dir, d);
    if (!st.ok()) {
      COHORT_LOG(kWarning) << "flight recorder: " << st.message();
    } else {
      COHORT_LOG(kWarning) << "flight recorder: wrote " << dir << "/rank_" << rank << ".json (" << reason
                           << ")";
    }
  }
}

MonitorLease::MonitorLease(std::shared_ptr<GroupTrace> group) : group_(group.get()) {
  MonitorSlot& s = slot();
  std::lock_guard<std::mutex> lock(s.mu);
  monitor_ = s.monitor.lock();
  if (!monitor_) {
    monitor_ = std::make_shared<GroupMonitor>();
    s.monitor = monitor_;
  }
  monitor_->add(std::move(group));
}

MonitorLease::~MonitorLease() {
  monitor_->remove(group_);
  // The last lease stops the thread here, on the group's destroying thread.
}

void dump_traces(const std::string& reason) {
  std::shared_ptr<GroupMonitor> monitor;
  {
    MonitorSlot& s = slot();
    std::lock_guard<std::mutex> lock(s.mu);
    monitor = s.monitor.lock();
  }
  // Callers belong to a watched group, whose lease keeps the monitor alive:
  // this is never the last reference.
  if (!monitor) return;
  try {
    monitor->dump(reason);
  } catch (const std::exception& e) {
    COHORT_LOG(kWarning) << "flight recorder: the dump failed: " << e.what();
  }
}

}  // namespace cohort
