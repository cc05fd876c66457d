// The operations of ProcessGroup: each checks its arguments here, on the
// caller's thread, and throws InvalidArgument naming what is wrong before
// anything is queued or sent.
#include <charconv>
#include <cstring>
#include <numeric>
#include <string_view>

#include "cohort/errors.h"
#include "cohort/process_group.h"
#include "common/fast_clock.h"
#include "diagnostics/desync_check.h"
#include "diagnostics/group_trace.h"
#include "process_group/backend.h"
#include "process_group/op_description.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

[[noreturn]] void bad(std::string_view op, const std::string& why) {
  throw InvalidArgument(std::string(op) + ": " + why);
}

const char* device_name(DeviceType type) {
  return type == DeviceType::kCUDA ? "a CUDA device" : "the CPU";
}

// item_name is "outputs[3]" for (list "outputs", index 3), or the name
// alone for index -1. Built only for an error message: on the hot path the
// checks pass and no string is made.
std::string item_name(std::string_view list, int index) {
  std::string name(list);
  if (index >= 0) name += "[" + std::to_string(index) + "]";
  return name;
}

void check_buffer(std::string_view op, const Buffer& b, std::string_view name, const Backend& backend,
                  int index = -1) {
  if (b.data == nullptr && b.count > 0) {
    bad(op, item_name(name, index) + " is a null pointer with " + std::to_string(b.count) + " elements");
  }
  if (!backend.supports_device(b.device.type)) {
    bad(op, item_name(name, index) + " is on " + device_name(b.device.type) + " but backend " +
                backend.name() +
                " has no backend for it (per device, e.g. backend \"cpu:cohort,cuda:nccl\")");
  }
}

void check_dtype(std::string_view op, const Buffer& expected, const Buffer& b, std::string_view name,
                 int index = -1) {
  if (expected.dtype != b.dtype) {
    bad(op, item_name(name, index) + " is " + dtype_name(b.dtype) + " but the input is " +
                dtype_name(expected.dtype));
  }
  if (expected.device.type != b.device.type) {
    bad(op, item_name(name, index) + " is on " + device_name(b.device.type) + " but the input is on " +
                device_name(expected.device.type));
  }
}

void check_list(std::string_view op, const std::vector<Buffer>& list, std::string_view name, int expected,
                const Backend& backend) {
  if (static_cast<int>(list.size()) != expected) {
    bad(op, std::string(name) + " has " + std::to_string(list.size()) + " buffers; the group has " +
                std::to_string(expected) + " ranks");
  }
  for (size_t i = 0; i < list.size(); ++i) check_buffer(op, list[i], name, backend, static_cast<int>(i));
}

void check_reduce(std::string_view op, const Buffer& b, ReduceOp reduce_op) {
  Status st = check_reduce_op(b.dtype, reduce_op);
  if (!st.ok()) bad(op, st.message());
}

Buffer slice(const Buffer& b, size_t first, size_t count) {
  Buffer out = b;
  out.data = static_cast<uint8_t*>(b.data) + first * dtype_size(b.dtype);
  out.count = count;
  return out;
}

// fail_on records a failed Status as the operation's error.
void fail_on(const Status& st, std::exception_ptr* error) {
  if (!st.ok()) *error = status_exception(st);
}

size_t elements_in(const std::vector<Buffer>& list) {
  size_t n = 0;
  for (const Buffer& b : list) n += b.count;
  return n;
}

}  // namespace

bool ProcessGroup::agree(const Fingerprint& mine, const OpContext& op, std::exception_ptr* error) {
  Status st = desync_->check(mine, op);
  if (!st.ok()) *error = status_exception(st);
  return st.ok();
}

template <class Run>
std::shared_ptr<Work> ProcessGroup::collective(std::string_view op, const OpShape& shape,
                                               const CollectiveOptions& options, Run run) {
  uint64_t sequence;
  if (!options.async_op && backend_->may_run_inline() && claim_inline(&sequence)) {
    // One bare counter read for the deadline and the flight recorder; it
    // is converted to steady time only if something looks at it (a wait
    // that has to sleep, a dump): fast_clock.h says why.
    const uint64_t start = read_counter();
    const Deadline deadline =
        Deadline::after_reading(options.timeout.count() > 0 ? options.timeout : timeout_, start);
    describe_into(&inline_what_, &inline_sequence_, &inline_op_, op, sequence, name_);
    OpContext context{sequence, deadline, &inline_what_, nullptr};
    const TraceTicket ticket = trace_->recorder().began(op, shape, sequence, start);
    std::exception_ptr error = refusal();
    if (!error) {
      try {
        run(context, &error);
      } catch (...) {
        error = std::current_exception();  // a bug in cohort; still reported
      }
      if (error) mark_broken(error, inline_what_);
    }
    trace_->finish(ticket, error);  // while this thread still drives the group
    if (!error) {
      release_inline();
      return done_work_;
    }
    auto failed = std::make_shared<Work>(inline_what_);
    release_inline();
    failed->complete(error);
    failed->wait();  // throws the error
    return failed;
  }
  return enqueue(
      op, shape, options,
      [this, run = std::move(run)](Work& work, const OpContext& context) {
        std::exception_ptr error;
        run(context, &error);
        trace_->finish(context.trace, error);
        if (error) mark_broken(error, *context.what);
        work.complete(error);
      },
      true);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Buffer& buffer, const BroadcastOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "broadcast";
  check_buffer(op, buffer, "buffer", *backend_);
  check_rank(o.src, "broadcast src");
  const OpShape shape = shape_of(buffer, o.src);
  return collective(op, shape, o, [this, buffer, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ &&
        !agree(Fingerprint(CollectiveOp::kBroadcast, buffer.dtype, buffer.count).with_root(o.src), c, e))
      return;
    fail_on(backend_->broadcast(buffer, o.src, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::all_reduce(const Buffer& buffer, const AllReduceOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_reduce";
  check_buffer(op, buffer, "buffer", *backend_);
  check_reduce(op, buffer, o.op);
  const OpShape shape = shape_of(buffer);
  return collective(op, shape, o, [this, buffer, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ &&
        !agree(Fingerprint(CollectiveOp::kAllReduce, buffer.dtype, buffer.count).with_reduce_op(o.op), c, e))
      return;
    fail_on(backend_->all_reduce(buffer, o.op, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(const std::vector<Buffer>& buffers,
                                                         const AllReduceOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_reduce_coalesced";
  if (buffers.empty()) bad(op, "buffers is empty; give at least one buffer");
  for (size_t i = 0; i < buffers.size(); ++i) {
    check_buffer(op, buffers[i], "buffers", *backend_, static_cast<int>(i));
    if (buffers[i].device.type != DeviceType::kCPU) {
      bad(op, item_name("buffers", static_cast<int>(i)) + " is on " + device_name(buffers[i].device.type) +
                  "; all_reduce_coalesced takes CPU buffers (use all_reduce on each)");
    }
    if (buffers[i].dtype != buffers[0].dtype) {
      bad(op, item_name("buffers", static_cast<int>(i)) + " is " + dtype_name(buffers[i].dtype) +
                  " but buffers[0] is " + dtype_name(buffers[0].dtype));
    }
  }
  check_reduce(op, buffers[0], o.op);
  Buffer whole = buffers[0];  // the concatenation, as the desync check and the flight recorder see it
  whole.count = elements_in(buffers);
  const OpShape shape = shape_of(whole);
  return collective(op, shape, o, [this, buffers, whole, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ &&
        !agree(Fingerprint(CollectiveOp::kAllReduce, whole.dtype, whole.count).with_reduce_op(o.op), c, e))
      return;
    fail_on(backend_->all_reduce_coalesced(buffers, o.op, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Buffer& buffer, const ReduceOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "reduce";
  check_buffer(op, buffer, "buffer", *backend_);
  check_rank(o.dst, "reduce dst");
  check_reduce(op, buffer, o.op);
  const OpShape shape = shape_of(buffer, o.dst);
  return collective(op, shape, o, [this, buffer, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kReduce, buffer.dtype, buffer.count)
                              .with_root(o.dst)
                              .with_reduce_op(o.op),
                          c, e))
      return;
    fail_on(backend_->reduce(buffer, o.dst, o.op, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                               const AllGatherOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_gather";
  check_buffer(op, input, "input", *backend_);
  check_list(op, outputs, "outputs", size(), *backend_);
  for (size_t i = 0; i < outputs.size(); ++i)
    check_dtype(op, input, outputs[i], "outputs", static_cast<int>(i));
  if (outputs[rank_].count != input.count) {
    bad(op, "outputs[" + std::to_string(rank_) + "] (this rank's slot) holds " +
                std::to_string(outputs[rank_].count) + " elements but the input has " +
                std::to_string(input.count));
  }
  const OpShape shape = shape_of(outputs, input);
  return collective(op, shape, o, [this, outputs, input](const OpContext& c, std::exception_ptr* e) {
    if (desync_ &&
        !agree(Fingerprint(CollectiveOp::kAllGather, input.dtype, input.count).with_per_rank(outputs), c, e))
      return;
    fail_on(backend_->all_gather(outputs, input, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(const Buffer& output, const Buffer& input,
                                                           const AllGatherOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_gather_into_tensor";
  check_buffer(op, input, "input", *backend_);
  check_buffer(op, output, "output", *backend_);
  check_dtype(op, input, output, "output");
  if (output.count != input.count * static_cast<size_t>(size())) {
    bad(op, "output holds " + std::to_string(output.count) + " elements; expected " + std::to_string(size()) +
                " x " + std::to_string(input.count));
  }
  std::vector<Buffer> outputs;  // moved into the call, not copied
  outputs.reserve(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q)
    outputs.push_back(slice(output, static_cast<size_t>(q) * input.count, input.count));
  const OpShape shape = shape_of(outputs, input);
  return collective(
      op, shape, o, [this, outputs = std::move(outputs), input](const OpContext& c, std::exception_ptr* e) {
        if (desync_ &&
            !agree(Fingerprint(CollectiveOp::kAllGatherIntoTensor, input.dtype, input.count), c, e))
          return;
        fail_on(backend_->all_gather(outputs, input, c), e);
      });
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                           const GatherOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "gather";
  check_buffer(op, input, "input", *backend_);
  check_rank(o.dst, "gather dst");
  if (rank_ == o.dst) {
    check_list(op, outputs, "outputs", size(), *backend_);
    for (size_t i = 0; i < outputs.size(); ++i)
      check_dtype(op, input, outputs[i], "outputs", static_cast<int>(i));
    if (outputs[rank_].count != input.count) {
      bad(op, "outputs[" + std::to_string(rank_) + "] holds " + std::to_string(outputs[rank_].count) +
                  " elements but the input has " + std::to_string(input.count));
    }
  } else if (!outputs.empty()) {
    bad(op, "outputs must be empty on ranks other than dst " + std::to_string(o.dst) + " (torch's rule)");
  }
  const OpShape shape = shape_of(outputs, input, o.dst);
  return collective(op, shape, o, [this, outputs, input, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kGather, input.dtype, input.count)
                              .with_root(o.dst)
                              .with_per_rank(outputs),
                          c, e))
      return;
    fail_on(backend_->gather(outputs, input, o.dst, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                            const ScatterOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "scatter";
  check_buffer(op, output, "output", *backend_);
  check_rank(o.src, "scatter src");
  if (rank_ == o.src) {
    check_list(op, inputs, "inputs", size(), *backend_);
    for (size_t i = 0; i < inputs.size(); ++i)
      check_dtype(op, output, inputs[i], "inputs", static_cast<int>(i));
    if (inputs[rank_].count != output.count) {
      bad(op, "inputs[" + std::to_string(rank_) + "] holds " + std::to_string(inputs[rank_].count) +
                  " elements but the output has " + std::to_string(output.count));
    }
  } else if (!inputs.empty()) {
    bad(op, "inputs must be empty on ranks other than src " + std::to_string(o.src) + " (torch's rule)");
  }
  const OpShape shape = shape_of(output, inputs, o.src);
  return collective(op, shape, o, [this, output, inputs, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kScatter, output.dtype, output.count)
                              .with_root(o.src)
                              .with_per_rank(inputs),
                          c, e))
      return;
    fail_on(backend_->scatter(output, inputs, o.src, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                                   const ReduceScatterOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "reduce_scatter";
  check_buffer(op, output, "output", *backend_);
  check_list(op, inputs, "inputs", size(), *backend_);
  check_reduce(op, output, o.op);
  for (size_t i = 0; i < inputs.size(); ++i)
    check_dtype(op, output, inputs[i], "inputs", static_cast<int>(i));
  if (inputs[rank_].count != output.count) {
    bad(op, "inputs[" + std::to_string(rank_) + "] holds " + std::to_string(inputs[rank_].count) +
                " elements but the output has " + std::to_string(output.count));
  }
  const OpShape shape = shape_of(output, inputs);
  return collective(op, shape, o, [this, output, inputs, o](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kReduceScatter, output.dtype, output.count)
                              .with_per_rank(inputs)
                              .with_reduce_op(o.op),
                          c, e))
      return;
    fail_on(backend_->reduce_scatter(output, inputs, o.op, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(const Buffer& output, const Buffer& input,
                                                          const ReduceScatterOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "reduce_scatter_tensor";
  check_buffer(op, output, "output", *backend_);
  check_buffer(op, input, "input", *backend_);
  check_dtype(op, output, input, "input");
  check_reduce(op, output, o.op);
  if (input.count != output.count * static_cast<size_t>(size())) {
    bad(op, "input holds " + std::to_string(input.count) + " elements; expected " + std::to_string(size()) +
                " x " + std::to_string(output.count));
  }
  std::vector<Buffer> inputs;  // moved into the call, not copied
  inputs.reserve(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q)
    inputs.push_back(slice(input, static_cast<size_t>(q) * output.count, output.count));
  const OpShape shape = shape_of(output, inputs);
  return collective(
      op, shape, o, [this, output, inputs = std::move(inputs), o](const OpContext& c, std::exception_ptr* e) {
        if (desync_ && !agree(Fingerprint(CollectiveOp::kReduceScatterTensor, output.dtype, output.count)
                                  .with_reduce_op(o.op),
                              c, e))
          return;
        fail_on(backend_->reduce_scatter(output, inputs, o.op, c), e);
      });
}

std::shared_ptr<Work> ProcessGroup::all_to_all(const std::vector<Buffer>& outputs,
                                               const std::vector<Buffer>& inputs, const AllToAllOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_to_all";
  check_list(op, outputs, "outputs", size(), *backend_);
  check_list(op, inputs, "inputs", size(), *backend_);
  for (int q = 0; q < size(); ++q) {
    check_dtype(op, inputs[0], inputs[q], "inputs", static_cast<int>(q));
    check_dtype(op, inputs[0], outputs[q], "outputs", static_cast<int>(q));
  }
  if (outputs[rank_].count != inputs[rank_].count) {
    bad(op, "outputs[" + std::to_string(rank_) + "] and inputs[" + std::to_string(rank_) +
                "] (what this rank sends itself) differ in length");
  }
  const OpShape shape = shape_of(outputs, inputs);
  return collective(op, shape, o, [this, outputs, inputs](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kAllToAll, inputs[0].dtype, elements_in(inputs))
                              .with_received(elements_in(outputs)),
                          c, e))
      return;
    fail_on(backend_->all_to_all(outputs, inputs, c), e);
  });
}

std::shared_ptr<Work> ProcessGroup::all_to_all_single(const Buffer& output, const Buffer& input,
                                                      const std::vector<size_t>& output_split_sizes,
                                                      const std::vector<size_t>& input_split_sizes,
                                                      const AllToAllOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "all_to_all_single";
  check_buffer(op, output, "output", *backend_);
  check_buffer(op, input, "input", *backend_);
  check_dtype(op, input, output, "output");
  const size_t p = static_cast<size_t>(size());
  // check_splits validates `given` (empty: even splits) for buffer `b`;
  // split(given, b, q) is then rank q's part. No vector of sizes is built:
  // a small all_to_all is a fraction of a microsecond on one host.
  auto check_splits = [&](const std::vector<size_t>& given, const Buffer& b, const char* name) {
    if (given.empty()) {
      if (b.count % p != 0) {
        bad(op, std::string(name) + " holds " + std::to_string(b.count) +
                    " elements, which do not split evenly over " + std::to_string(p) +
                    " ranks; give split sizes");
      }
      return;
    }
    if (given.size() != p) {
      bad(op, std::string(name) + "_split_sizes has " + std::to_string(given.size()) +
                  " entries; the group has " + std::to_string(p) + " ranks");
    }
    size_t sum = std::accumulate(given.begin(), given.end(), size_t{0});
    if (sum != b.count) {
      bad(op, std::string(name) + "_split_sizes add up to " + std::to_string(sum) + " but " + name +
                  " holds " + std::to_string(b.count) + " elements");
    }
  };
  auto split = [p](const std::vector<size_t>& given, const Buffer& b, size_t q) {
    return given.empty() ? b.count / p : given[q];
  };
  check_splits(output_split_sizes, output, "output");
  check_splits(input_split_sizes, input, "input");
  const size_t me = static_cast<size_t>(rank_);
  if (split(output_split_sizes, output, me) != split(input_split_sizes, input, me)) {
    bad(op, "this rank sends itself " + std::to_string(split(input_split_sizes, input, me)) +
                " elements but expects " + std::to_string(split(output_split_sizes, output, me)));
  }
  std::vector<Buffer> outputs, inputs;
  outputs.reserve(p);
  inputs.reserve(p);
  size_t out_off = 0, in_off = 0;
  for (size_t q = 0; q < p; ++q) {
    const size_t out_n = split(output_split_sizes, output, q), in_n = split(input_split_sizes, input, q);
    outputs.push_back(slice(output, out_off, out_n));
    inputs.push_back(slice(input, in_off, in_n));
    out_off += out_n;
    in_off += in_n;
  }
  const OpShape shape = shape_of(outputs, inputs);
  return collective(
      op, shape, o,
      [this, outputs = std::move(outputs), inputs = std::move(inputs)](const OpContext& c,
                                                                       std::exception_ptr* e) {
        if (desync_ && !agree(Fingerprint(CollectiveOp::kAllToAllSingle, inputs[0].dtype, elements_in(inputs))
                                  .with_received(elements_in(outputs)),
                              c, e))
          return;
        fail_on(backend_->all_to_all(outputs, inputs, c), e);
      });
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  return collective("barrier", OpShape{}, o, [this](const OpContext& c, std::exception_ptr* e) {
    if (desync_ && !agree(Fingerprint(CollectiveOp::kBarrier), c, e)) return;
    fail_on(backend_->barrier(c), e);
  });
}

// The point-to-point tag monitored_barrier uses (users' tags are usually
// small and non-negative).
constexpr int kMonitoredBarrierTag = -0x4d4f4e;  // "MON"

void ProcessGroup::monitored_barrier(const BarrierOptions& o, bool wait_all_ranks) {
  if (!is_member()) return;
  if (size() == 1) return;
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  // The messages use torch's words ("Rank 1 failed to pass
  // monitoredBarrier in 2000 ms"): torch's tests and users' log searches
  // match on them. cohort adds the group and the cause.
  const std::string where = "monitored_barrier of group " + name_ + ": ";
  P2POptions p;
  p.tag = kMonitoredBarrierTag;
  p.timeout = timeout;
  p.async_op = true;
  uint8_t token = 1;
  if (rank_ != 0) {
    try {
      send(Buffer::of(&token, 1), 0, p)->wait();
      recv(Buffer::of(&token, 1), 0, p)->wait();  // rank 0 lets everyone go
    } catch (const Error& e) {
      throw TimeoutError(where + "Rank " + std::to_string(rank_) +
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
  if (o.async_op || !backend_->p2p_now() || !claim_p2p_now())
    return enqueue(description, shape, o, post, false);
  // As enqueue and the worker would, but on this thread: number, record,
  // run, and complete the Work before returning it. The number is taken
  // without the queue's lock: a call another thread queues meanwhile may
  // get a lower one and start later (the recorder's order is then off by
  // that call; nothing matches on p2p numbers).
  const uint64_t sequence = ++p2p_sequence_;
  std::shared_ptr<Work> work;
  OpContext context{sequence, Deadline::after(o.timeout.count() > 0 ? o.timeout : timeout_), nullptr,
                    nullptr};
  try {
    work = std::make_shared<Work>(describe(description, sequence, false, name_));
    context.what = &work->description();
    context.description = work;
    context.trace = trace_->recorder().scheduled(description, shape, sequence, false);
  } catch (...) {
    release_inline();  // out of memory: give the group back, or it stays claimed
    throw;
  }
  trace_->recorder().started(context.trace);
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
  trace_->finish(context.trace, error);  // while this thread still drives the group
  release_inline();
  work->complete(error, source);
  if (error) std::rethrow_exception(error);  // as a queued blocking call's wait() does
  return work;
}

std::shared_ptr<Work> ProcessGroup::send(const Buffer& buffer, int dst, const P2POptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "send";
  check_buffer(op, buffer, "buffer", *backend_);
  check_rank(dst, "send dst");
  if (dst == rank_) bad(op, "dst is this rank (" + std::to_string(dst) + "); a rank cannot send to itself");
  return point_to_point(
      std::string(op) + " to " + std::to_string(dst) + " tag " + std::to_string(o.tag),
      p2p_shape(buffer, dst, o.tag), o,
      [this, &buffer, dst, &o](const OpContext& c, int*) {
        return backend_->send_now(buffer, dst, o.tag, c);
      },
      [this, buffer, dst, o](Work& work, const OpContext& c) {
        auto keep = work.shared_from_this();
        backend_->post_send(buffer, dst, o.tag, c, [this, keep, t = c.trace](const Status& st, int) {
          std::exception_ptr error = st.ok() ? nullptr : status_exception(st);
          trace_->finish(t, error);
          if (error) mark_broken(error, keep->description());
          keep->complete(error);
        });
      });
}

std::shared_ptr<Work> ProcessGroup::recv(const Buffer& buffer, int src, const P2POptions& o) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = "recv";
  check_buffer(op, buffer, "buffer", *backend_);
  if (src != kAnySourceRank) {
    check_rank(src, "recv src");
    if (src == rank_)
      bad(op, "src is this rank (" + std::to_string(src) + "); a rank cannot receive from itself");
  }
  const std::string from = src == kAnySourceRank ? "any rank" : std::to_string(src);
  return point_to_point(
      std::string(op) + " from " + from + " tag " + std::to_string(o.tag), p2p_shape(buffer, src, o.tag), o,
      [this, &buffer, src, &o](const OpContext& c, int* source) {
        return backend_->recv_now(buffer, src, o.tag, c, source);
      },
      [this, buffer, src, o](Work& work, const OpContext& c) {
        auto keep = work.shared_from_this();
        backend_->post_recv(buffer, src, o.tag, c, [this, keep, t = c.trace](const Status& st, int source) {
          std::exception_ptr error = st.ok() ? nullptr : status_exception(st);
          trace_->finish(t, error);
          if (error) mark_broken(error, keep->description());
          keep->complete(error, source);
        });
      });
}

std::shared_ptr<Work> ProcessGroup::isend(const Buffer& buffer, int dst, int tag) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  P2POptions o;
  o.tag = tag;
  o.async_op = true;
  return send(buffer, dst, o);
}

std::shared_ptr<Work> ProcessGroup::irecv(const Buffer& buffer, int src, int tag) {
  if (!is_member()) return done_work_;  // torch: a non-member's call does nothing
  P2POptions o;
  o.tag = tag;
  o.async_op = true;
  return recv(buffer, src, o);
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  if (!is_member()) return std::vector<std::shared_ptr<Work>>(ops.size(), done_work_);
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
