// The point-to-point calls of ProcessGroup (send, recv, their async twins,
// batch_isend_irecv) and monitored_barrier, which is built on them. A
// blocking call on an idle group runs on the caller's thread
// (point_to_point); the others go to the group's worker. Point-to-point
// calls are numbered apart from the collectives: they need not pair up
// across ranks.
#include <string>
#include <string_view>
#include <vector>

#include "cohort/errors.h"
#include "cohort/process_group.h"
#include "diagnostics/group_trace.h"
#include "process_group/backend.h"
#include "process_group/op_checks.h"
#include "process_group/op_description.h"
#include "process_group/process_group_state.h"

namespace cohort {
namespace {
using namespace op_checks;  // NOLINT: the argument checks of every operation
}  // namespace

// The point-to-point tag monitored_barrier uses (users' tags are usually
// small and non-negative).
constexpr int kMonitoredBarrierTag = -0x4d4f4e;  // "MON"

void ProcessGroup::monitored_barrier(const BarrierOptions& o, bool wait_all_ranks) {
  if (!is_member()) return;
  if (size() == 1) return;
  const auto timeout = o.timeout.count() > 0 ? o.timeout : state_->timeout_;
  // The messages use torch's words ("Rank 1 failed to pass
  // monitoredBarrier in 2000 ms"): torch's tests and users' log searches
  // match on them. cohort adds the group and the cause.
  const std::string where = "monitored_barrier of group " + state_->name_ + ": ";
  P2POptions p;
  p.tag = kMonitoredBarrierTag;
  p.timeout = timeout;
  p.async_op = true;
  uint8_t token = 1;
  if (state_->rank_ != 0) {
    try {
      send(Buffer::of(&token, 1), 0, p)->wait();
      recv(Buffer::of(&token, 1), 0, p)->wait();  // rank 0 lets everyone go
    } catch (const Error& e) {
      throw TimeoutError(where + "Rank " + std::to_string(state_->rank_) +
                         " successfully reached monitoredBarrier, but received errors while waiting for "
                         "send/recv from rank 0. Please check rank 0 logs for faulty rank. (" +
                         e.what() + ")");
    }
    return;
  }
  std::vector<uint8_t> tokens(static_cast<size_t>(size()));
  std::vector<std::shared_ptr<Work>> arrivals;
  for (int q = 1; q < size(); ++q) arrivals.push_back(recv(Buffer::of(&tokens[q], 1), q, p));
  std::vector<int> missing;
  std::string first_error;
  for (int q = 1; q < size(); ++q) {
    try {
      arrivals[q - 1]->wait();
    } catch (const Error& e) {
      missing.push_back(q);
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!missing.empty()) {
    if (!wait_all_ranks) missing.resize(1);
    std::string list;
    for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
    throw TimeoutError(where + (missing.size() > 1 ? "Ranks " : "Rank ") + list +
                       " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms (" +
                       first_error + ")");
  }
  std::vector<std::shared_ptr<Work>> releases;
  for (int q = 1; q < size(); ++q) releases.push_back(send(Buffer::of(&token, 1), q, p));
  for (auto& w : releases) w->wait();
}

template <class Run, class Post>
std::shared_ptr<Work> ProcessGroup::point_to_point(std::string_view description, const OpShape& shape,
                                                   const P2POptions& o, Run run, Post post) {
  if (o.async_op || !state_->backend_->p2p_now() || !claim_p2p_now())
    return enqueue(description, shape, o, post, false);
  // As enqueue and the worker would, but on this thread: number, record,
  // run, and complete the Work before returning it. The number is taken
  // without the queue's lock: a call another thread queues meanwhile may
  // get a lower one and start later (the recorder's order is then off by
  // that call; nothing matches on p2p numbers).
  const uint64_t sequence = ++state_->p2p_sequence_;
  std::shared_ptr<Work> work;
  OpContext context{sequence, Deadline::after(o.timeout.count() > 0 ? o.timeout : state_->timeout_), nullptr,
                    nullptr};
  try {
    work = std::make_shared<Work>(describe(description, sequence, false, state_->name_));
    context.what = &work->description();
    context.description = work;
    context.trace = state_->trace_->recorder().scheduled(description, shape, sequence, false);
  } catch (...) {
    release_inline();  // out of memory: give the group back, or it stays claimed
    throw;
  }
  state_->trace_->recorder().started(context.trace);
  std::exception_ptr error = refusal();
  int source = -1;
  if (!error) {
    try {
      const Status st = run(context, &source);
      if (!st.ok()) error = status_exception(st);
    } catch (...) {
      error = std::current_exception();  // a bug in cohort; still reported
    }
    if (error) mark_broken(error, work->description());
  }
  state_->trace_->finish(context.trace, error);  // while this thread still drives the group
  release_inline();
  work->complete(error, source);
  if (error) std::rethrow_exception(error);  // as a queued blocking call's wait() does
  return work;
}

std::shared_ptr<Work> ProcessGroup::send(const Buffer& buffer, int dst, const P2POptions& o) {
  if (!is_member()) return state_->done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "send";
  check_buffer(op, buffer, "buffer", *state_->backend_);
  check_rank(dst, "send dst");
  if (dst == state_->rank_)
    bad(op, "dst is this rank (" + std::to_string(dst) + "); a rank cannot send to itself");
  return point_to_point(
      std::string(op) + " to " + std::to_string(dst) + " tag " + std::to_string(o.tag),
      p2p_shape(buffer, dst, o.tag), o,
      [this, &buffer, dst, &o](const OpContext& c, int*) {
        return state_->backend_->send_now(buffer, dst, o.tag, c);
      },
      [this, buffer, dst, o](Work& work, const OpContext& c) {
        auto keep = work.shared_from_this();
        state_->backend_->post_send(buffer, dst, o.tag, c, [this, keep, t = c.trace](const Status& st, int) {
          std::exception_ptr error = st.ok() ? nullptr : status_exception(st);
          state_->trace_->finish(t, error);
          if (error) mark_broken(error, keep->description());
          keep->complete(error);
        });
      });
}

std::shared_ptr<Work> ProcessGroup::recv(const Buffer& buffer, int src, const P2POptions& o) {
  if (!is_member()) return state_->done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "recv";
  check_buffer(op, buffer, "buffer", *state_->backend_);
  if (src != kAnySourceRank) {
    check_rank(src, "recv src");
    if (src == state_->rank_)
      bad(op, "src is this rank (" + std::to_string(src) + "); a rank cannot receive from itself");
  }
  const std::string from = src == kAnySourceRank ? "any rank" : std::to_string(src);
  return point_to_point(
      std::string(op) + " from " + from + " tag " + std::to_string(o.tag), p2p_shape(buffer, src, o.tag), o,
      [this, &buffer, src, &o](const OpContext& c, int* source) {
        return state_->backend_->recv_now(buffer, src, o.tag, c, source);
      },
      [this, buffer, src, o](Work& work, const OpContext& c) {
        auto keep = work.shared_from_this();
        state_->backend_->post_recv(buffer, src, o.tag, c,
                                    [this, keep, t = c.trace](const Status& st, int source) {
                                      std::exception_ptr error = st.ok() ? nullptr : status_exception(st);
                                      state_->trace_->finish(t, error);
                                      if (error) mark_broken(error, keep->description());
                                      keep->complete(error, source);
                                    });
      });
}

std::shared_ptr<Work> ProcessGroup::isend(const Buffer& buffer, int dst, int tag) {
  P2POptions o;
  o.tag = tag;
  o.async_op = true;
  return send(buffer, dst, o);
}

std::shared_ptr<Work> ProcessGroup::irecv(const Buffer& buffer, int src, int tag) {
  P2POptions o;
  o.tag = tag;
  o.async_op = true;
  return recv(buffer, src, o);
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  if (!is_member()) return std::vector<std::shared_ptr<Work>>(ops.size(), state_->done_work_);
  if (ops.empty()) throw InvalidArgument("batch_isend_irecv: the list of operations is empty");
  std::vector<std::shared_ptr<Work>> works;
  // Each is posted without waiting, in order, on the one worker: they are
  // all in flight together, so their order cannot deadlock.
  for (const P2POp& p : ops) {
    works.push_back(p.kind == P2POp::kSend ? isend(p.buffer, p.peer, p.tag) : irecv(p.buffer, p.peer, p.tag));
  }
  return works;
}

}  // namespace cohort
