#include "transport/shm/host_slots.h"

#include "transport/shm/layout.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "common/spin.h"

namespace cohort::shm {
namespace {

// How long past its deadline a wait gives the ranks it awaits to report
// their own failure (wait_for): far below the 2 s in which a failure
// reaches every rank, far above the time a report takes on one host.
constexpr auto kReportGrace = std::chrono::milliseconds(500);

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds slice) {
  timespec ts{static_cast<time_t>(slice.count() / 1000000),
              static_cast<long>(slice.count() % 1000000) * 1000};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

Status HostSlots::read_from(int local, void* into, uint64_t address, size_t bytes) const {
  const pid_t pid = control(local).pid.load(std::memory_order_relaxed);
  auto* out = static_cast<uint8_t*>(into);
  while (bytes > 0) {
    iovec mine{out, bytes};
    iovec theirs{reinterpret_cast<void*>(address), bytes};
    ssize_t got = ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      const int err = got < 0 ? errno : EFAULT;
      // The peer's buffer is valid for as long as it stays in the
      // operation; gone (ESRCH) or unmapped (EFAULT) means it left it.
      const bool left = err == ESRCH || err == EFAULT;
      return Status(left ? StatusCode::kNetworkError : StatusCode::kBackendError,
                    "reading " + std::to_string(bytes) + " bytes from rank " +
                        std::to_string(local_ranks_[static_cast<size_t>(local)]) + " (process " +
                        std::to_string(pid) + ") failed: " + std::strerror(err) +
                        (err == ESRCH ? " (the process is gone)"
                         : left       ? " (it left the operation: it failed or exited)"
                                      : ""));
    }
    out += got;
    address += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return Status::ok_status();
}

int HostSlots::local_index_of(int group_rank) const {
  for (size_t i = 0; i < local_ranks_.size(); ++i) {
    if (local_ranks_[i] == group_rank) return static_cast<int>(i);
  }
  return -1;
}

RankControl& HostSlots::control(int local) const {
  return *reinterpret_cast<RankControl*>(base_ + controls_at_ +
                                         static_cast<size_t>(local) * sizeof(RankControl));
}

uint8_t* HostSlots::slot(int local, int half) const {
  return base_ + slots_at_ + (static_cast<size_t>(local) * 2 + static_cast<size_t>(half)) * slot_bytes_;
}

static_assert(HostSlots::kPostBytes <= sizeof(PostCell::data), "a post fits its cell");

namespace {
PostCell& cell_at(uint8_t* base, size_t posts_at, int local, int cell) {
  return reinterpret_cast<PostCell*>(base + posts_at)[static_cast<size_t>(local) * HostSlots::kPosts +
                                                      static_cast<size_t>(cell)];
}
}  // namespace

uint8_t* HostSlots::post(int local, int cell) const {
  return cell_at(base_, posts_at_, local, cell).data;
}

void HostSlots::stamp_post(int cell, const Stamp& stamp) {
  PostCell& c = cell_at(base_, posts_at_, me_, cell);
  c.bytes.store(stamp.bytes, std::memory_order_relaxed);
  c.op.store(stamp.op, std::memory_order_relaxed);
  c.sequence.store(stamp.sequence, std::memory_order_release);
}

HostSlots::Stamp HostSlots::post_stamp_of(int local, int cell) const {
  const PostCell& c = cell_at(base_, posts_at_, local, cell);
  const uint64_t sequence = c.sequence.load(std::memory_order_acquire);
  return Stamp{sequence, c.bytes.load(std::memory_order_relaxed), c.op.load(std::memory_order_relaxed)};
}

void HostSlots::stamp(int half, const Stamp& stamp) {
  RankControl& c = control(me_);
  c.stamp_sequence[half].store(stamp.sequence, std::memory_order_relaxed);
  c.stamp_bytes[half].store(stamp.bytes, std::memory_order_relaxed);
  c.stamp_op[half].store(stamp.op, std::memory_order_relaxed);
  c.stamp_word[half].store(stamp.word, std::memory_order_relaxed);
}

HostSlots::Stamp HostSlots::stamp_of(int local, int half) const {
  const RankControl& c = control(local);
  return Stamp{c.stamp_sequence[half].load(std::memory_order_relaxed),
               c.stamp_bytes[half].load(std::memory_order_relaxed),
               c.stamp_op[half].load(std::memory_order_relaxed),
               c.stamp_word[half].load(std::memory_order_relaxed)};
}

void HostSlots::leave(uint64_t sequence) {
  control(me_).left_at.store(sequence, std::memory_order_seq_cst);
}

bool HostSlots::left(int local, uint64_t sequence) const {
  return control(local).left_at.load(std::memory_order_seq_cst) == sequence;
}

namespace {

// process_gone: process `pid` no longer runs: it does not exist, or it is a
// zombie its parent has yet to reap. kill(pid, 0) still succeeds on a
// zombie, while process_vm_readv already fails on it with ESRCH, so a rank
// can learn of a death before kill() shows it.
bool process_gone(int32_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[40];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return errno == ENOENT;
  char stat[512];
  const size_t n = std::fread(stat, 1, sizeof stat - 1, f);
  std::fclose(f);
  stat[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')'.
  const char* end_of_name = std::strrchr(stat, ')');
  return end_of_name != nullptr && end_of_name[1] == ' ' && (end_of_name[2] == 'Z' || end_of_name[2] == 'X');
}

}  // namespace

std::vector<int> HostSlots::gone_ranks() const {
  std::vector<int> gone;
  for (int i = 0; i < local_size(); ++i) {
    const int32_t pid = control(i).pid.load(std::memory_order_relaxed);
    if (i != me_ && pid > 0 && process_gone(pid)) gone.push_back(local_ranks_[i]);
  }
  return gone;
}

void HostSlots::arrive() {
  control(me_).arrivals.fetch_add(1, std::memory_order_seq_cst);
  ++arrived_;
  if (header_->waiters.load(std::memory_order_seq_cst) > 0) {
    header_->epoch.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&header_->epoch);
  }
}

bool HostSlots::ready(int local, uint64_t target) {
  const uint64_t least = count_of(local);
  if (local < 0) all_seen_ = std::max(all_seen_, least);
  return least >= target;
}

uint64_t HostSlots::count_of(int local) const {
  // This rank's own count comes from arrived_, never from its line: see
  // arrived_ in arena.h.
  if (local == me_) return arrived_;
  if (local >= 0) return control(local).arrivals.load(std::memory_order_acquire);
  uint64_t least = arrived_;
  for (int i = 0; i < local_size(); ++i) {
    if (i != me_) least = std::min(least, control(i).arrivals.load(std::memory_order_acquire));
  }
  return least;
}

Status HostSlots::wait_for(int local, uint64_t target, Deadline deadline,
                           const std::function<Status(bool, bool*)>& service, const std::string& what) {
  // Counts only grow: a target every rank was already seen to reach needs
  // no look at their cache lines (each look at a line a peer just wrote is
  // a cache miss).
  if (arrived(local, target)) return Status::ok_status();
  // Spin (or, oversubscribed, yield) for a while: the peer is usually
  // microseconds away, and a futex wake-up costs tens of microseconds.
  // The budget counts from the 64th look: a peer that comes sooner (the
  // usual case for a small collective) costs no clock read (~25 ns here),
  // and one read then serves both limits.
  QuietSpell spell(std::chrono::microseconds(spin_us_), !oversubscribed_);
  bool yielding = oversubscribed_;
  bool busy = false;
  for (uint32_t i = 1;; ++i) {
    if (ready(local, target)) return Status::ok_status();
    if (yielding) {
      sched_yield();
    } else {
      cpu_relax();
    }
    if ((i & 1023) == 0 && service) {
      Status st = service(false, &busy);
      if (!st.ok()) return ready(local, target) ? Status::ok_status() : st;
    }
    if ((i & 63) == 0) {
      const auto now = Clock::now();
      if (i == 64) spell.restart(now);
      const QuietSpell::Phase phase = spell.phase(now);
      if (phase == QuietSpell::Phase::kSleep) break;
      yielding = phase == QuietSpell::Phase::kYieldingSpin;
    }
  }
  auto peer_names = [&] {
    std::string s;
    for (int i = 0; i < local_size(); ++i) {
      if ((local < 0 || i == local) && control(i).arrivals.load() < target)
        s += (s.empty() ? "" : ", ") + std::to_string(local_ranks_[i]);
    }
    return "[" + s + "]";
  };
  // Past the deadline, the ranks still awaited get a moment to report
  // first: they had the same deadline, and one that waits on a peer across
  // the network (a cut link) names that cause, where this rank could only
  // name them.
  Deadline until = deadline;
  bool graced = false;
  for (;;) {
    header_->waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t epoch = header_->epoch.load(std::memory_order_seq_cst);
    if (ready(local, target)) {
      header_->waiters.fetch_sub(1, std::memory_order_seq_cst);
      return Status::ok_status();
    }
    auto slice = std::chrono::microseconds(busy ? 1000 : 20000);
    if (!until.is_never()) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(until.when() - Clock::now());
      slice = std::max(std::chrono::microseconds(1), std::min(slice, left));
    }
    futex_wait(&header_->epoch, epoch, slice);
    header_->waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (ready(local, target)) return Status::ok_status();
    // The transport first: a peer that failed said why before it left,
    // which beats learning that its process is gone.
    if (service) {
      // A peer that arrived and then left (its part done) is no error.
      Status st = service(true, &busy);
      if (!st.ok()) return ready(local, target) ? Status::ok_status() : st;
    }
    for (int i = 0; i < local_size(); ++i) {
      const int32_t pid = control(i).pid.load(std::memory_order_relaxed);
      if (i != me_ && pid > 0 && process_gone(pid) && control(i).arrivals.load() < target) {
        return network_error("rank " + std::to_string(local_ranks_[i]) + " (process " + std::to_string(pid) +
                             " on this host) is gone: it exited or was killed during " + what);
      }
    }
    if (until.expired()) {
      if (!graced) {
        graced = true;
        until = Deadline::after(kReportGrace);
        continue;
      }
      return timeout_error(what + ": Timed out (still waiting in shared memory for ranks " + peer_names() + ")");
    }
  }
}

}  // namespace cohort::shm
