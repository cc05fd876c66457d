#include "algorithms/schedule_trace.h"

#include <algorithm>
#include <deque>

#include "reduce/reduce.h"

namespace cohort {
namespace {

// The tally of the thread that traces (set by trace_rank).
thread_local ReduceTally* t_trace_tally = nullptr;

size_t tallied() {
  return t_trace_tally ? t_trace_tally->bytes : 0;
}

}  // namespace

TracingTransport::TracingTransport(int rank, const std::vector<int>& host_of, RankSchedule* out)
    : rank_(rank), host_of_(host_of), out_(out) {}

Status TracingTransport::exchange(SendRequest* sends, size_t num_sends, RecvRequest* recvs, size_t num_recvs,
                                  Deadline, const std::string& what) {
  TracedBatch batch;
  batch.reduce_before = tallied() - reduced_at_last_batch_;
  batch.first_send = static_cast<uint32_t>(out_->sends.size());
  batch.first_recv = static_cast<uint32_t>(out_->recvs.size());
  for (size_t i = 0; i < num_sends; ++i) {
    const SendRequest& s = sends[i];
    if (s.peer < 0 || s.peer >= size() || s.peer == rank_)
      return invalid_argument(what + ": rank " + std::to_string(rank_) + " sends to rank " +
                              std::to_string(s.peer));
    out_->sends.push_back(TracedSend{s.peer, s.kind, s.tag, s.bytes});
  }
  // Arrivals in the order a peer's messages would come: each posted
  // receive once, then the ones their callbacks post again, in turn.
  std::deque<std::pair<RecvRequest, int32_t>> pending;  // request, the receive it reposts (-1: none)
  for (size_t i = 0; i < num_recvs; ++i) pending.emplace_back(recvs[i], -1);
  while (!pending.empty()) {
    auto [r, reposts] = pending.front();
    pending.pop_front();
    if (r.peer < 0 || r.peer >= size() || r.peer == rank_)
      return invalid_argument(what + ": rank " + std::to_string(rank_) + " receives from rank " +
                              std::to_string(r.peer) + " (the tracer takes no kAnySource)");
    const auto index = static_cast<int32_t>(out_->recvs.size());
    out_->recvs.push_back(TracedRecv{r.peer, r.kind, r.tag, r.bytes});
    if (reposts >= 0) {
      out_->recvs[static_cast<size_t>(reposts)].next = index;
      out_->recvs.back().reposted = true;
    }
    r.source = r.peer;
    if (r.on_arrival) {
      const size_t before = tallied();
      const bool again = r.on_arrival(r.context, r);
      out_->recvs[static_cast<size_t>(index)].reduce_bytes = tallied() - before;
      if (again) pending.emplace_back(r, index);
    }
  }
  for (size_t i = 0; i < num_recvs; ++i) recvs[i].source = recvs[i].peer;
  batch.num_sends = static_cast<uint32_t>(out_->sends.size()) - batch.first_send;
  batch.num_recvs = static_cast<uint32_t>(out_->recvs.size()) - batch.first_recv;
  out_->batches.push_back(batch);
  reduced_at_last_batch_ = tallied();
  return Status::ok_status();
}

void TracingTransport::post_send(const SendRequest&, Deadline, const std::string* what, Completion done) {
  done(invalid_argument((what ? *what : std::string("a send")) + ": the schedule tracer runs exchanges only"),
       -1);
}

void TracingTransport::post_recv(const RecvRequest&, Deadline, const std::string* what, Completion done) {
  done(invalid_argument((what ? *what : std::string("a receive")) +
                        ": the schedule tracer runs exchanges only"),
       -1);
}

void TracingTransport::finish() {
  out_->reduce_after = tallied() - reduced_at_last_batch_;
  reduced_at_last_batch_ = tallied();
}

namespace {

bool takes_whole(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kBroadcast || c == Collective::kReduce;
}

size_t float_count(size_t bytes) {
  return std::max<size_t>(1, (bytes + sizeof(float) - 1) / sizeof(float));
}

}  // namespace

size_t CallBuffers::footprint(Collective c, int ranks, size_t bytes) {
  const size_t one = float_count(bytes) * sizeof(float);
  if (c == Collective::kBarrier) return 0;
  if (takes_whole(c)) return 2 * one;  // the buffer and an algorithm's scratch
  const size_t blocks = one * static_cast<size_t>(ranks);
  // in, out and the scratch of Bruck (one copy) or halving (two).
  return one + (c == Collective::kAllToAll ? 2 : 1) * blocks + 2 * blocks;
}

CallBuffers::CallBuffers(Collective c, int ranks, size_t bytes) : collective_(c), count_(float_count(bytes)) {
  if (c == Collective::kBarrier) return;
  whole_.resize(count_);
  if (takes_whole(c)) return;
  const size_t p = static_cast<size_t>(ranks);
  const bool in = c == Collective::kScatter || c == Collective::kReduceScatter || c == Collective::kAllToAll;
  const bool out = c == Collective::kAllGather || c == Collective::kGather || c == Collective::kAllToAll;
  if (in) blocks_in_.resize(count_ * p);
  if (out) blocks_out_.resize(count_ * p);
  for (size_t q = 0; q < p; ++q) {
    if (in) inputs_.push_back(Buffer::of(blocks_in_.data() + q * count_, count_));
    if (out) outputs_.push_back(Buffer::of(blocks_out_.data() + q * count_, count_));
  }
}

MessagePassingCall CallBuffers::call() {
  MessagePassingCall call(collective_);
  const Buffer whole = Buffer::of(whole_.data(), whole_.size());
  call.buffer = whole;
  call.input = whole;
  call.output = whole;
  call.inputs = &inputs_;
  call.outputs = &outputs_;
  call.even_blocks = true;  // every traced call's blocks are alike, as all_to_all_single's even split
  return call;
}

RankSchedule trace_rank(Algorithm algorithm, CallBuffers& buffers, int rank, const std::vector<int>& host_of,
                        std::vector<uint8_t>& scratch) {
  RankSchedule schedule;
  ReduceTally tally;
  set_reduce_tally(&tally);
  t_trace_tally = &tally;
  {
    TracingTransport transport(rank, host_of, &schedule);
    const std::string what = "traced call";
    AlgoContext c{transport, 1, Deadline::never(), what, scratch, nullptr};
    schedule.status = run_message_passing(c, algorithm, buffers.call());
    transport.finish();
  }
  t_trace_tally = nullptr;
  set_reduce_tally(nullptr);
  return schedule;
}

}  // namespace cohort
