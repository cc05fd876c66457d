// The schedule simulator (src/algorithms/schedule_sim.h): the tracer
// records what the algorithms really post (checked against a run over real
// TCP), every registered message-passing algorithm's traced schedules fit
// together at P = 2..9, 12, 16 and on hosts, the simulated times follow
// the model's terms where they can be worked out by hand, and schedules
// that do not fit are named.
#include "algorithms/schedule_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <tuple>

#include "algorithms/registry.h"
#include "cohort/hash_store.h"
#include "reduce/reduce.h"
#include "transport/connect_group.h"

namespace cohort {
namespace {

// A model with round numbers: 10 us a network step (5 each way), 1 GB/s,
// nothing for posting or reducing, so that the times can be worked out.
CostModel round_model() {
  CostModel m = CostModel::from_config();
  m.network = LinkCost{10e-6, 1e9};
  m.shm_messages = LinkCost{2e-6, 4e9};
  m.message_s = 0;
  m.reduce_bytes_per_s = 1e30;
  return m;
}

// request: one call of `c` at `bytes` a rank, P ranks on `hosts` hosts,
// by `a` (the table's choice when not given).
SimulationRequest request(Collective c, size_t bytes, int p, int hosts, const Algorithm* a = nullptr) {
  SimulationRequest r;
  r.collective = c;
  r.bytes = bytes;
  r.ranks = p;
  r.hosts = hosts;
  r.forced = a != nullptr;
  if (a) r.algorithm = *a;
  return r;
}
SimulationRequest forcing(Algorithm a, Collective c, size_t bytes, int p, int hosts) {
  return request(c, bytes, p, hosts, &a);
}

std::vector<RankSchedule> trace_all(Algorithm a, Collective c, int p, size_t bytes,
                                    const std::vector<int>& host_of) {
  CallBuffers buffers(c, p, bytes);
  std::vector<uint8_t> scratch;
  std::vector<RankSchedule> out;
  for (int r = 0; r < p; ++r) out.push_back(trace_rank(a, buffers, r, host_of, scratch));
  return out;
}

TEST(ScheduleSimulation, ARingAllGatherTakesItsStepsByHand) {
  // P-1 exchange steps, each half a latency out, the block's bytes, and
  // half a latency to wake the waiting receiver.
  const int p = 6;
  const size_t block = 100000;
  auto report = run_simulation(forcing(Algorithm::kRing, Collective::kAllGather, block, p, p), round_model());
  ASSERT_TRUE(report.ok()) << report.status().message();
  const double step = 10e-6 + block / 1e9;
  EXPECT_NEAR(report.value().call.seconds, (p - 1) * step, 1e-9);
  EXPECT_EQ(report.value().call.messages, static_cast<size_t>(p * (p - 1)));
  // The model's analytic price of the ring is the same sum.
  EXPECT_NEAR(report.value().model_seconds, (p - 1) * step, 1e-9);
}

TEST(ScheduleSimulation, ABinomialBroadcastIsItsDepthOfOneWayHops) {
  // 8 ranks: three hops deep; the root's sends queue on its link, so rank
  // 1 (the last of the root's children) hears at 3 transfers plus a latency.
  const size_t n = 1 << 20;
  auto report =
      run_simulation(forcing(Algorithm::kBinomialTree, Collective::kBroadcast, n, 8, 8), round_model());
  ASSERT_TRUE(report.ok()) << report.status().message();
  const double transfer = n / 1e9;
  EXPECT_GE(report.value().call.seconds, 3 * transfer + 10e-6 - 1e-9);
  EXPECT_LE(report.value().call.seconds, 3 * (transfer + 10e-6) + 1e-9);
}

TEST(ScheduleSimulation, AKnomialTreeTakesItsLevelsByHand) {
  // 16 ranks, radix 4: two levels. The root sends to 4, 8 and 12, then to
  // 1, 2 and 3, six buffers queued on its link; 12, its third, passes the
  // buffer on to 13, 14 and 15, the last of which hears after six
  // transfers and two hops' latency at most.
  const size_t n = 1 << 20;
  const int p = 16;
  const double transfer = n / 1e9;
  auto report =
      run_simulation(forcing(Algorithm::kKnomialTree, Collective::kBroadcast, n, p, p), round_model());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report.value().call.messages, static_cast<size_t>(p - 1));
  EXPECT_DOUBLE_EQ(report.value().call.most_bytes_on_a_link, 6.0 * n);
  EXPECT_GE(report.value().call.seconds, 6 * transfer + 10e-6 - 1e-9);
  EXPECT_LE(report.value().call.seconds, 6 * (transfer + 10e-6) + 1e-9);
  // Its reduce is the same tree upwards: the root takes in six buffers.
  auto up = run_simulation(forcing(Algorithm::kKnomialTree, Collective::kReduce, n, p, p), round_model());
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_EQ(up.value().call.messages, static_cast<size_t>(p - 1));
  EXPECT_GE(up.value().call.seconds, 6 * transfer - 1e-9);
  // At 1K ranks and 4 bytes it is half the binomial tree's depth.
  auto small = run_simulation(forcing(Algorithm::kKnomialTree, Collective::kBroadcast, 4, 1024, 1024),
                              round_model());
  auto binomial = run_simulation(forcing(Algorithm::kBinomialTree, Collective::kBroadcast, 4, 1024, 1024),
                                 round_model());
  ASSERT_TRUE(small.ok() && binomial.ok());
  EXPECT_LT(small.value().call.seconds, 0.6 * binomial.value().call.seconds);
}

TEST(ScheduleSimulation, APipelinedTreeBroadcastIsItsDepthPlusItsSegmentsOfHops) {
  // 64 ranks, 64 KiB: eight segments of 8 KiB down a binary tree six deep.
  // The last segment reaches the deepest rank after 6 + 8 - 1 hops, each
  // a segment to both children (their latencies overlapping), where the
  // binomial tree's six hops each carry the whole buffer.
  const size_t n = 64 << 10, segment = 8 << 10;
  const int p = 64, depth = 6, segments = 8;
  const double hops = depth + segments - 1, two = 2.0 * segment / 1e9;
  auto tree =
      run_simulation(forcing(Algorithm::kPipelinedTree, Collective::kBroadcast, n, p, p), round_model());
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree.value().call.messages, static_cast<size_t>((p - 1) * segments));
  EXPECT_GE(tree.value().call.seconds, hops * two - 1e-9);
  EXPECT_LE(tree.value().call.seconds, hops * (two + 10e-6) + 1e-9);
  auto binomial =
      run_simulation(forcing(Algorithm::kBinomialTree, Collective::kBroadcast, n, p, p), round_model());
  ASSERT_TRUE(binomial.ok());
  EXPECT_LT(tree.value().call.seconds, binomial.value().call.seconds);
  // Its reduce runs the same tree upwards, reducing what comes in.
  auto up = run_simulation(forcing(Algorithm::kPipelinedTree, Collective::kReduce, n, p, p), round_model());
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_EQ(up.value().call.messages, static_cast<size_t>((p - 1) * segments));
  EXPECT_GE(up.value().call.seconds, hops * two - 1e-9);
}

TEST(ScheduleSimulation, RanksOfAHostShareItsLink) {
  // all_to_all, 2 hosts x 4 ranks: each host's 4 ranks each send a block to
  // each of the 4 ranks of the other host: 16 blocks over each host's link.
  const size_t block = 1 << 20;
  auto report =
      run_simulation(forcing(Algorithm::kPairwise, Collective::kAllToAll, block, 8, 2), round_model());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_DOUBLE_EQ(report.value().call.most_bytes_on_a_link, 16.0 * block);
  EXPECT_GE(report.value().call.seconds, 16.0 * block / 1e9);
  // Each rank its own host: 7 blocks over each link, at once.
  auto flat =
      run_simulation(forcing(Algorithm::kPairwise, Collective::kAllToAll, block, 8, 8), round_model());
  ASSERT_TRUE(flat.ok());
  EXPECT_DOUBLE_EQ(flat.value().call.most_bytes_on_a_link, 7.0 * block);
  EXPECT_LT(flat.value().call.seconds, report.value().call.seconds);
}

TEST(ScheduleSimulation, ReductionsAreTalliedNotDone) {
  // Recursive halving at 8 ranks reduces half, a quarter, an eighth of the
  // blocks: 7 blocks a rank in all, and leaves the buffers as they were.
  const size_t block = 4096;
  auto schedules =
      trace_all(Algorithm::kRecursiveHalving, Collective::kReduceScatter, 8, block, layout_host_of(8, 8));
  for (const RankSchedule& s : schedules) {
    ASSERT_TRUE(s.status.ok()) << s.status.message();
    size_t reduced = s.reduce_after;
    for (const TracedBatch& b : s.batches) reduced += b.reduce_before;
    for (const TracedRecv& r : s.recvs) reduced += r.reduce_bytes;
    EXPECT_EQ(reduced, 7 * block);
  }
  std::vector<float> a{1, 2}, b{3, 4};
  ReduceTally tally;
  set_reduce_tally(&tally);
  reduce_into(DType::kFloat32, ReduceOp::SUM, a.data(), b.data(), 2);
  set_reduce_tally(nullptr);
  EXPECT_EQ(tally.bytes, 8u);
  EXPECT_EQ(a[0], 1.0f);
  reduce_into(DType::kFloat32, ReduceOp::SUM, a.data(), b.data(), 2);
  EXPECT_EQ(a[0], 4.0f);  // once the tally is gone, reductions are real again
}

// Every registered message-passing algorithm, every collective it runs:
// the traced schedules of all ranks fit together (every receive met by a
// send of its size, nothing left over), flat and on hosts.
class EverySchedule : public ::testing::TestWithParam<std::tuple<Algorithm, Collective, int>> {};

TEST_P(EverySchedule, FitsTogether) {
  const auto [a, c, p] = GetParam();
  for (int hosts : {p, (p + 1) / 2}) {
    for (size_t bytes : {size_t{4}, size_t{20000}, size_t{600000}}) {
      SimulationRequest req = forcing(a, c, bytes, p, hosts);
      auto report = run_simulation(req, CostModel::from_config());
      ASSERT_TRUE(report.ok()) << algorithm_name(a) << " " << collective_name(c) << " P=" << p << " on "
                               << hosts << " hosts, " << bytes << " B: " << report.status().message();
      EXPECT_GT(report.value().call.seconds, 0);
      // Never faster than the bound (model terms alike).
      EXPECT_GE(report.value().call.seconds, 0.5 * report.value().bound.seconds);
    }
  }
}

std::vector<std::tuple<Algorithm, Collective, int>> every_schedule() {
  std::vector<std::tuple<Algorithm, Collective, int>> out;
  for (const AlgorithmEntry& e : algorithm_registry()) {
    if (!runs_over_messages(e.algorithm)) continue;
    for (int c = 0; c < kCollectives; ++c) {
      if (!e.runs(static_cast<Collective>(c))) continue;
      for (int p : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16})
        out.emplace_back(e.algorithm, static_cast<Collective>(c), p);
    }
  }
  return out;
}

std::string schedule_case_name(const ::testing::TestParamInfo<EverySchedule::ParamType>& case_info) {
  return std::string(algorithm_name(std::get<0>(case_info.param))) + "_" +
         collective_name(std::get<1>(case_info.param)) + "_P" + std::to_string(std::get<2>(case_info.param));
}

INSTANTIATE_TEST_SUITE_P(Registry, EverySchedule, ::testing::ValuesIn(every_schedule()), schedule_case_name);

TEST(ScheduleSimulation, AReceiveNobodySendsIsNamed) {
  std::vector<int> host_of{0, 1};
  std::vector<RankSchedule> s(2);
  s[1].recvs.push_back(TracedRecv{0, MessageKind::kCollective, 77, 8});
  s[1].batches.push_back(TracedBatch{0, 0, 0, 1, 0});
  SimulatedCall call = simulate(s, host_of, round_model());
  EXPECT_EQ(call.status.code(), StatusCode::kDesync);
  EXPECT_NE(call.status.message().find("rank 1 waits for a message from rank 0 (tag 77)"), std::string::npos)
      << call.status.message();
  // The same message sent at the wrong size.
  s[0].sends.push_back(TracedSend{1, MessageKind::kCollective, 77, 4});
  s[0].batches.push_back(TracedBatch{0, 1, 0, 0, 0});
  call = simulate(s, host_of, round_model());
  EXPECT_NE(call.status.message().find("rank 1 expects 8 bytes from rank 0 (tag 77), which sends 4"),
            std::string::npos)
      << call.status.message();
}

TEST(ScheduleSimulation, RefusesWhatItCannotTrace) {
  auto shm = run_simulation(forcing(Algorithm::kShmDirect, Collective::kAllReduce, 64, 4, 1),
                            CostModel::from_config());
  EXPECT_FALSE(shm.ok());
  auto big = run_simulation(request(Collective::kAllGather, 16 << 20, 1024, 1024), CostModel::from_config());
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("a rank's buffers would take"), std::string::npos);
  auto layout = run_simulation(request(Collective::kAllReduce, 64, 4, 5), CostModel::from_config());
  EXPECT_FALSE(layout.ok());
  // The table's shm_direct on one host is replaced by a message-passing entry.
  auto one_host = run_simulation(request(Collective::kAllReduce, 64, 4, 1), CostModel::from_config());
  ASSERT_TRUE(one_host.ok()) << one_host.status().message();
  EXPECT_TRUE(one_host.value().substituted);
  EXPECT_EQ(one_host.value().table_choice, Algorithm::kShmDirect);
}

// RecordingTransport passes everything to a real transport and records
// what was posted, as the tracer does, to compare the two.
class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(Transport& real) : real_(real) {}
  int rank() const override { return real_.rank(); }
  int size() const override { return real_.size(); }
  Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                  Deadline deadline, const std::string& what) override {
    Batch batch;
    for (size_t i = 0; i < num_sends; ++i)
      batch.sends.emplace_back(sends[i].peer, sends[i].tag, sends[i].bytes);
    std::vector<Hook> hooks(num_recvs);
    for (size_t i = 0; i < num_recvs; ++i) {
      batch.recvs.emplace_back(recvs[i].peer, recvs[i].tag, recvs[i].bytes);
      if (!recvs[i].on_arrival) continue;
      hooks[i] = Hook{recvs[i].on_arrival, recvs[i].context, &batch};
      recvs[i].on_arrival = &Hook::call;
      recvs[i].context = &hooks[i];
    }
    Status st = real_.exchange(sends, num_sends, recvs, num_recvs, deadline, what);
    std::sort(batch.recvs.begin(), batch.recvs.end());
    batches.push_back(std::move(batch));
    return st;
  }
  void post_send(const SendRequest& s, Deadline d, const std::string* w, Completion done) override {
    real_.post_send(s, d, w, std::move(done));
  }
  void post_recv(const RecvRequest& r, Deadline d, const std::string* w, Completion done) override {
    real_.post_recv(r, d, w, std::move(done));
  }
  bool has_pending() const override { return real_.has_pending(); }
  void progress(Deadline until) override { real_.progress(until); }
  void wake() override { real_.wake(); }
  void interrupt(const Status& reason) override { real_.interrupt(reason); }
  std::string peer_name(int peer) const override { return real_.peer_name(peer); }

  using Message = std::tuple<int, uint64_t, size_t>;  // peer, tag, bytes
  struct Batch {
    std::vector<Message> sends, recvs;  // recvs sorted: arrival order is the network's
  };
  std::vector<Batch> batches;

 private:
  struct Hook {
    bool (*original)(void*, RecvRequest&) = nullptr;
    void* context = nullptr;
    Batch* batch = nullptr;
    static bool call(void* self, RecvRequest& r) {
      auto* h = static_cast<Hook*>(self);
      if (!h->original(h->context, r)) return false;
      h->batch->recvs.emplace_back(r.peer, r.tag, r.bytes);
      return true;
    }
  };
  Transport& real_;
};

TEST(ScheduleSimulation, TracedSchedulesAreWhatTheRealRunPosts) {
  // A ring all_reduce in two passes (segments reposted by their callbacks),
  // Bruck's all_gather and recursive halving at 5 ranks over real TCP.
  const int p = 5;
  struct Case {
    Algorithm algorithm;
    Collective collective;
    size_t bytes;
  };
  const std::vector<Case> cases{{Algorithm::kRing, Collective::kAllReduce, 3 << 20},
                                {Algorithm::kBruck, Collective::kAllGather, 1000},
                                {Algorithm::kRecursiveHalving, Collective::kReduceScatter, 40000},
                                {Algorithm::kScatterAllGather, Collective::kBroadcast, 100000}};
  for (const Case& k : cases) {
    HashStore store;
    std::vector<int> ranks{0, 1, 2, 3, 4};
    std::vector<std::future<std::vector<RecordingTransport::Batch>>> runs;
    for (int r = 0; r < p; ++r) {
      runs.push_back(std::async(std::launch::async, [&, r] {
        auto group =
            connect_group(store, r, ranks, "127.0.0.1", Deadline::after(std::chrono::seconds(30)), false);
        EXPECT_TRUE(group.ok()) << group.status().message();
        if (!group.ok()) return std::vector<RecordingTransport::Batch>{};
        RecordingTransport recording(*group.value().transport);
        CallBuffers buffers(k.collective, p, k.bytes);
        std::vector<uint8_t> scratch;
        const std::string what = "recorded call";
        AlgoContext c{recording, 1, Deadline::after(std::chrono::seconds(30)), what, scratch, nullptr};
        Status st = run_message_passing(c, k.algorithm, buffers.call());
        EXPECT_TRUE(st.ok()) << st.message();
        return recording.batches;
      }));
    }
    const std::vector<int> host_of = layout_host_of(p, p);
    const auto traced = trace_all(k.algorithm, k.collective, p, k.bytes, host_of);
    for (int r = 0; r < p; ++r) {
      const auto real = runs[static_cast<size_t>(r)].get();
      const RankSchedule& t = traced[static_cast<size_t>(r)];
      ASSERT_EQ(real.size(), t.batches.size()) << algorithm_name(k.algorithm) << " rank " << r;
      for (size_t b = 0; b < real.size(); ++b) {
        std::vector<RecordingTransport::Message> sends, recvs;
        const TracedBatch& tb = t.batches[b];
        for (uint32_t i = 0; i < tb.num_sends; ++i) {
          const TracedSend& s = t.sends[tb.first_send + i];
          sends.emplace_back(s.peer, s.tag, s.bytes);
        }
        for (uint32_t i = 0; i < tb.num_recvs; ++i) {
          const TracedRecv& q = t.recvs[tb.first_recv + i];
          recvs.emplace_back(q.peer, q.tag, q.bytes);
        }
        std::sort(recvs.begin(), recvs.end());
        EXPECT_EQ(real[b].sends, sends) << algorithm_name(k.algorithm) << " rank " << r << " batch " << b;
        EXPECT_EQ(real[b].recvs, recvs) << algorithm_name(k.algorithm) << " rank " << r << " batch " << b;
      }
    }
  }
}

}  // namespace
}  // namespace cohort
