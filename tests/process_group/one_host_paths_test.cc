// The paths one host's collectives take besides the table's choice
// (shm_direct*.cc): reading the peers' buffers in place against the slots,
// on a host with a core per rank and on one its ranks outnumber, and the
// rank order a reduce_scatter keeps whichever path it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/shm_ways.h"
#include "cohort/config.h"
#include "cohort/errors.h"
#include "common/cpu_binding.h"
#include "process_group/thread_ranks.h"
#include "support/messages.h"
#include "transport/shm/host_slots.h"

namespace cohort::testing {
namespace {

// Forced from 4 KiB per rank (by default it is the machine's to choose),
// single-copy all_gather gives what the posts and slots give: each rank
// reads the others' buffers above a post (16 KiB a rank; 1025 elements go
// through the posts), when the system allows it and the ranks have a core
// each; else the slots run, and must agree as well.
TEST(OneHostPaths, AllGatherReadingThePeersBuffersGivesWhatTheSlotsGive) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "4096");
  run_ranks(2, [](ProcessGroup& g) {
    for (size_t n : {size_t{1025}, size_t{5000}, size_t{8191}, size_t{8192}}) {
      std::vector<int32_t> in(n), out(2 * n, -1);
      for (size_t k = 0; k < n; ++k) in[k] = g.rank() * 1000000 + static_cast<int32_t>(k);
      g.all_gather_into_tensor(Buffer::of(out), Buffer::of(in));
      for (size_t k = 0; k < 2 * n; ++k) {
        ASSERT_EQ(out[k], static_cast<int32_t>(k / n) * 1000000 + static_cast<int32_t>(k % n)) << "n " << n;
      }
    }
  });
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

// Broadcast reads the root's buffer in place from the forced 4 KiB (above
// a post, 16 KiB: 1025 elements go through the posts) up to 2 MiB, and
// goes through the slots from there: each gives the root's data, from
// either root.
TEST(OneHostPaths, BroadcastReadingTheRootsBufferGivesWhatTheSlotsGive) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "4096");
  run_ranks(2, [](ProcessGroup& g) {
    for (size_t n : {size_t{1025}, size_t{70000}, size_t{(2u << 20) / 4 + 1}}) {
      for (int root = 0; root < 2; ++root) {
        std::vector<int32_t> v(n, -1);
        if (g.rank() == root) {
          for (size_t k = 0; k < n; ++k) v[k] = root * 1000000 + static_cast<int32_t>(k % 999983);
        }
        BroadcastOptions o;
        o.src = root;
        g.broadcast(Buffer::of(v), o);
        for (size_t k = 0; k < n; ++k) {
          ASSERT_EQ(v[k], root * 1000000 + static_cast<int32_t>(k % 999983)) << "n " << n << " root " << root;
        }
      }
    }
  });
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

// all_to_all reads the peers' blocks in place only when every rank's
// blocks have one size and its inputs lie apart from its outputs. Here
// (blocks over a slot half, so the slots take several chunks):
//  - even blocks: read in place;
//  - rank 1's own block of another size: rank 0 offers, rank 1 cannot,
//    and rank 0 falls back to the slots with it;
//  - each rank's input its output (in place): the slots;
//  - rank 0 in place, rank 1 not: rank 1 offers, rank 0 cannot.
// all_to_all_four_rounds runs these four rounds on 2 ranks and checks
// every element.
// all_to_all_and_check runs one all_to_all on the group's ranks, rank
// `from`'s block for rank `to` `count(from, to)` int32s of values that
// name both, the outputs the inputs when `in_place`, and checks every
// element.
void all_to_all_and_check(ProcessGroup& g, const std::function<size_t(int, int)>& count, bool in_place,
                          size_t round) {
  const int r = g.rank(), p = g.size();
  auto value = [](int from, int to, size_t k) {
    return from * 100000000 + to * 10000000 + static_cast<int32_t>(k % 1000003);
  };
  std::vector<std::vector<int32_t>> ins(static_cast<size_t>(p)), outs(static_cast<size_t>(p));
  std::vector<Buffer> in_views, out_views;
  for (int q = 0; q < p; ++q) {
    auto& in = ins[static_cast<size_t>(q)];
    in.resize(count(r, q));
    for (size_t k = 0; k < in.size(); ++k) in[k] = value(r, q, k);
    outs[static_cast<size_t>(q)].assign(count(q, r), -1);
  }
  for (int q = 0; q < p; ++q) {
    in_views.push_back(Buffer::of(ins[static_cast<size_t>(q)]));
    out_views.push_back(in_place ? Buffer::of(ins[static_cast<size_t>(q)]) : Buffer::of(outs[static_cast<size_t>(q)]));
  }
  g.all_to_all(out_views, in_views);
  for (int q = 0; q < p; ++q) {
    const std::vector<int32_t>& got = in_place ? ins[static_cast<size_t>(q)] : outs[static_cast<size_t>(q)];
    ASSERT_EQ(got.size(), count(q, r)) << "round " << round;
    for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], value(q, r, k)) << "round " << round;
  }
}

void all_to_all_four_rounds(ProcessGroup& g) {
  const size_t n = 100003;  // int32s: 400 KB a block
  for (int round = 0; round < 4; ++round) {
    // Round 1: rank 1 keeps 7 fewer elements for itself.
    auto count = [&](int from, int to) { return round == 1 && from == 1 && to == 1 ? n - 7 : n; };
    const bool in_place = round == 2 || (round == 3 && g.rank() == 0);
    all_to_all_and_check(g, count, in_place, static_cast<size_t>(round));
  }
}

TEST(OneHostPaths, AllToAllReadingThePeersBuffersGivesWhatTheSlotsGive) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "4096");
  run_ranks(2, all_to_all_four_rounds);
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

// Small all_to_all of blocks of one size goes through the posts, but only
// once the ranks know that the last one fitted everywhere (each rank sees
// every rank's sizes then); any rank's blocks that do not fit send all
// ranks through the slots for that call. The rounds, each element checked:
// blocks of one size (the slots, then the posts), in place, rank 1's own
// block of another size (rank 0 posts its blocks, rank 1 cannot, and all
// go through the slots), empty blocks, blocks one int32 too large for a
// post right after ones that fitted, the largest that fit, and small ones
// again. On 2 ranks, and on 3 (whose blocks fit a post's third; where 3
// ranks outnumber the CPUs, as on a 2-core machine, they yield and take
// the slots every time, which the test then checks).
void small_all_to_all_rounds(ProcessGroup& g) {
  struct Round {
    size_t n;          // int32s a block
    size_t rank1_own;  // rank 1's block to itself
    bool in_place;
  };
  const size_t largest = shm::HostSlots::kPostBytes / static_cast<size_t>(g.size()) / sizeof(int32_t);
  const Round rounds[] = {{3, 3, false},           {3, 3, false},   {1024, 1024, false}, {largest, largest, true},
                          {largest + 1, largest + 1, false},         {5, 9, false},       {5, 5, false},
                          {0, 0, false},           {5, 5, false},   {4096, 4096, false}, {largest, largest, false},
                          {largest, largest, false},                {7, 7, false},       {7, 7, true}};
  for (size_t i = 0; i < sizeof rounds / sizeof rounds[0]; ++i) {
    const Round& round = rounds[i];
    auto count = [&](int from, int to) { return from == 1 && to == 1 ? round.rank1_own : round.n; };
    all_to_all_and_check(g, count, round.in_place, i);
  }
}

TEST(OneHostPaths, SmallAllToAllThroughThePostsGivesWhatTheSlotsGiveWhateverTheSizesDo) {
  run_ranks(2, small_all_to_all_rounds);
}

TEST(OneHostPaths, SmallAllToAllThroughThePostsOnThreeRanks) { run_ranks(3, small_all_to_all_rounds); }

// After an all_to_all that fitted the posts, two ranks whose blocks are
// each of one size but not the same size both post, see that the sizes
// differ, and fail in the slots as sizes that do not pair up: a desync
// naming the pair, not a hang and not a wrong answer.
TEST(OneHostPaths, SmallAllToAllSizesThatDoNotPairUpAfterThePostsAreADesync) {
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> in(8, 1.0f), out(8, 0.0f);
    g.all_to_all_single(Buffer::of(out), Buffer::of(in));
    g.all_to_all_single(Buffer::of(out), Buffer::of(in));  // through the posts
    std::vector<float> mine(g.rank() == 0 ? 8 : 12, 1.0f), theirs(mine.size(), 0.0f);
    try {
      g.all_to_all_single(Buffer::of(theirs), Buffer::of(mine));
      ADD_FAILURE() << "blocks of 16 and 24 bytes were exchanged";
    } catch (const DesyncError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 sends 16 bytes to rank 1, which expects 24 from it"),
                std::string::npos)
          << e.what();
    }
  });
}

// With both ranks on one CPU (the host oversubscribed), all_to_all still
// reads in place (broadcast and all_gather keep to the slots there).
TEST(OneHostPaths, AllToAllReadsInPlaceWhereRanksOutnumberCores) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "4096");
  run_ranks_on_one_cpu(2, all_to_all_four_rounds);
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

// log_of_small_all_to_alls returns what COHORT_DEBUG=info logs while two
// ranks (both on one CPU if `on_one_cpu`) run three all_to_alls of blocks
// of 2 floats: the first through the slots (no rank knows the others'
// sizes yet), the next ones through the posts where each rank has a core.
std::string log_of_small_all_to_alls(bool on_one_cpu) {
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  auto three = [](ProcessGroup& g) {
    std::vector<float> in(4, 1.0f), out(4, 0.0f);
    for (int i = 0; i < 3; ++i) g.all_to_all_single(Buffer::of(out), Buffer::of(in));
  };
  ::testing::internal::CaptureStderr();
  if (on_one_cpu) {
    run_ranks_on_one_cpu(2, three);
  } else {
    run_ranks(2, three);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  return log;
}

// Each rank logs each way once: #1 through the slots, #2 through the
// posts, #3 nothing new.
TEST(OneHostPaths, SmallAllToAllLogsThatItWentThroughThePostsOnceTheRanksKnewTheyFit) {
  if (affinity_of_this_thread().size() < 2) GTEST_SKIP() << "this test may run on one CPU only";
  const std::string log = log_of_small_all_to_alls(/*on_one_cpu=*/false);
  EXPECT_EQ(times_in(log, "all_to_all_single #1 of group test goes through the slots (logged once"), 2u) << log;
  EXPECT_EQ(times_in(log,
                     "all_to_all_single #2 of group test goes through the posts (blocks of one size that fit "
                     "a post) (logged once"),
            2u)
      << log;
  EXPECT_EQ(times_in(log, "all_to_all_single #3 of group test goes"), 0u) << log;
}

TEST(OneHostPaths, SmallAllToAllLogsWhyItKeptToTheSlotsWhereRanksOutnumberCores) {
  const std::string log = log_of_small_all_to_alls(/*on_one_cpu=*/true);
  EXPECT_EQ(times_in(log,
                     "all_to_all_single #2 of group test goes through the slots: its blocks fit the posts, but "
                     "this host's ranks outnumber their CPUs"),
            2u)
      << log;
  EXPECT_EQ(times_in(log, "through the posts ("), 0u) << log;
}

// lines_with counts the lines of `log` that hold both `a` and `b`.
size_t lines_with(const std::string& log, const std::string& a, const std::string& b) {
  size_t n = 0;
  for (size_t start = 0; start < log.size();) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    n += line.find(a) != std::string::npos && line.find(b) != std::string::npos ? 1 : 0;
    start = end + 1;
  }
  return n;
}

// Every direct collective logs the way it went, once per way: small ones
// through the posts (an all_reduce of a word in the stamps), large ones
// through the slots (single copy off, so that no machine reads in place).
// Each runs twice, and each rank of the two logs each way once.
TEST(OneHostPaths, EachDirectCollectiveLogsTheWayItWentOncePerWay) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "0");
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  ::testing::internal::CaptureStderr();
  run_ranks(2, [](ProcessGroup& g) {
    for (const size_t n : {size_t{1}, size_t{100}, size_t{100}, size_t{300000}, size_t{300000}}) {
      std::vector<float> v(n, 1.0f), gathered(2 * n), scattered(n);
      g.all_reduce(Buffer::of(v));
      ASSERT_EQ(v[n - 1], 2.0f) << n;
      g.broadcast(Buffer::of(v));
      g.reduce(Buffer::of(v));
      const std::vector<Buffer> halves = {Buffer::of(gathered.data(), n), Buffer::of(gathered.data() + n, n)};
      g.all_gather(halves, Buffer::of(v));
      g.reduce_scatter(Buffer::of(scattered), halves);
    }
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
  const std::string once = " (logged once for this way)";
  EXPECT_EQ(lines_with(log, "] all_reduce #", "goes in the stamps (a word at most)" + once), 2u) << log;
  for (const char* c :
       {"] all_reduce #", "] broadcast #", "] reduce #", "] all_gather #", "] reduce_scatter #"}) {
    EXPECT_EQ(lines_with(log, c, "goes through the posts" + once), 2u) << c << "\n" << log;
    EXPECT_EQ(lines_with(log, c, "goes through the slots" + once), 2u) << c << "\n" << log;
  }
  EXPECT_EQ(times_in(log, "in place"), 0u) << log;
}

// run_collective runs `c` on `n` floats a rank (a block, for all_gather
// and reduce_scatter) with values that tell the ranks apart, and checks
// what every rank gets.
void run_collective(ProcessGroup& g, Collective c, size_t n) {
  const int p = g.size(), me = g.rank();
  auto value = [](int rank, size_t k) { return static_cast<float>(rank * 10 + static_cast<int>(k % 7)); };
  std::vector<float> v(n), all(n * static_cast<size_t>(p));
  for (size_t k = 0; k < n; ++k) v[k] = value(me, k);
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kReduce:
      c == Collective::kAllReduce ? g.all_reduce(Buffer::of(v)) : g.reduce(Buffer::of(v), ReduceOptions{});
      if (c == Collective::kReduce && me != 0) return;
      for (size_t k = 0; k < n; ++k) {
        float sum = 0;
        for (int q = 0; q < p; ++q) sum += value(q, k);
        ASSERT_EQ(v[k], sum) << collective_name(c) << " of " << n << " at " << k;
      }
      return;
    case Collective::kBroadcast: {
      BroadcastOptions o;
      o.src = p - 1;
      g.broadcast(Buffer::of(v), o);
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(v[k], value(p - 1, k)) << "broadcast of " << n << " at " << k;
      return;
    }
    case Collective::kAllGather:
      g.all_gather_into_tensor(Buffer::of(all), Buffer::of(v));
      for (size_t k = 0; k < all.size(); ++k) {
        ASSERT_EQ(all[k], value(static_cast<int>(k / n), k % n)) << "all_gather of " << n << " at " << k;
      }
      return;
    case Collective::kReduceScatter: {
      for (size_t k = 0; k < all.size(); ++k) all[k] = value(me, k);
      g.reduce_scatter_tensor(Buffer::of(v), Buffer::of(all));
      for (size_t k = 0; k < n; ++k) {
        const size_t at = static_cast<size_t>(me) * n + k;
        float sum = 0;
        for (int q = 0; q < p; ++q) sum += value(q, at);
        ASSERT_EQ(v[k], sum) << "reduce_scatter of " << n << " at " << k;
      }
      return;
    }
    default:
      FAIL() << collective_name(c) << " has no forceable way";
  }
}

// What the debug log says of each way (note_way's words).
const char* logged_as(ShmWay way) {
  switch (way) {
    case ShmWay::kStamp:
      return "goes in the stamps";
    case ShmWay::kPosts:
      return "goes through the posts (logged";
    case ShmWay::kInPlace:
      return " in place (logged";
    default:
      return "goes through the slots";
  }
}

// Every way of shm_ways.cc that COHORT_ALGO may force runs its collective
// at 3 ranks (more than the 2 cores here: the rules would take other
// ways) at sizes from one element to several chunks, gives the right
// values and goes the way it was told, whatever the rule would take.
TEST(OneHostPaths, EveryForceableWayRunsItsCollectiveWhereverTheRuleWouldGo) {
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "1");  // the host may read in place, from any size
  set_config("COHORT_LOG_LEVEL", "warning");
  set_config("COHORT_DEBUG", "info");
  int forced = 0;
  for (const ShmWayEntry& e : shm_way_registry()) {
    if (!e.forceable) continue;
    ++forced;
    const std::string item =
        std::string(collective_name(e.collective)) + "=shm_direct." + shm_way_name(e.way);
    set_config("COHORT_ALGO", item);
    // Sizes the way can run: the stamp a word, the posts 16 KiB (every
    // block together for reduce_scatter: 3 x 1000 floats).
    std::vector<size_t> sizes = {1};
    if (e.way == ShmWay::kStamp) sizes.push_back(2);
    if (e.way != ShmWay::kStamp) sizes.push_back(1000);
    if (e.way == ShmWay::kSlots || e.way == ShmWay::kInPlace) sizes.push_back(300001);
    ::testing::internal::CaptureStderr();
    run_ranks(3, [&](ProcessGroup& g) {
      for (size_t n : sizes) run_collective(g, e.collective, n);
    });
    const std::string log = ::testing::internal::GetCapturedStderr();
    // all_gather and reduce_scatter log as their _tensor calls: one collective runs a time.
    const std::string of = "] " + std::string(collective_name(e.collective));
    EXPECT_EQ(lines_with(log, of, logged_as(e.way)), 3u) << item << "\n" << log;
    EXPECT_EQ(lines_with(log, of, "(logged once for this way)"), 3u) << item << ": another way too\n" << log;
  }
  EXPECT_EQ(forced, 13);
  reset_config("COHORT_ALGO");
  reset_config("COHORT_DEBUG");
  reset_config("COHORT_LOG_LEVEL");
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
}

// A forced way that cannot run a call is refused by every rank before
// any starts it, naming the way and why: the posts for 64 KiB, reading in
// place on a host whose ranks may not. The refusal fails the collective
// as InvalidArgument (and, as any failure, the group); sizes the way can
// run go that way.
TEST(OneHostPaths, AForcedWayThatCannotRunACallIsRefusedNamingWhy) {
  set_config("COHORT_ALGO", "broadcast=shm_direct.posts");
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> small(4096, 1.0f), large(16384, 1.0f);
    g.broadcast(Buffer::of(small));
    const std::string why = message_of([&] { g.broadcast(Buffer::of(large)); });
    EXPECT_NE(
        why.find("COHORT_ALGO forces broadcast through shm_direct.posts, which cannot run broadcast #2"),
        std::string::npos)
        << why;
    EXPECT_NE(why.find("the posts hold 16384 bytes a rank; this call has 65536"), std::string::npos) << why;
    EXPECT_THROW(g.barrier(), BackendError);
  });
  set_config("COHORT_ALGO", "all_gather=shm_direct.in_place");
  set_config("COHORT_SHM_SINGLE_COPY_BYTES", "0");
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> in(8, 1.0f), out(16);
    try {
      g.all_gather_into_tensor(Buffer::of(out), Buffer::of(in));
      ADD_FAILURE() << "in place ran where the ranks may not read each other's memory";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("this host's ranks do not read each other's memory"),
                std::string::npos)
          << e.what();
    }
  });
  reset_config("COHORT_SHM_SINGLE_COPY_BYTES");
  reset_config("COHORT_ALGO");
}

// A reduce_scatter on one host reduces each block in rank order, whichever
// rank owns it and whether or not it runs in place (a rank's own block
// never goes through shared memory): the MIN of rank 0's -0 and the
// others' +0 is -0 everywhere (MIN keeps its left operand on a tie), where
// a rank that put its own block first would get +0. Through the posts
// (small), the slots (larger) and several chunks of them.
void reduce_scatter_in_rank_order(ProcessGroup& g) {
  const int world = g.size();
  for (const size_t n : {size_t{3}, size_t{1000}, size_t{5000}, size_t{300001}}) {
    for (const bool in_place : {false, true}) {
      std::vector<float> input(n * static_cast<size_t>(world), g.rank() == 0 ? -0.0f : 0.0f);
      std::vector<float> output(n, 7.0f);
      Buffer out =
          in_place ? Buffer::of(input.data() + static_cast<size_t>(g.rank()) * n, n) : Buffer::of(output);
      ReduceScatterOptions o;
      o.op = ReduceOp::MIN;
      g.reduce_scatter_tensor(out, Buffer::of(input), o);
      const float* got = static_cast<const float*>(out.data);
      for (size_t k = 0; k < n; ++k) {
        ASSERT_TRUE(got[k] == 0.0f && std::signbit(got[k]))
            << "rank " << g.rank() << " of " << world << ", " << n << " a block, in place " << in_place
            << ": [" << k << "] is " << got[k] << (std::signbit(got[k]) ? "" : " (+0)");
      }
    }
  }
}

TEST(OneHostPaths, ReduceScatterReducesEveryBlockInRankOrder) {
  for (int world : {2, 3, 4}) run_ranks(world, reduce_scatter_in_rank_order);
}

TEST(OneHostPaths, ReduceScatterReducesInRankOrderWhereRanksOutnumberCores) {
  run_ranks_on_one_cpu(3, reduce_scatter_in_rank_order);
}

}  // namespace
}  // namespace cohort::testing
