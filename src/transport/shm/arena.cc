#include "transport/shm/arena.h"

#include "transport/shm/arena_fit.h"
#include "transport/shm/layout.h"
#include "transport/shm/shared_segment.h"
#include "transport/shm/kernel_copy.h"

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

#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "common/spin.h"

namespace cohort::shm {

namespace {

size_t power_of_two_at_least(size_t n) {
  size_t p = 4096;
  while (p < n) p *= 2;
  return p;
}

// A host has l*l rings, one a direction of each pair: past 16 ranks each
// gets its share of 256 MiB (at least 16 KiB), or the segment, its set-up
// and its tear-down grow as l squared (64 ranks with 1 MiB rings: 2.9 s
// from cohortrun's start to the workers' exit, 0.8 s with 16 KiB rings).
// One-host collectives go through the slots, not the rings.
constexpr size_t kRingsBudgetBytes = size_t{256} << 20;

size_t ring_bytes_for(size_t asked, size_t local_ranks) {
  const size_t ring = power_of_two_at_least(asked);
  size_t share = kSmallestRingBytes;
  while (share * 2 * local_ranks * local_ranks <= kRingsBudgetBytes) share *= 2;
  return std::min(ring, share);
}

std::string key_of(const char* what, int leader) {
  return std::string("shm/") + what + "/" + std::to_string(leader);
}

}  // namespace

Arena::~Arena() = default;

Result<std::unique_ptr<Arena>> Arena::set_up(Store& store, int rank, const std::vector<int>& local_ranks,
                                             bool outnumbered, Deadline deadline) {
  std::unique_ptr<Arena> a(new Arena());
  a->local_ranks_ = local_ranks;
  for (size_t i = 0; i < local_ranks.size(); ++i) {
    if (local_ranks[i] == rank) a->me_ = static_cast<int>(i);
  }
  const size_t l = local_ranks.size();
  const int leader = local_ranks.front();
  // The leader sizes the rings and slots to the room /dev/shm has, and the
  // others read its sizes from the header (they may see another room).
  ArenaLayout layout;
  if (rank == leader) {
    const ArenaSizes asked{
        ring_bytes_for(static_cast<size_t>(std::max<int64_t>(1, config_int(knobs::kShmRingBytes))), l),
        whole_pages(static_cast<size_t>(std::max<int64_t>(4096, config_int(knobs::kShmSlotBytes))))};
    const uint64_t room = shm_room_bytes();
    layout = arena_layout(l, fit_arena(l, asked, room));
    if (layout.sizes.ring_bytes != asked.ring_bytes || layout.sizes.slot_bytes != asked.slot_bytes) {
      COHORT_LOG(kWarning) << "rank " << rank << ": /dev/shm has room for " << room << " bytes, and the "
                           << "shared-memory arena of this host's " << l << " ranks would take "
                           << arena_layout(l, asked).total << ": its rings are " << layout.sizes.ring_bytes
                           << " bytes (asked " << asked.ring_bytes << ") and its slots " << layout.sizes.slot_bytes
                           << " (asked " << asked.slot_bytes << "), so large messages within the host take "
                           << "more turns (make /dev/shm larger, as docker run --shm-size does, for full speed)";
    }
    a->lay_out(layout);
  }
  a->spin_us_ = std::max<int64_t>(0, config_int(knobs::kShmSpinUs));
  a->oversubscribed_ = outnumbered;

  SegmentPlan plan;
  plan.key = key_of("arena", leader) + "/";
  plan.ranks = local_ranks;
  plan.me = rank;
  plan.bytes = rank == leader ? layout.total : 0;  // 0: as the leader made it
  plan.what = "the shared-memory arena";
  plan.initialise = [&](ShmSegment& segment) {
    auto* h = new (segment.data()) ArenaHeader();
    h->local_size = l;
    h->ring_bytes = a->ring_bytes_;
    h->slot_bytes = a->slot_bytes_;
    h->magic.store(kArenaMagic, std::memory_order_release);
    return Status::ok_status();
  };
  plan.check = [&](ShmSegment& segment) {
    auto* h = reinterpret_cast<ArenaHeader*>(segment.data());
    if (h->magic.load(std::memory_order_acquire) != kArenaMagic) {
      return Status(StatusCode::kBackendError,
                    "shared-memory segment " + segment.name() + " is not initialised");
    }
    const ArenaLayout made = arena_layout(l, {h->ring_bytes, h->slot_bytes});
    if (h->local_size != l || made.total != segment.size()) {
      return Status(StatusCode::kBackendError, "shared-memory segment " + segment.name() + " holds an arena of " +
                                                   std::to_string(h->local_size) + " ranks in " +
                                                   std::to_string(segment.size()) + " bytes; this rank expected " +
                                                   std::to_string(l) + " ranks in " + std::to_string(made.total));
    }
    a->lay_out(made);
    // Before this rank says it succeeded: the others read these once all
    // did (the single-copy probe, the liveness checks).
    a->base_ = static_cast<uint8_t*>(segment.data());
    a->header_ = h;
    RankControl& mine = a->control(a->me_);
    mine.pid.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
    mine.probe_address.store(reinterpret_cast<uint64_t>(&a->probe_word_), std::memory_order_relaxed);
    // The doorbell, bound before this rank says it succeeded: the others
    // connect to it once all did.
    return a->signals_.bind(PeerSignals::doorbell_path(segment.name(), a->me_));
  };
  auto shared = share_segment(store, plan, deadline);
  if (!shared.ok()) return shared.status();
  a->segment_ = std::move(shared.value());  // the same mapping: base_ stays
  std::vector<int> pids(l);
  for (size_t q = 0; q < l; ++q) pids[q] = a->control(static_cast<int>(q)).pid.load(std::memory_order_relaxed);
  const Status watching = a->signals_.connect_peers(a->segment_.name(), a->me_, pids);
  bool all_watch = false;
  try {
    all_watch = a->share_host_facts(store, key_of("single-copy", leader), watching, deadline.as_timeout());
  } catch (const TimeoutError& e) {
    return timeout_error(std::string("setting up shared memory: ") + e.what());
  } catch (const Error& e) {
    return Status(StatusCode::kStoreError, std::string("setting up shared memory: ") + e.what());
  }
  // Every rank has connected to every doorbell (share_host_facts waited
  // for all of them): the names can go, a killed peer's too.
  a->signals_.forget_paths(a->segment_.name(), static_cast<int>(l));
  if (!all_watch) {
    return Status(StatusCode::kBackendError,
                  watching.ok() ? "another rank of this host cannot wake or watch its peers"
                                : "rank " + std::to_string(rank) + ": " + watching.message());
  }
  return a;
}

bool Arena::share_host_facts(Store& store, const std::string& key, const Status& watching,
                             std::chrono::milliseconds timeout) {
  // Every rank tries to read a word from the next rank of the host (the
  // last from the first); single copy is used only if all of them could.
  // What forbids it (seccomp, Yama's ptrace scope, another user) belongs
  // to a process, and around the ring each one reads and is read once.
  // Reading from every peer cost a host l*(l-1) system calls at join
  // (16 thousand at 128 ranks).
  const int64_t from = config_int(knobs::kShmSingleCopyBytes);
  single_copy_from_ = from > 0 ? static_cast<size_t>(from) : kAutoSingleCopyFrom;
  single_copy_size_told_ = from > 0;
  bool can = from != 0;
  if (can && local_size() > 1) {
    const int q = (me_ + 1) % local_size();
    uint64_t word = 0;
    Status st = read_from(q, &word, control(q).probe_address.load(std::memory_order_relaxed), sizeof word);
    if (!st.ok() || word != kArenaMagic) {
      COHORT_LOG(kInfo) << "rank " << local_ranks_[static_cast<size_t>(me_)]
                        << ": no single-copy reads from the other ranks of this host ("
                        << (st.ok() ? "wrong data" : st.message()) << "); shared-memory slots only";
      can = false;
    }
  }
  // Left to the machine (the default), single copy must also be fast
  // here. The host's first rank measures for all (they share the machine):
  // measuring takes 0.6-1 ms of CPU, 80 ms for 128 ranks that each did.
  if (can && from < 0 && me_ == 0 && kernel_copy_speed() < kKernelCopyMinSpeed) {
    COHORT_LOG(kInfo) << "rank " << local_ranks_[static_cast<size_t>(me_)]
                      << ": the kernel copies between processes at " << kernel_copy_speed()
                      << " of memcpy's speed (below " << kKernelCopyMinSpeed
                      << "): shared-memory slots only (COHORT_SHM_SINGLE_COPY_BYTES forces single copy)";
    can = false;
  }
  // "<single copy><wakes and watches its peers>": "11".
  store.set(key + "/" + std::to_string(local_ranks_[static_cast<size_t>(me_)]),
            to_bytes(std::string(can ? "1" : "0") + (watching.ok() ? "1" : "0")));
  std::vector<std::string> keys;
  for (int q : local_ranks_) keys.push_back(key + "/" + std::to_string(q));
  store.wait(keys, timeout);
  single_copy_ = true;
  bool all_watch = true;
  for (const Bytes& b : store.multi_get(keys)) {
    const std::string said = to_string(b);
    single_copy_ = single_copy_ && said.compare(0, 1, "1") == 0;
    all_watch = all_watch && said.compare(1, 1, "1") == 0;
  }
  return all_watch;
}

void Arena::lay_out(const ArenaLayout& layout) {
  ring_bytes_ = layout.sizes.ring_bytes;
  slot_bytes_ = layout.sizes.slot_bytes;
  controls_at_ = layout.controls_at;
  ring_controls_at_ = layout.ring_controls_at;
  rings_at_ = layout.rings_at;
  slots_at_ = layout.slots_at;
  posts_at_ = layout.posts_at;
}

Ring Arena::ring(int from, int to) const {
  const size_t index = static_cast<size_t>(from) * local_ranks_.size() + static_cast<size_t>(to);
  auto* ctl = reinterpret_cast<RingControl*>(base_ + ring_controls_at_ + index * sizeof(RingControl));
  return Ring(ctl, base_ + rings_at_ + index * ring_bytes_, ring_bytes_);
}

std::atomic<uint32_t>& Arena::sleeping(int local) const {
  return control(local).sleeping;
}

}  // namespace cohort::shm
