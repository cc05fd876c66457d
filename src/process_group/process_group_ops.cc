// The collectives of ProcessGroup. Each enters through collective(), the
// one place that skips non-members and runs COHORT_DEBUG=detail's desync
// check; its arguments are checked there, on the caller's thread, and a
// wrong one throws InvalidArgument naming it before anything is queued or
// sent. Point-to-point calls and monitored_barrier: process_group_p2p.cc.
#include <numeric>
#include <string_view>

#include "cohort/errors.h"
#include "cohort/process_group.h"
#include "common/collective.h"
#include "common/fast_clock.h"
#include "diagnostics/group_trace.h"
#include "process_group/backend.h"
#include "process_group/desync_check.h"
#include "process_group/op_checks.h"
#include "process_group/op_description.h"
#include "process_group/process_group_state.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

using namespace op_checks;  // NOLINT: this file is their main user

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
  Status st = state_->desync_->check(mine, op);
  if (!st.ok()) *error = status_exception(st);
  return st.ok();
}

namespace {

// Call is what a collective's `prepare` returns once its arguments are
// checked: the arguments as the flight recorder keeps them, how to
// fingerprint the call (run only under COHORT_DEBUG=detail) and the
// backend call itself.
template <class FingerprintOf, class Run>
struct Call {
  OpShape shape;
  FingerprintOf fingerprint;
  Run run;  // Status(const OpContext&)
};
template <class FingerprintOf, class Run>
Call<FingerprintOf, Run> call(OpShape shape, FingerprintOf fingerprint, Run run) {
  return {std::move(shape), std::move(fingerprint), std::move(run)};
}

}  // namespace

template <class Prepare>
std::shared_ptr<Work> ProcessGroup::collective(CollectiveCall call, const CollectiveOptions& options,
                                               Prepare prepare) {
  if (!is_member()) return state_->done_work_;  // torch: a non-member's call does nothing
  const std::string_view op = call_name(call);
  auto c = prepare(op);                         // throws InvalidArgument before anything runs
  // The desync check, in this one place: the fingerprint is taken on the
  // caller's thread (its buffers may be the caller's temporaries) and
  // compared with the other ranks' on the thread that runs the call.
  Fingerprint mine;
  if (state_->desync_) mine = c.fingerprint();
  return run_collective(
      op, c.shape, options,
      [this, mine, run = std::move(c.run)](const OpContext& context, std::exception_ptr* e) {
        if (state_->desync_ && !agree(mine, context, e)) return;
        fail_on(run(context), e);
      });
}

template <class Run>
std::shared_ptr<Work> ProcessGroup::run_collective(std::string_view op, const OpShape& shape,
                                                   const CollectiveOptions& options, Run run) {
  uint64_t sequence;
  if (!options.async_op && state_->backend_->may_run_inline() && claim_inline(&sequence)) {
    // One bare counter read for the deadline and the flight recorder; it
    // is converted to steady time only if something looks at it (a wait
    // that has to sleep, a dump): fast_clock.h says why.
    const uint64_t start = read_counter();
    const Deadline deadline =
        Deadline::after_reading(options.timeout.count() > 0 ? options.timeout : state_->timeout_, start);
    describe_into(&state_->inline_what_, &state_->inline_sequence_, &state_->inline_op_, op, sequence,
                  state_->name_);
    OpContext context{sequence, deadline, &state_->inline_what_, nullptr};
    const TraceTicket ticket = state_->trace_->recorder().began(op, shape, sequence, start);
    std::exception_ptr error = refusal();
    if (!error) {
      try {
        run(context, &error);
      } catch (...) {
        error = std::current_exception();  // a bug in cohort; still reported
      }
      if (error) mark_broken(error, state_->inline_what_);
    }
    state_->trace_->finish(ticket, error);  // while this thread still drives the group
    if (!error) {
      release_inline();
      return state_->done_work_;
    }
    auto failed = std::make_shared<Work>(state_->inline_what_);
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
        state_->trace_->finish(context.trace, error);
        if (error) mark_broken(error, *context.what);
        work.complete(error);
      },
      true);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Buffer& buffer, const BroadcastOptions& o) {
  return collective(CollectiveCall::kBroadcast, o, [&](std::string_view op) {
    check_buffer(op, buffer, "buffer", *state_->backend_);
    check_rank(o.src, "broadcast src");
    return call(
        shape_of(buffer, o.src),
        [&] { return Fingerprint(CollectiveCall::kBroadcast, buffer.dtype, buffer.count).with_root(o.src); },
        [this, buffer, src = o.src](const OpContext& c) {
          return state_->backend_->broadcast(buffer, src, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::all_reduce(const Buffer& buffer, const AllReduceOptions& o) {
  return collective(CollectiveCall::kAllReduce, o, [&](std::string_view op) {
    check_buffer(op, buffer, "buffer", *state_->backend_);
    check_reduce(op, buffer, o.op);
    return call(
        shape_of(buffer),
        [&] {
          return Fingerprint(CollectiveCall::kAllReduce, buffer.dtype, buffer.count).with_reduce_op(o.op);
        },
        [this, buffer, reduce_op = o.op](const OpContext& c) {
          return state_->backend_->all_reduce(buffer, reduce_op, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(const std::vector<Buffer>& buffers,
                                                         const AllReduceOptions& o) {
  return collective(CollectiveCall::kAllReduceCoalesced, o, [&](std::string_view op) {
    if (buffers.empty()) bad(op, "buffers is empty; give at least one buffer");
    for (size_t i = 0; i < buffers.size(); ++i) {
      check_buffer(op, buffers[i], "buffers", *state_->backend_, static_cast<int>(i));
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
    return call(
        shape_of(whole),
        [whole, o] {
          return Fingerprint(CollectiveCall::kAllReduce, whole.dtype, whole.count).with_reduce_op(o.op);
        },
        [this, buffers, reduce_op = o.op](const OpContext& c) {
          return state_->backend_->all_reduce_coalesced(buffers, reduce_op, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Buffer& buffer, const ReduceOptions& o) {
  return collective(CollectiveCall::kReduce, o, [&](std::string_view op) {
    check_buffer(op, buffer, "buffer", *state_->backend_);
    check_rank(o.dst, "reduce dst");
    check_reduce(op, buffer, o.op);
    return call(
        shape_of(buffer, o.dst),
        [&] {
          return Fingerprint(CollectiveCall::kReduce, buffer.dtype, buffer.count)
              .with_root(o.dst)
              .with_reduce_op(o.op);
        },
        [this, buffer, o](const OpContext& c) { return state_->backend_->reduce(buffer, o.dst, o.op, c); });
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                               const AllGatherOptions& o) {
  return collective(CollectiveCall::kAllGather, o, [&](std::string_view op) {
    check_buffer(op, input, "input", *state_->backend_);
    check_list(op, outputs, "outputs", size(), *state_->backend_);
    for (size_t i = 0; i < outputs.size(); ++i)
      check_dtype(op, input, outputs[i], "outputs", static_cast<int>(i));
    if (outputs[state_->rank_].count != input.count) {
      bad(op, "outputs[" + std::to_string(state_->rank_) + "] (this rank's slot) holds " +
                  std::to_string(outputs[state_->rank_].count) + " elements but the input has " +
                  std::to_string(input.count));
    }
    return call(
        shape_of(outputs, input),
        [&] {
          return Fingerprint(CollectiveCall::kAllGather, input.dtype, input.count).with_per_rank(outputs);
        },
        [this, outputs, input](const OpContext& c) {
          return state_->backend_->all_gather(outputs, input, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(const Buffer& output, const Buffer& input,
                                                           const AllGatherOptions& o) {
  return collective(CollectiveCall::kAllGatherIntoTensor, o, [&](std::string_view op) {
    check_buffer(op, input, "input", *state_->backend_);
    check_buffer(op, output, "output", *state_->backend_);
    check_dtype(op, input, output, "output");
    if (output.count != input.count * static_cast<size_t>(size())) {
      bad(op, "output holds " + std::to_string(output.count) + " elements; expected " +
                  std::to_string(size()) + " x " + std::to_string(input.count));
    }
    std::vector<Buffer> outputs;  // moved into the call, not copied
    outputs.reserve(static_cast<size_t>(size()));
    for (int q = 0; q < size(); ++q)
      outputs.push_back(slice(output, static_cast<size_t>(q) * input.count, input.count));
    OpShape shape = shape_of(outputs, input);
    return call(
        std::move(shape),
        [&] { return Fingerprint(CollectiveCall::kAllGatherIntoTensor, input.dtype, input.count); },
        [this, outputs = std::move(outputs), input](const OpContext& c) {
          return state_->backend_->all_gather(outputs, input, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                           const GatherOptions& o) {
  return collective(CollectiveCall::kGather, o, [&](std::string_view op) {
    check_buffer(op, input, "input", *state_->backend_);
    check_rank(o.dst, "gather dst");
    if (state_->rank_ == o.dst) {
      check_list(op, outputs, "outputs", size(), *state_->backend_);
      for (size_t i = 0; i < outputs.size(); ++i)
        check_dtype(op, input, outputs[i], "outputs", static_cast<int>(i));
      if (outputs[state_->rank_].count != input.count) {
        bad(op, "outputs[" + std::to_string(state_->rank_) + "] holds " +
                    std::to_string(outputs[state_->rank_].count) + " elements but the input has " +
                    std::to_string(input.count));
      }
    } else if (!outputs.empty()) {
      bad(op, "outputs must be empty on ranks other than dst " + std::to_string(o.dst) + " (torch's rule)");
    }
    return call(
        shape_of(outputs, input, o.dst),
        [&] {
          return Fingerprint(CollectiveCall::kGather, input.dtype, input.count)
              .with_root(o.dst)
              .with_per_rank(outputs);
        },
        [this, outputs, input, dst = o.dst](const OpContext& c) {
          return state_->backend_->gather(outputs, input, dst, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                            const ScatterOptions& o) {
  return collective(CollectiveCall::kScatter, o, [&](std::string_view op) {
    check_buffer(op, output, "output", *state_->backend_);
    check_rank(o.src, "scatter src");
    if (state_->rank_ == o.src) {
      check_list(op, inputs, "inputs", size(), *state_->backend_);
      for (size_t i = 0; i < inputs.size(); ++i)
        check_dtype(op, output, inputs[i], "inputs", static_cast<int>(i));
      if (inputs[state_->rank_].count != output.count) {
        bad(op, "inputs[" + std::to_string(state_->rank_) + "] holds " +
                    std::to_string(inputs[state_->rank_].count) + " elements but the output has " +
                    std::to_string(output.count));
      }
    } else if (!inputs.empty()) {
      bad(op, "inputs must be empty on ranks other than src " + std::to_string(o.src) + " (torch's rule)");
    }
    return call(
        shape_of(output, inputs, o.src),
        [&] {
          return Fingerprint(CollectiveCall::kScatter, output.dtype, output.count)
              .with_root(o.src)
              .with_per_rank(inputs);
        },
        [this, output, inputs, src = o.src](const OpContext& c) {
          return state_->backend_->scatter(output, inputs, src, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                                   const ReduceScatterOptions& o) {
  return collective(CollectiveCall::kReduceScatter, o, [&](std::string_view op) {
    check_buffer(op, output, "output", *state_->backend_);
    check_list(op, inputs, "inputs", size(), *state_->backend_);
    check_reduce(op, output, o.op);
    for (size_t i = 0; i < inputs.size(); ++i)
      check_dtype(op, output, inputs[i], "inputs", static_cast<int>(i));
    if (inputs[state_->rank_].count != output.count) {
      bad(op, "inputs[" + std::to_string(state_->rank_) + "] holds " +
                  std::to_string(inputs[state_->rank_].count) + " elements but the output has " +
                  std::to_string(output.count));
    }
    return call(
        shape_of(output, inputs),
        [&] {
          return Fingerprint(CollectiveCall::kReduceScatter, output.dtype, output.count)
              .with_per_rank(inputs)
              .with_reduce_op(o.op);
        },
        [this, output, inputs, reduce_op = o.op](const OpContext& c) {
          return state_->backend_->reduce_scatter(output, inputs, reduce_op, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(const Buffer& output, const Buffer& input,
                                                          const ReduceScatterOptions& o) {
  return collective(CollectiveCall::kReduceScatterTensor, o, [&](std::string_view op) {
    check_buffer(op, output, "output", *state_->backend_);
    check_buffer(op, input, "input", *state_->backend_);
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
    OpShape shape = shape_of(output, inputs);
    return call(
        std::move(shape),
        [&] {
          return Fingerprint(CollectiveCall::kReduceScatterTensor, output.dtype, output.count)
              .with_reduce_op(o.op);
        },
        [this, output, inputs = std::move(inputs), reduce_op = o.op](const OpContext& c) {
          return state_->backend_->reduce_scatter(output, inputs, reduce_op, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::all_to_all(const std::vector<Buffer>& outputs,
                                               const std::vector<Buffer>& inputs, const AllToAllOptions& o) {
  return collective(CollectiveCall::kAllToAll, o, [&](std::string_view op) {
    check_list(op, outputs, "outputs", size(), *state_->backend_);
    check_list(op, inputs, "inputs", size(), *state_->backend_);
    for (int q = 0; q < size(); ++q) {
      check_dtype(op, inputs[0], inputs[q], "inputs", static_cast<int>(q));
      check_dtype(op, inputs[0], outputs[q], "outputs", static_cast<int>(q));
    }
    if (outputs[state_->rank_].count != inputs[state_->rank_].count) {
      bad(op, "outputs[" + std::to_string(state_->rank_) + "] and inputs[" + std::to_string(state_->rank_) +
                  "] (what this rank sends itself) differ in length");
    }
    return call(
        shape_of(outputs, inputs),
        [&] {
          return Fingerprint(CollectiveCall::kAllToAll, inputs[0].dtype, elements_in(inputs))
              .with_received(elements_in(outputs));
        },
        [this, outputs, inputs](const OpContext& c) {
          return state_->backend_->all_to_all(outputs, inputs, c);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::all_to_all_single(const Buffer& output, const Buffer& input,
                                                      const std::vector<size_t>& output_split_sizes,
                                                      const std::vector<size_t>& input_split_sizes,
                                                      const AllToAllOptions& o) {
  return collective(CollectiveCall::kAllToAllSingle, o, [&](std::string_view op) {
    check_buffer(op, output, "output", *state_->backend_);
    check_buffer(op, input, "input", *state_->backend_);
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
    const size_t me = static_cast<size_t>(state_->rank_);
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
    OpShape shape = shape_of(outputs, inputs);
    const Fingerprint fingerprint =
        Fingerprint(CollectiveCall::kAllToAllSingle, input.dtype, input.count).with_received(output.count);
    const bool even = output_split_sizes.empty() && input_split_sizes.empty();
    return call(
        std::move(shape), [fingerprint] { return fingerprint; },
        [this, even, outputs = std::move(outputs), inputs = std::move(inputs)](const OpContext& c) {
          if (!even) return state_->backend_->all_to_all(outputs, inputs, c);
          OpContext evenly = c;
          evenly.even_blocks = true;
          return state_->backend_->all_to_all(outputs, inputs, evenly);
        });
  });
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& o) {
  return collective(CollectiveCall::kBarrier, o, [&](std::string_view) {
    return call(
        OpShape{}, [] { return Fingerprint(CollectiveCall::kBarrier); },
        [this](const OpContext& c) { return state_->backend_->barrier(c); });
  });
}

}  // namespace cohort
