// Wrong arguments raise InvalidArgument naming what is wrong, on the
// calling rank, before anything is sent: the group stays usable.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "cohort/errors.h"
#include "process_group/thread_ranks.h"
#include "transport/shm/host_slots.h"

namespace cohort::testing {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "(no exception)";
}

#define EXPECT_INVALID(call, fragment)                                  \
  do {                                                                  \
    std::string m = message_of([&] { call; });                          \
    EXPECT_NE(m.find(fragment), std::string::npos) << "message: " << m; \
  } while (0)

TEST(InvalidArgumentTest, EveryCheckNamesTheProblemAndTheGroupGoesOn) {
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> f(4, 1.0f), f8(8), f3(3);
    std::vector<int32_t> i4(4, 1);
    BroadcastOptions b;
    b.src = 2;
    EXPECT_INVALID(g.broadcast(Buffer::of(f), b), "broadcast src is 2, out of range");
    ReduceOptions r;
    r.dst = -1;
    EXPECT_INVALID(g.reduce(Buffer::of(f), r), "reduce dst is -1");
    AllReduceOptions band;
    band.op = ReduceOp::BAND;
    EXPECT_INVALID(g.all_reduce(Buffer::of(f), band), "BAND is not defined for float32");
    AllReduceOptions avg;
    avg.op = ReduceOp::AVG;
    std::vector<uint8_t> flags(4, 1);
    EXPECT_INVALID(g.all_reduce(Buffer{flags.data(), flags.size(), DType::kBool, Device{}}, avg),
                   "AVG is not defined for bool");
    AllReduceOptions premul;
    premul.op = ReduceOp::premul_sum(0.5);
    EXPECT_INVALID(g.all_reduce(Buffer::of(i4), premul), "PREMUL_SUM is not defined for int32");
    EXPECT_INVALID(g.all_reduce(Buffer{nullptr, 5, DType::kFloat32, Device{}}),
                   "null pointer with 5 elements");
    Buffer on_gpu = Buffer::of(f);
    on_gpu.device.type = DeviceType::kCUDA;
    EXPECT_INVALID(g.all_reduce(on_gpu), "CUDA");
    EXPECT_INVALID(g.all_gather({Buffer::of(f)}, Buffer::of(f)),
                   "outputs has 1 buffers; the group has 2 ranks");
    EXPECT_INVALID(g.all_gather({Buffer::of(f3), Buffer::of(f3)}, Buffer::of(f)),
                   "holds 3 elements but the input has 4");
    EXPECT_INVALID(g.all_gather({Buffer::of(i4), Buffer::of(i4)}, Buffer::of(f)),
                   "is int32 but the input is float32");
    EXPECT_INVALID(g.all_gather_into_tensor(Buffer::of(f3), Buffer::of(f)), "expected 2 x 4");
    EXPECT_INVALID(g.reduce_scatter_tensor(Buffer::of(f), Buffer::of(f)), "expected 2 x 4");
    EXPECT_INVALID(g.all_to_all_single(Buffer::of(f3), Buffer::of(f3)), "do not split evenly");
    EXPECT_INVALID(g.all_to_all_single(Buffer::of(f), Buffer::of(f), {1, 1}, {2, 2}),
                   "add up to 2 but output holds 4");
    GatherOptions go;
    go.dst = 0;
    if (g.rank() == 1)
      EXPECT_INVALID(g.gather({Buffer::of(f)}, Buffer::of(f), go), "must be empty on ranks other than dst");
    EXPECT_INVALID(g.send(Buffer::of(f), g.rank()), "cannot send to itself");
    EXPECT_INVALID(g.recv(Buffer::of(f), 5), "recv src is 5");
    EXPECT_INVALID(g.all_reduce_coalesced({}), "buffers is empty");
    EXPECT_INVALID(g.all_reduce_coalesced({Buffer::of(f), Buffer::of(i4)}),
                   "buffers[1] is int32 but buffers[0] is float32");
    EXPECT_INVALID(g.all_reduce_coalesced({Buffer::of(f), on_gpu}), "buffers[1] is on a CUDA device");
    EXPECT_INVALID(g.all_reduce_coalesced({Buffer::of(f), Buffer{nullptr, 2, DType::kFloat32, Device{}}}),
                   "null pointer with 2 elements");
    EXPECT_INVALID(g.all_reduce_coalesced({Buffer::of(f)}, band), "BAND is not defined for float32");
    // Nothing was sent: the group still works.
    g.all_reduce(Buffer::of(f));
    EXPECT_EQ(f[0], 2.0f);
  });
}

// An all_reduce of `rank0` floats on rank 0 and `rank1` on rank 1 fails
// on both with a desync (or, on the rank that noticed second, the loss of
// the first), and leaves the group refusing new work.
void expect_sizes_that_differ_to_be_a_desync(size_t rank0, size_t rank1) {
  SCOPED_TRACE(std::to_string(rank0) + " floats against " + std::to_string(rank1));
  run_ranks(2, [&](ProcessGroup& g) {
    std::vector<float> f(g.rank() == 0 ? rank0 : rank1, 1.0f);
    try {
      g.all_reduce(Buffer::of(f));
      ADD_FAILURE() << "mismatched sizes were reduced";
    } catch (const DesyncError& e) {
      EXPECT_NE(std::string(e.what()).find("sizes differ between ranks"), std::string::npos) << e.what();
    } catch (const NetworkError& e) {
      // The rank that noticed second may see the first drop the connection.
      EXPECT_NE(std::string(e.what()).find("closed its connection"), std::string::npos) << e.what();
    }
    // The group refuses new work, and says why.
    try {
      g.barrier();
      ADD_FAILURE() << "a broken group ran a barrier";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("can no longer be used"), std::string::npos) << e.what();
    }
  });
}

// Sizes on one path, and on both sides of a path's limit on one host: the
// stamp's word (up to 8 bytes), the posts (up to a post), the slots.
TEST(InvalidArgumentTest, SizesThatDifferBetweenRanksAreADesyncNotAHang) {
  constexpr size_t kPost = shm::HostSlots::kPostBytes / sizeof(float);
  expect_sizes_that_differ_to_be_a_desync(4, 5);
  expect_sizes_that_differ_to_be_a_desync(2, 3);
  expect_sizes_that_differ_to_be_a_desync(1024, 1025);
  expect_sizes_that_differ_to_be_a_desync(kPost, kPost + 1);
  expect_sizes_that_differ_to_be_a_desync(2 * kPost, 2 * kPost + 1);
}

// The split sizes of an all_to_all may differ between ranks, so only the
// pairs can disagree: rank 0 sends 3 elements to rank 2, which expects 2.
// On one host every rank reads every rank's sizes, so all three fail alike
// and name the pair.
TEST(InvalidArgumentTest, AllToAllSplitsThatDoNotPairUpAreADesyncNamingThePair) {
  run_ranks(3, [](ProcessGroup& g) {
    std::vector<size_t> in_splits{2, 2, 2}, out_splits{2, 2, 2};
    if (g.rank() == 0) in_splits[2] = 3;
    std::vector<float> in(7, 1.0f), out(6, 0.0f);
    in.resize(std::accumulate(in_splits.begin(), in_splits.end(), size_t{0}));
    try {
      g.all_to_all_single(Buffer::of(out), Buffer::of(in), out_splits, in_splits);
      ADD_FAILURE() << "splits that do not pair up were exchanged";
    } catch (const DesyncError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 sends 12 bytes to rank 2, which expects 8 from it"),
                std::string::npos)
          << e.what();
    }
  });
}

// A rank in a small broadcast (through the root's posts) while its root is
// in an all_reduce (through the slots) reads the root's stamp from where
// the root wrote it, and names the root's collective.
TEST(InvalidArgumentTest, ABroadcastMetByAnAllReduceNamesTheRootsCollective) {
  run_ranks(2, [](ProcessGroup& g) {
    std::vector<float> f(4, 1.0f);
    try {
      if (g.rank() == 0) {
        g.all_reduce(Buffer::of(f));
      } else {
        BroadcastOptions o;
        o.src = 0;
        g.broadcast(Buffer::of(f), o);
      }
      ADD_FAILURE() << "an all_reduce met a broadcast";
    } catch (const DesyncError& e) {
      const std::string what = e.what();
      if (g.rank() == 1) {
        EXPECT_NE(what.find("rank 0 is in all_reduce #1"), std::string::npos) << what;
      }
    } catch (const NetworkError& e) {
      // The rank that noticed second may see the first drop the connection.
      EXPECT_NE(std::string(e.what()).find("closed its connection"), std::string::npos) << e.what();
    }
  });
}

TEST(InvalidArgumentTest, AbortFailsPendingWorkAtOnce) {
  std::atomic<bool> checked{false};
  run_ranks(2, [&](ProcessGroup& g) {
    if (g.rank() == 1) {
      // Stay connected until rank 0 has seen its abort.
      while (!checked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (g.rank() == 0) {
      std::vector<float> f(4);
      P2POptions o;
      o.async_op = true;
      auto w = g.recv(Buffer::of(f), 1, o);  // rank 1 never sends
      g.abort("test is done waiting");
      try {
        w->wait();
        ADD_FAILURE() << "the receive completed";
      } catch (const NetworkError& e) {
        EXPECT_NE(std::string(e.what()).find("test is done waiting"), std::string::npos) << e.what();
      }
      // Work issued after the abort fails at once, with the same reason.
      int32_t x = 0;
      auto late = g.isend(Buffer::of(&x, 1), 1);
      EXPECT_THROW(late->wait(), Error);
      checked = true;
    }
  });
}

}  // namespace
}  // namespace cohort::testing
