// A process that did not join through a group's store cannot pass for one
// of its ranks on the data plane: its hello carries another group's nonce
// (or no proof of COHORT_STORE_TOKEN), and the rank it calls refuses it
// and goes on waiting for its real peer. Ranks are threads over real
// sockets; each "job" has a store of its own.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cohort/config.h"
#include "cohort/hash_store.h"
#include "rendezvous/seat_claim.h"
#include "transport/connect_group.h"

namespace cohort::tcp {
namespace {

using std::chrono::seconds;

Deadline soon(int s = 30) {
  return Deadline::after(std::chrono::milliseconds(s * 1000));
}

// connect_mesh connects rank r of `size` over TCP alone.
Result<std::unique_ptr<Transport>> connect_mesh(Store& store, int r, int size, const std::string& address,
                                                Deadline deadline) {
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) ranks[q] = q;
  auto group = connect_group(store, r, ranks, address, deadline, false);
  if (!group.ok()) return group.status();
  return std::move(group.value().transport);
}

// one_int moves one int from rank 2 to rank 0 of `t`: the proof that the
// pair that connected works.
Status one_int(Transport& t, int* value) {
  SendRequest send{0, MessageKind::kPointToPoint, 5, value, sizeof *value};
  RecvRequest recv{2, MessageKind::kPointToPoint, 5, value, sizeof *value};
  if (t.rank() == 2) return t.exchange(&send, 1, nullptr, 0, soon(), "send to rank 0");
  if (t.rank() == 0) return t.exchange(nullptr, 0, &recv, 1, soon(), "recv from rank 2");
  return Status::ok_status();
}

// Job A's ranks 0 and 1 run; its rank 2 is late. Job B's rank 2 is handed
// job A's ranks' addresses as its own peers' (stale addresses, ports
// reused by another job) and calls them first. Job B's ranks 0 and 1
// claimed their seats in B's store, so B's rank 2 gets as far as calling.
void run_job_a_with_a_stranger_first() {
  HashStore job_a, job_b;
  // Until rank 2 arrives, an address nobody answers at, so that ranks 0
  // and 1 get as far as waiting for rank 2's call (eager) or message.
  job_a.set("tcp/addr/2", to_bytes("127.0.0.1:1"));
  auto rank = [&](int r) {
    return std::async(std::launch::async, [&job_a, r] {
      auto t = connect_mesh(job_a, r, 3, "127.0.0.1", soon());
      if (!t.ok()) return std::make_pair(t.status(), -1);
      int x = r == 2 ? 41 : -1;
      return std::make_pair(one_int(*t.value(), &x), x);
    });
  };
  auto rank0 = rank(0), rank1 = rank(1);

  for (int r : {0, 1}) {
    ASSERT_TRUE(claim_seat(job_b, r, 3, soon()).ok());
    job_a.wait({"tcp/addr/" + std::to_string(r)}, seconds(30));
    job_b.set("tcp/addr/" + std::to_string(r), job_a.get("tcp/addr/" + std::to_string(r)));
  }
  auto stranger = connect_mesh(job_b, 2, 3, "127.0.0.1", soon());
  Status refused = stranger.ok() ? Status::ok_status() : stranger.status();
  if (stranger.ok()) {
    int x = 99;
    refused = one_int(*stranger.value(), &x);
  }
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.message();
  EXPECT_NE(refused.message().find("refused this process as rank 2"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("another group or job"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("(pid "), std::string::npos) << "names who refused: " << refused.message();

  // Job A's own rank 2 comes after, and the job works.
  auto rank2 = rank(2);
  for (auto* f : {&rank0, &rank1, &rank2}) {
    auto [status, got] = f->get();
    EXPECT_TRUE(status.ok()) << status.message();
    if (f == &rank0) {
      EXPECT_EQ(got, 41);
    }
  }
}

TEST(DataPlaneStranger, EagerRanksRefuseACallerOfAnotherGroupAndWaitForTheirPeer) {
  run_job_a_with_a_stranger_first();
}

TEST(DataPlaneStranger, ALazyRankRefusesACallerOfAnotherGroupAndWaitsForItsPeer) {
  set_config("COHORT_TCP_CONNECT", "lazy");
  run_job_a_with_a_stranger_first();
  reset_config("COHORT_TCP_CONNECT");
}

TEST(DataPlaneStranger, ACallerWithoutTheStoreTokenIsRefusedNamingTheToken) {
  // Rank 0 holds the token; a rank 1 of the same store (it knows the
  // group's nonce) holds another: the data plane does not take it.
  HashStore job;
  set_config("COHORT_STORE_TOKEN", "alpha");
  auto rank0 = std::async(std::launch::async, [&] {
    auto t = connect_mesh(job, 0, 2, "127.0.0.1", Deadline::after(std::chrono::milliseconds(3000)));
    return t.ok() ? Status::ok_status() : t.status();
  });
  job.wait({"tcp/addr/0"}, seconds(30));  // rank 0 read its token before publishing
  set_config("COHORT_STORE_TOKEN", "beta");
  auto impostor = connect_mesh(job, 1, 2, "127.0.0.1", soon());
  reset_config("COHORT_STORE_TOKEN");
  ASSERT_FALSE(impostor.ok());
  EXPECT_EQ(impostor.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(impostor.status().message().find("COHORT_STORE_TOKEN"), std::string::npos)
      << impostor.status().message();
  const Status waited = rank0.get();
  EXPECT_EQ(waited.code(), StatusCode::kTimeout) << "rank 0 took the impostor: " << waited.message();
  EXPECT_NE(waited.message().find("ranks [1] never connected"), std::string::npos) << waited.message();
}

}  // namespace
}  // namespace cohort::tcp
