// schedule_trace.h: what one rank of an algorithm posts, recorded by
// running the algorithm's own code without its data.
//
// A TracingTransport stands in for one rank's transport: every exchange
// completes at once and moves no byte, and each exchange is recorded as a
// batch (its sends; its receives, with the receives an on_arrival callback
// posts again; the bytes the rank reduces on each arrival and between
// batches, from reduce.h's tally). The algorithms' control flow depends on
// sizes and ranks only, never on the data, so the schedule is exactly what
// the rank would post. schedule_sim.h prices a group's schedules under the
// cost model; cohort-sim prints them at up to 16K ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/dispatch.h"
#include "transport/transport.h"

namespace cohort {

struct TracedSend {
  int peer;
  MessageKind kind;
  uint64_t tag;
  size_t bytes;
};

struct TracedRecv {
  int peer;
  MessageKind kind;
  uint64_t tag;
  size_t bytes;
  size_t reduce_bytes = 0;  // reduced by its on_arrival callback
  int32_t next = -1;        // the receive its callback posted again (an index into recvs), or -1
  bool reposted = false;    // posted by a callback, not with its batch
};

// TracedBatch: one exchange, as ranges of the schedule's sends and recvs.
struct TracedBatch {
  uint32_t first_send = 0, num_sends = 0;
  uint32_t first_recv = 0, num_recvs = 0;
  size_t reduce_before = 0;  // bytes reduced after the previous batch, before this one
};

struct RankSchedule {
  std::vector<TracedSend> sends;
  std::vector<TracedRecv> recvs;
  std::vector<TracedBatch> batches;
  size_t reduce_after = 0;  // bytes reduced after the last batch
  Status status;            // what the algorithm returned

  size_t messages() const { return sends.size(); }
};

class TracingTransport : public Transport {
 public:
  // host_of[q]: the host of rank q, named by its lowest rank (transport.h).
  TracingTransport(int rank, const std::vector<int>& host_of, RankSchedule* out);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(host_of_.size()); }
  Status exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                  Deadline deadline, const std::string& what) override;
  // Posted requests (the hierarchical collectives' pipelines) are not
  // traced: they fail at once, and the schedule says so.
  void post_send(const SendRequest& send, Deadline deadline, const std::string* what,
                 Completion done) override;
  void post_recv(const RecvRequest& recv, Deadline deadline, const std::string* what,
                 Completion done) override;
  bool has_pending() const override { return false; }
  void progress(Deadline) override {}
  void wake() override {}
  void interrupt(const Status&) override {}
  std::string peer_name(int peer) const override { return "rank " + std::to_string(peer); }
  int host_of(int rank) const override { return host_of_[static_cast<size_t>(rank)]; }

  // Call at the end: bytes reduced since the last exchange.
  void finish();

 private:
  int rank_;
  const std::vector<int>& host_of_;
  RankSchedule* out_;
  size_t reduced_at_last_batch_ = 0;
};

// CallBuffers: float32 buffers for one call of `collective` at `bytes` a
// rank (as the algorithm table counts them), which every traced rank
// reuses: the tracer moves no data, so their content never matters.
class CallBuffers {
 public:
  CallBuffers(Collective collective, int ranks, size_t bytes);
  // call: the call as every rank makes it (root 0).
  MessagePassingCall call();
  // footprint: the bytes a rank's buffers take.
  static size_t footprint(Collective collective, int ranks, size_t bytes);

 private:
  Collective collective_;
  size_t count_;  // float32 elements a block (or a whole buffer)
  std::vector<float> whole_, blocks_in_, blocks_out_;
  std::vector<Buffer> inputs_, outputs_;
};

// trace_rank: runs `algorithm` for one call as rank `rank` of a group laid
// out as `host_of`, and returns everything it posted.
RankSchedule trace_rank(Algorithm algorithm, CallBuffers& buffers, int rank, const std::vector<int>& host_of,
                        std::vector<uint8_t>& scratch);

}  // namespace cohort
