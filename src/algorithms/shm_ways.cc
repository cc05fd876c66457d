#include "algorithms/shm_ways.h"

#include <sstream>

#include "transport/shm/host_slots.h"

namespace cohort {

static_assert(shm_rules::kShmPostBytes == shm::HostSlots::kPostBytes,
              "shm_ways.h: the posts' size is host_slots.h's");

namespace {

const ShmWayEntry* entry_of(Collective collective, ShmWay way) {
  for (const ShmWayEntry& e : shm_way_registry()) {
    if (e.collective == collective && e.way == way) return &e;
  }
  return nullptr;
}

}  // namespace

const std::vector<ShmWayEntry>& shm_way_registry() {
  using C = Collective;
  using W = ShmWay;
  static const std::vector<ShmWayEntry> registry = {
      {C::kAllReduce, W::kStamp, "up to a word (8 bytes): the data rides in each rank's arrival stamp"},
      // At 2 ranks, 4 KiB: 0.52-0.55 us against 0.58-0.60 through the
      // slots; 16 KiB: 3.25 against 4.11 (a rank need not wait for a slot
      // half its peers may still be reading).
      {C::kAllReduce, W::kPosts, "up to a post (16 KiB): in one step through the posts"},
      {C::kAllReduce, W::kSlots,
       "larger: each rank reduces its block of every chunk through the slots; straight from the ranks' "
       "buffers where all of them lie at the same places of symmetric memory (agreed at the call)"},
      {C::kReduce, W::kPosts, "up to a post (16 KiB): in one step through the posts"},
      {C::kReduce, W::kSlots, "larger: each rank reduces its block of every chunk through the slots"},
      {C::kBroadcast, W::kPosts, "up to a post (16 KiB): through the posts"},
      {C::kBroadcast, W::kInPlace,
       "from the host's single-copy size (32 KiB unless COHORT_SHM_SINGLE_COPY_BYTES says) to below 2 MiB, "
       "where every rank has a CPU: the others read the root's buffer in place"},
      {C::kBroadcast, W::kSlots, "otherwise: the root's chunks through its slots, copied and read in turn"},
      {C::kAllGather, W::kInPlace,
       "blocks from 8 KiB where the host's single-copy size is its default (else from that size), where "
       "every "
       "rank has a CPU: the others' buffers read in place"},
      {C::kAllGather, W::kPosts, "otherwise, blocks up to a post (16 KiB): through the posts"},
      {C::kAllGather, W::kSlots,
       "otherwise: chunks through the slots (an input in symmetric memory read from there at once)"},
      {C::kReduceScatter, W::kPosts,
       "all blocks together up to a post (16 KiB; 1 KiB where the ranks outnumber their CPUs): through the "
       "posts"},
      {C::kReduceScatter, W::kSlots, "larger: chunks of every block through the slots"},
      {C::kAllToAll, W::kPosts,
       "blocks of one size that fit a post, once the last all_to_all showed every rank they do, where every "
       "rank has a CPU",
       false},
      {C::kAllToAll, W::kInPlace,
       "blocks of one size from the host's single-copy size (from 8 KiB where it is the default and every "
       "rank has a CPU): the others' buffers read in place",
       false},
      {C::kAllToAll, W::kSlots, "otherwise: chunks of every block through the slots", false},
  };
  return registry;
}

const char* shm_way_name(ShmWay way) {
  switch (way) {
    case ShmWay::kByRule:
      return "by_rule";
    case ShmWay::kStamp:
      return "stamp";
    case ShmWay::kPosts:
      return "posts";
    case ShmWay::kInPlace:
      return "in_place";
    case ShmWay::kSlots:
      return "slots";
  }
  return "unknown";
}

bool parse_shm_way(const std::string& name, ShmWay* out) {
  for (ShmWay w : {ShmWay::kStamp, ShmWay::kPosts, ShmWay::kInPlace, ShmWay::kSlots}) {
    if (name == shm_way_name(w)) {
      *out = w;
      return true;
    }
  }
  return false;
}

std::string shm_ways_of(Collective collective) {
  std::string names;
  for (const ShmWayEntry& e : shm_way_registry()) {
    if (e.collective != collective || !e.forceable) continue;
    names += (names.empty() ? "" : ", ") + std::string(shm_way_name(e.way));
  }
  return names;
}

std::string why_way_cannot_run(Collective collective, ShmWay way, const ShmCallFacts& f) {
  if (way == ShmWay::kByRule) return "";
  const ShmWayEntry* e = entry_of(collective, way);
  if (e == nullptr || !e->forceable) {
    const std::string ways = shm_ways_of(collective);
    return "shm_direct has no way '" + std::string(shm_way_name(way)) + "' to force for " +
           collective_name(collective) +
           (ways.empty() ? std::string(" (its ways are agreed by the host's ranks at each call)")
                         : " (its ways: " + ways + ")");
  }
  const std::string has = "; this call has " + std::to_string(f.bytes);
  switch (way) {
    case ShmWay::kStamp:
      return f.bytes <= sizeof(uint64_t) ? "" : "the stamp carries a word (8 bytes)" + has;
    case ShmWay::kPosts:
      // Forced, the posts take what they hold, whoever shares the CPUs.
      if (f.bytes <= shm_rules::kShmPostBytes) return "";
      return "the posts hold " + std::to_string(shm_rules::kShmPostBytes) + " bytes" +
             (collective == Collective::kReduceScatter ? " of all blocks together" : " a rank") + has;
    case ShmWay::kInPlace:
      return f.single_copy
                 ? ""
                 : "this host's ranks do not read each other's memory (COHORT_SHM_SINGLE_COPY_BYTES=0, "
                   "the kernel forbids process_vm_readv, or its copy is slow here; COHORT_DEBUG=info "
                   "says which)";
    default:
      return "";
  }
}

std::string describe_shm_ways() {
  std::ostringstream out;
  out << "# shm_direct's ways within the host, taken by measured rules (COHORT_ALGO forces one as "
         "collective=shm_direct.WAY, where marked)\n";
  for (const ShmWayEntry& e : shm_way_registry()) {
    out << collective_name(e.collective) << "  " << shm_way_name(e.way) << (e.forceable ? "*" : "") << "  "
        << e.when << "\n";
  }
  return out.str();
}

}  // namespace cohort
