// The collective algorithms (src/algorithms/algorithms.h) against the
// transport alone, without a ProcessGroup: ranks are threads, each with a
// transport engine over real TCP sockets, joined through one in-memory store. What
// each algorithm leaves in every rank's buffers is checked against the
// arithmetic, at sizes that divide unevenly among the ranks.
#include "algorithms/algorithms.h"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <numeric>

#include "cohort/hash_store.h"
#include "transport/connect_group.h"

namespace cohort {
namespace {

Deadline soon() {
  return Deadline::after(std::chrono::milliseconds(30000));
}

// connect_tcp connects rank r of `world` over TCP alone.
Result<std::unique_ptr<Transport>> connect_tcp(Store& store, int r, int world) {
  std::vector<int> ranks(static_cast<size_t>(world));
  for (int q = 0; q < world; ++q) ranks[q] = q;
  auto group = connect_group(store, r, ranks, "127.0.0.1", soon(), false);
  if (!group.ok()) return group.status();
  return std::move(group.value().transport);
}

// run_ranks connects `world` ranks and runs `body` on each, in threads;
// returns each rank's Status.
std::vector<Status> run_ranks(int world, const std::function<Status(AlgoContext&)>& body) {
  HashStore store;
  std::vector<std::future<Status>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Status {
      auto transport = connect_tcp(store, r, world);
      if (!transport.ok()) return transport.status();
      std::vector<uint8_t> scratch;
      const std::string what = "the test's collective";
      AlgoContext c{*transport.value(), 1, soon(), what, scratch};
      return body(c);
    }));
  }
  std::vector<Status> out;
  for (auto& f : ranks) out.push_back(f.get());
  return out;
}

void expect_all_ok(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
}

// value(r, i): what rank r holds at element i before a collective.
int64_t value(int r, size_t i) {
  return static_cast<int64_t>(r + 1) * 1000 + static_cast<int64_t>(i % 97);
}

TEST(Algorithms, EveryAllReduceAlgorithmSumsAtEveryWorldSize) {
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    for (int world : {2, 3, 4, 5}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
        expect_all_ok(run_ranks(world, [&](AlgoContext& c) -> Status {
          const int r = c.transport.rank();
          std::vector<int64_t> v(n);
          for (size_t i = 0; i < n; ++i) v[i] = value(r, i);
          Status st = all_reduce(c, Buffer::of(v), ReduceOp::SUM, algorithm);
          if (!st.ok()) return st;
          for (size_t i = 0; i < n; ++i) {
            int64_t want = 0;
            for (int q = 0; q < world; ++q) want += value(q, i);
            if (v[i] != want) {
              return Status(StatusCode::kBackendError,
                            std::string(algorithm_name(algorithm)) + " at " + std::to_string(world) +
                                " ranks, " + std::to_string(n) + " elements: element " + std::to_string(i) +
                                " is " + std::to_string(v[i]) + ", not " + std::to_string(want));
            }
          }
          return Status::ok_status();
        }));
      }
    }
  }
}

TEST(Algorithms, BroadcastAndReduceFromEveryRoot) {
  for (int world : {2, 3, 5}) {
    for (int root = 0; root < world; ++root) {
      expect_all_ok(run_ranks(world, [&](AlgoContext& c) -> Status {
        const int r = c.transport.rank();
        std::vector<int32_t> b(4099, r == root ? 7 : -1);
        Status st = broadcast(c, Buffer::of(b), root);
        if (!st.ok()) return st;
        if (b.front() != 7 || b.back() != 7)
          return Status(StatusCode::kBackendError, "broadcast left another value");
        std::vector<int32_t> m(33, r + 1);
        c.sequence = 2;
        st = reduce(c, Buffer::of(m), root, ReduceOp::MAX);
        if (!st.ok()) return st;
        const int32_t want = r == root ? world : r + 1;  // the others' buffers are left as they were
        if (m.front() != want || m.back() != want)
          return Status(StatusCode::kBackendError, "reduce left " + std::to_string(m.front()) + " on rank " +
                                                       std::to_string(r) + ", not " + std::to_string(want));
        return Status::ok_status();
      }));
    }
  }
}

TEST(Algorithms, GatherScatterAndAllToAllMoveEachBlockToItsPlace) {
  for (int world : {2, 3, 4}) {
    expect_all_ok(run_ranks(world, [&](AlgoContext& c) -> Status {
      const int r = c.transport.rank();
      // Rank q contributes q + 1 elements (counts differ between ranks).
      std::vector<int64_t> mine(static_cast<size_t>(r + 1), r);
      std::vector<std::vector<int64_t>> got(world);
      std::vector<Buffer> outputs;
      for (int q = 0; q < world; ++q) {
        got[q].assign(static_cast<size_t>(q + 1), -1);
        outputs.push_back(Buffer::of(got[q]));
      }
      Status st = all_gather(c, Buffer::of(mine), outputs);
      if (!st.ok()) return st;
      for (int q = 0; q < world; ++q) {
        for (int64_t x : got[q]) {
          if (x != q)
            return Status(StatusCode::kBackendError,
                          "all_gather block " + std::to_string(q) + " holds " + std::to_string(x));
        }
      }
      // all_to_all: rank r sends r * 10 + q to rank q.
      std::vector<std::vector<int64_t>> send(world), recv(world);
      std::vector<Buffer> ins, outs;
      for (int q = 0; q < world; ++q) {
        send[q].assign(5, r * 10 + q);
        recv[q].assign(5, -1);
        ins.push_back(Buffer::of(send[q]));
        outs.push_back(Buffer::of(recv[q]));
      }
      c.sequence = 2;
      st = all_to_all(c, outs, ins);
      if (!st.ok()) return st;
      for (int q = 0; q < world; ++q) {
        if (recv[q][4] != q * 10 + r)
          return Status(StatusCode::kBackendError,
                        "all_to_all: from rank " + std::to_string(q) + " came " + std::to_string(recv[q][4]));
      }
      // scatter from the last rank: rank q gets q * 3.
      std::vector<std::vector<int64_t>> pieces(world);
      std::vector<Buffer> piece_buffers;
      for (int q = 0; q < world; ++q) {
        pieces[q].assign(3, q * 3);
        piece_buffers.push_back(Buffer::of(pieces[q]));
      }
      std::vector<int64_t> mine_piece(3, -1);
      c.sequence = 3;
      st = scatter(c, Buffer::of(mine_piece), r == world - 1 ? piece_buffers : std::vector<Buffer>{},
                   world - 1);
      if (!st.ok()) return st;
      if (mine_piece[2] != r * 3)
        return Status(StatusCode::kBackendError, "scatter gave " + std::to_string(mine_piece[2]));
      c.sequence = 4;
      return barrier(c);
    }));
  }
}

TEST(Algorithms, ReduceScatterLeavesEachRankItsReducedBlock) {
  for (int world : {2, 3, 5}) {
    expect_all_ok(run_ranks(world, [&](AlgoContext& c) -> Status {
      const int r = c.transport.rank();
      std::vector<std::vector<float>> inputs(world);
      std::vector<Buffer> in;
      for (int q = 0; q < world; ++q) {
        inputs[q].assign(1001, static_cast<float>((r + 1) * (q + 1)));
        in.push_back(Buffer::of(inputs[q]));
      }
      std::vector<float> out(1001, -1.0f);
      Status st = reduce_scatter(c, Buffer::of(out), in, ReduceOp::SUM);
      if (!st.ok()) return st;
      const float want = static_cast<float>((r + 1) * world * (world + 1) / 2);
      if (out[0] != want || out[1000] != want)
        return Status(StatusCode::kBackendError,
                      "reduce_scatter gave " + std::to_string(out[0]) + ", not " + std::to_string(want));
      return Status::ok_status();
    }));
  }
}

TEST(Algorithms, ARankThatNeverJoinsIsATimeoutNamingIt) {
  // Rank 2 of 3 connects but never calls the all_reduce: the others' wait
  // ends at their deadline with kTimeout, naming what they still wait for.
  HashStore store;
  std::vector<std::future<Status>> ranks;
  std::promise<void> done;
  std::shared_future<void> finished = done.get_future().share();
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Status {
      auto transport = connect_tcp(store, r, 3);
      if (!transport.ok()) return transport.status();
      if (r == 2) {
        finished.wait();  // keeps its connections open, says nothing
        return Status::ok_status();
      }
      std::vector<uint8_t> scratch;
      const std::string what = "all_reduce #1 of the test";
      AlgoContext c{*transport.value(), 1, Deadline::after(std::chrono::milliseconds(300)), what, scratch};
      std::vector<float> v(64, 1.0f);
      return all_reduce(c, Buffer::of(v), ReduceOp::SUM, Algorithm::kRing);
    }));
  }
  for (int r = 0; r < 2; ++r) {
    const Status st = ranks[r].get();
    EXPECT_EQ(st.code(), StatusCode::kTimeout) << "rank " << r << ": " << st.message();
    EXPECT_NE(st.message().find("all_reduce #1 of the test"), std::string::npos) << st.message();
  }
  done.set_value();
  EXPECT_TRUE(ranks[2].get().ok());
}

}  // namespace
}  // namespace cohort
