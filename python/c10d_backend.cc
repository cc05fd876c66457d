#include "c10d_backend.h"

#include <ATen/Functions.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "cohort/tensor.h"
#include "store_adapter.h"
#include "torch_errors.h"

namespace cohort_torch {

namespace {

using cohort::InvalidArgument;

// A tensor that is not contiguous is the ValueError torch raises for that
// mistake ("Tensors must be contiguous"), with cohort's message (its
// to_buffer words it); cohort's other argument errors stay RuntimeErrors,
// as torch's Gloo raises them.
void refuse_non_contiguous(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined() || tensor.layout() != at::kStrided || tensor.is_contiguous()) return;
  try {
    cohort::to_buffer(tensor, what);
  } catch (const InvalidArgument& e) {
    C10_THROW_ERROR(ValueError, e.what());
  }
}

cohort::Buffer to_buffer(const at::Tensor& tensor, const char* what) {
  refuse_non_contiguous(tensor, what);
  return cohort::to_buffer(tensor, what);
}

using WorkList = std::vector<std::shared_ptr<cohort::Work>>;

// CohortWork is torch's handle on one or more cohort Works (a coalesced
// call runs one per tensor). Its future is made on the first getFuture()
// and completed by the last of them, with the outputs or the first error.
class CohortWork : public c10d::Work {
 public:
  // `title` (or null) names the profiler's event ("cohort:all_reduce"),
  // which records `inputs`' shapes and lasts until the Works complete, as
  // torch's own backends' events do.
  CohortWork(int rank, c10d::OpType type, const char* title, const std::vector<at::Tensor>& inputs,
             WorkList works, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type, title, title ? std::optional<std::vector<at::Tensor>>(inputs) : std::nullopt),
        works_(std::move(works)),
        outputs_(std::move(outputs)) {}

  // end_event_when_done ends the profiler's event when the last Work
  // completes (at once if they have). `self` is this Work, kept alive by
  // the callbacks until then.
  static void end_event_when_done(const c10::intrusive_ptr<CohortWork>& self) {
    self->profiled_ = true;
    auto remaining = std::make_shared<std::atomic<size_t>>(self->works_.size());
    if (self->works_.empty()) return self->finish();
    for (const auto& w : self->works_) {
      w->then([self, remaining](cohort::Work& done) {
        if (remaining->fetch_sub(1) == 1) self->finish(done.exception());
      });
    }
  }

  bool isCompleted() override {
    if (profiled_) {  // complete once the profiler's event has ended too
      std::lock_guard<std::mutex> lock(mutex_);
      return completed_;
    }
    for (const auto& w : works_) {
      if (!w->is_completed()) return false;
    }
    return true;
  }
  bool isSuccess() const override {
    for (const auto& w : works_) {
      if (!w->is_success()) return false;
    }
    return true;
  }
  std::exception_ptr exception() const override {
    for (const auto& w : works_) {
      if (auto e = w->exception()) return as_torch_error(e);
    }
    return nullptr;
  }
  int sourceRank() const override { return works_.empty() ? -1 : works_.front()->source_rank(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  // wait: torch's kNoTimeout (0) and cohort's "no timeout of this wait's
  // own" agree; the operation's deadline bounds it in any case. A timeout
  // is one budget for the whole list, as torch means it: each Work gets
  // what the ones before it left (at least 1 ms: 0 would be no timeout).
  bool wait(std::chrono::milliseconds timeout) override {
    try {
      return wait_for_all(timeout);
    } catch (...) {
      rethrow_as_torch_error(std::current_exception());
    }
  }

  bool wait_for_all(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (size_t i = 0; i < works_.size(); ++i) {
      if (timeout.count() <= 0) {
        works_[i]->wait();
        continue;
      }
      const auto left = std::max(
          std::chrono::milliseconds(1),
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()));
      try {
        works_[i]->wait(left);
      } catch (const cohort::TimeoutError& e) {
        throw cohort::TimeoutError(std::string(e.what()) + "; that was what was left of a wait of " +
                                   std::to_string(timeout.count()) + " ms for " +
                                   std::to_string(works_.size()) + " operations, " + std::to_string(i) +
                                   " of them done");
      }
    }
    if (profiled_) {
      // The Works' callbacks, which end the profiler's event, may still be
      // running on the thread that completed the last: the caller may stop
      // the profiler as soon as this returns, so wait for them too.
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return completed_; });
    }
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    if (works_.empty()) {
      future_->markCompleted(c10::IValue(outputs_));
      return future_;
    }
    struct Countdown {
      std::atomic<size_t> remaining;
      std::mutex mu;
      std::exception_ptr error;
    };
    auto countdown = std::make_shared<Countdown>();
    countdown->remaining = works_.size();
    auto future = future_;
    auto outputs = outputs_;
    for (const auto& w : works_) {
      // Runs once per Work, on the thread that completes it (maybe this one).
      w->then([future, outputs, countdown](cohort::Work& done) {
        if (auto e = done.exception()) {
          std::lock_guard<std::mutex> guard(countdown->mu);
          if (!countdown->error) countdown->error = e;
        }
        if (countdown->remaining.fetch_sub(1) != 1) return;
        if (countdown->error) {
          future->setError(as_torch_error(countdown->error));
        } else {
          future->markCompleted(c10::IValue(outputs));
        }
      });
    }
    return future_;
  }

 private:
  const WorkList works_;
  const std::vector<at::Tensor> outputs_;
  std::mutex mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool profiled_ = false;  // a profiler's event ends when the Works complete
};

// only is the one tensor of a per-device list: cohort runs one device's
// tensor per call, as torch 2.x's own callers pass.
at::Tensor& only(std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    throw InvalidArgument(std::string("cohort: ") + op + " takes one tensor per call, got " +
                          std::to_string(tensors.size()));
  }
  return tensors.front();
}

std::vector<cohort::Buffer> buffers_of(const std::vector<at::Tensor>& tensors, const char* what) {
  std::vector<cohort::Buffer> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(to_buffer(t, what));
  return out;
}

// options fills cohort's common fields: torch's unset timeout (-1) is the
// group's (0 here); asyncOp=false is torch's blocking call.
template <class Options>
Options options(std::chrono::milliseconds timeout, bool async_op) {
  Options o;
  o.timeout = timeout.count() > 0 ? timeout : std::chrono::milliseconds(0);
  o.async_op = async_op;
  return o;
}

cohort::ReduceOp to_reduce_op(const c10d::ReduceOp& op, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return cohort::ReduceOp::SUM;
    case c10d::ReduceOp::AVG:
      return cohort::ReduceOp::AVG;
    case c10d::ReduceOp::PRODUCT:
      return cohort::ReduceOp::PRODUCT;
    case c10d::ReduceOp::MIN:
      return cohort::ReduceOp::MIN;
    case c10d::ReduceOp::MAX:
      return cohort::ReduceOp::MAX;
    case c10d::ReduceOp::BAND:
      return cohort::ReduceOp::BAND;
    case c10d::ReduceOp::BOR:
      return cohort::ReduceOp::BOR;
    case c10d::ReduceOp::BXOR:
      return cohort::ReduceOp::BXOR;
    case c10d::ReduceOp::PREMUL_SUM: {
      const auto* factor = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
      if (!factor) throw InvalidArgument(std::string("cohort: ") + what + ": PREMUL_SUM without its factor");
      return cohort::ReduceOp::premul_sum(
          factor->tensor_factor.defined() ? factor->tensor_factor.item<double>() : factor->double_factor);
    }
    default:
      throw InvalidArgument(std::string("cohort: ") + what + ": unknown reduce op " +
                            std::to_string(static_cast<int>(op.op_)));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> CohortBackend::finish(c10d::OpType type, const char* op, WorkList works,
                                                     std::vector<at::Tensor> outputs,
                                                     std::vector<at::Tensor> keep,
                                                     const std::vector<at::Tensor>& inputs) {
  // An async call's tensors (`keep`) stay alive until its Works complete,
  // whatever torch's caller does with the handle: the callback holds them.
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                    [](const std::weak_ptr<cohort::Work>& w) {
                                      auto work = w.lock();
                                      return !work || work->is_completed();
                                    }),
                     in_flight_.end());
    for (const auto& w : works) {
      if (w->is_completed()) continue;
      w->then([keep](cohort::Work&) {});
      in_flight_.push_back(w);
    }
  }
  if (coalescing_) {
    coalesced_works_.insert(coalesced_works_.end(), works.begin(), works.end());
    coalesced_outputs_.insert(coalesced_outputs_.end(), outputs.begin(), outputs.end());
  }
  // The profiler's event, only while a profiler listens: naming it costs
  // a string and an allocation per call.
  if (!at::hasCallbacks()) {
    return c10::make_intrusive<CohortWork>(rank_, type, nullptr, inputs, std::move(works),
                                           std::move(outputs));
  }
  const std::string title = profiling_name_ + ":" + op;
  auto work = c10::make_intrusive<CohortWork>(rank_, type, title.c_str(), inputs, std::move(works),
                                              std::move(outputs));
  CohortWork::end_event_when_done(work);
  return work;
}

template <class One>
c10::intrusive_ptr<c10d::Work> CohortBackend::pairwise(const char* profiled_op, const std::string& op,
                                                       std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs, One&& one) {
  if (outputs.size() != inputs.size()) {
    throw InvalidArgument("cohort: " + op + "_coalesced has " + std::to_string(inputs.size()) +
                          " inputs but " + std::to_string(outputs.size()) + " outputs");
  }
  const std::string out_name = op + "'s output", in_name = op + "'s input";
  WorkList works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(one(to_buffer(outputs[i], out_name.c_str()), to_buffer(inputs[i], in_name.c_str())));
  }
  std::vector<at::Tensor> keep(outputs);
  keep.insert(keep.end(), inputs.begin(), inputs.end());
  return finish(c10d::OpType::COALESCED, profiled_op, std::move(works), outputs, std::move(keep), inputs);
}

void CohortBackend::startCoalescing() {
  if (coalescing_) {
    throw InvalidArgument("cohort: startCoalescing while group " + group_->name() +
                          " is already coalescing (endCoalescing was not called)");
  }
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> CohortBackend::endCoalescing() {
  if (!coalescing_) {
    throw InvalidArgument("cohort: endCoalescing without startCoalescing on group " + group_->name());
  }
  coalescing_ = false;
  WorkList works = std::move(coalesced_works_);
  std::vector<at::Tensor> outputs = std::move(coalesced_outputs_);
  coalesced_works_.clear();
  coalesced_outputs_.clear();
  // The calls are in flight already; this Work ends with the last of them.
  return c10::make_intrusive<CohortWork>(rank_, c10d::OpType::COALESCED, nullptr, std::vector<at::Tensor>{},
                                         std::move(works), std::move(outputs));
}

CohortBackend::CohortBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout, const std::string& group_name)
    : c10d::Backend(rank, size),
      group_(cohort::make_group(std::make_shared<StoreAdapter>(store), rank, size, timeout,
                                "torch:" + group_name, master_host_of(store), "cohort")) {}

CohortBackend::~CohortBackend() = default;

CohortProcessGroup::CohortProcessGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                       const c10::intrusive_ptr<CohortBackend>& backend)
    : c10d::ProcessGroup(store, backend->getRank(), backend->getSize()) {
  setBackend(c10::DeviceType::CPU, BackendType::CUSTOM, backend);
  setDefaultBackend(BackendType::CUSTOM);
}

void CohortProcessGroup::setSequenceNumberForGroup() {
  getDefaultBackend()->setSequenceNumberForGroup();
}

uint64_t CohortProcessGroup::getSequenceNumberForGroup() {
  return getDefaultBackend()->getSequenceNumberForGroup();
}

c10::intrusive_ptr<c10d::Work> CohortBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "broadcast");
    auto o = options<cohort::BroadcastOptions>(opts.timeout, async_op(opts.asyncOp));
    o.src = static_cast<int>(opts.rootRank);
    return finish(c10d::OpType::BROADCAST, "broadcast",
                  {group_->broadcast(to_buffer(t, "broadcast's tensor"), o)}, tensors, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "all_reduce");
    if (t.layout() == at::kSparse) {
      // Sparse COO, as Gloo: blocking, its Work complete on return.
      return finish(c10d::OpType::ALLREDUCE, "all_reduce",
                    {cohort::all_reduce(t, to_reduce_op(opts.reduceOp, "all_reduce"), group_)}, tensors, {},
                    tensors);
    }
    auto o = options<cohort::AllReduceOptions>(opts.timeout, async_op(opts.asyncOp));
    o.op = to_reduce_op(opts.reduceOp, "all_reduce");
    return finish(c10d::OpType::ALLREDUCE, "all_reduce",
                  {group_->all_reduce(to_buffer(t, "all_reduce's tensor"), o)}, tensors, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::AllReduceOptions>(opts.timeout, async_op(opts.asyncOp));
    o.op = to_reduce_op(opts.reduceOp, "all_reduce_coalesced");
    return finish(c10d::OpType::ALLREDUCE_COALESCED, "all_reduce",
                  {group_->all_reduce_coalesced(buffers_of(tensors, "all_reduce_coalesced's tensor"), o)},
                  tensors, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "reduce");
    auto o = options<cohort::ReduceOptions>(opts.timeout, async_op(opts.asyncOp));
    o.dst = static_cast<int>(opts.rootRank);
    o.op = to_reduce_op(opts.reduceOp, "reduce");
    return finish(c10d::OpType::REDUCE, "reduce", {group_->reduce(to_buffer(t, "reduce's tensor"), o)},
                  tensors, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& input = only(inputs, "all_gather");
    if (outputs.size() != 1) throw InvalidArgument("cohort: all_gather takes one output list per call");
    auto o = options<cohort::AllGatherOptions>(opts.timeout, async_op(opts.asyncOp));
    std::vector<at::Tensor> keep = outputs.front();
    keep.push_back(input);
    return finish(c10d::OpType::ALLGATHER, "all_gather",
                  {group_->all_gather(buffers_of(outputs.front(), "all_gather's output"),
                                      to_buffer(input, "all_gather's input"), o)},
                  outputs.front(), std::move(keep), inputs);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::AllGatherOptions>(opts.timeout, async_op(opts.asyncOp));
    return finish(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor",
                  {group_->all_gather_into_tensor(to_buffer(output, "all_gather_into_tensor's output"),
                                                  to_buffer(input, "all_gather_into_tensor's input"), o)},
                  {output}, {output, input}, {input});
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    // torch's layout: outputs[q][i] receives rank q's inputs[i].
    const int size = getSize();
    if (outputs.size() != static_cast<size_t>(size)) {
      throw InvalidArgument("cohort: all_gather_coalesced takes one output list per rank: the group has " +
                            std::to_string(size) + " ranks, got " + std::to_string(outputs.size()) +
                            " lists");
    }
    for (int q = 0; q < size; ++q) {
      if (outputs[q].size() != inputs.size()) {
        throw InvalidArgument("cohort: all_gather_coalesced's output list " + std::to_string(q) + " has " +
                              std::to_string(outputs[q].size()) + " tensors, but there are " +
                              std::to_string(inputs.size()) + " inputs");
      }
    }
    // One async all_gather per input, all in flight together; the Work ends
    // with the last.
    auto o = options<cohort::AllGatherOptions>(opts.timeout, true);
    WorkList works;
    std::vector<at::Tensor> flat, keep(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<at::Tensor> column;
      for (int q = 0; q < size; ++q) column.push_back(outputs[q][i]);
      works.push_back(group_->all_gather(buffers_of(column, "all_gather_coalesced's output"),
                                         to_buffer(inputs[i], "all_gather_coalesced's input"), o));
    }
    for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
    keep.insert(keep.end(), flat.begin(), flat.end());
    return finish(c10d::OpType::ALLGATHER_COALESCED, "all_gather", std::move(works), std::move(flat),
                  std::move(keep), inputs);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::AllGatherOptions>(opts.timeout, true);
    return pairwise("all_gather_into_tensor", "all_gather_into_tensor", outputs, inputs,
                    [&](const cohort::Buffer& out, const cohort::Buffer& in) {
                      return group_->all_gather_into_tensor(out, in, o);
                    });
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& input = only(inputs, "gather");
    auto o = options<cohort::GatherOptions>(opts.timeout, async_op(opts.asyncOp));
    o.dst = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> list;
    if (getRank() == o.dst) {
      if (outputs.size() != 1) throw InvalidArgument("cohort: gather takes one output list on its root");
      list = outputs.front();
    }
    std::vector<at::Tensor> keep(list);
    keep.push_back(input);
    return finish(
        c10d::OpType::GATHER, "gather",
        {group_->gather(buffers_of(list, "gather's output"), to_buffer(input, "gather's input"), o)}, list,
        std::move(keep), inputs);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& output = only(outputs, "scatter");
    auto o = options<cohort::ScatterOptions>(opts.timeout, async_op(opts.asyncOp));
    o.src = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> list;
    if (getRank() == o.src) {
      if (inputs.size() != 1) throw InvalidArgument("cohort: scatter takes one input list on its root");
      list = inputs.front();
    }
    std::vector<at::Tensor> keep(list);
    keep.push_back(output);
    return finish(
        c10d::OpType::SCATTER, "scatter",
        {group_->scatter(to_buffer(output, "scatter's output"), buffers_of(list, "scatter's input"), o)},
        outputs, std::move(keep), list);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& output = only(outputs, "reduce_scatter");
    if (inputs.size() != 1) throw InvalidArgument("cohort: reduce_scatter takes one input list per call");
    auto o = options<cohort::ReduceScatterOptions>(opts.timeout, async_op(opts.asyncOp));
    o.op = to_reduce_op(opts.reduceOp, "reduce_scatter");
    std::vector<at::Tensor> keep(inputs.front());
    keep.push_back(output);
    return finish(c10d::OpType::REDUCE_SCATTER, "reduce_scatter",
                  {group_->reduce_scatter(to_buffer(output, "reduce_scatter's output"),
                                          buffers_of(inputs.front(), "reduce_scatter's input"), o)},
                  outputs, std::move(keep), inputs.front());
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::ReduceScatterOptions>(opts.timeout, async_op(opts.asyncOp));
    o.op = to_reduce_op(opts.reduceOp, "reduce_scatter_tensor");
    // The event records the output, as Gloo's does (torch's tests check it).
    return finish(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor",
                  {group_->reduce_scatter_tensor(to_buffer(output, "reduce_scatter_tensor's output"),
                                                 to_buffer(input, "reduce_scatter_tensor's input"), o)},
                  {output}, {output, input}, {output});
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::ReduceScatterOptions>(opts.timeout, true);
    o.op = to_reduce_op(opts.reduceOp, "reduce_scatter_tensor_coalesced");
    return pairwise("reduce_scatter_tensor", "reduce_scatter_tensor", outputs, inputs,
                    [&](const cohort::Buffer& out, const cohort::Buffer& in) {
                      return group_->reduce_scatter_tensor(out, in, o);
                    });
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_split_sizes,
                                                            std::vector<int64_t>& input_split_sizes,
                                                            const c10d::AllToAllOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    // The tensor-level all_to_all_single turns torch's row counts into the
    // core's element counts and checks them.
    refuse_non_contiguous(output, "all_to_all_single's output");
    refuse_non_contiguous(input, "all_to_all_single's input");
    auto work = cohort::all_to_all_single(output, input, output_split_sizes, input_split_sizes, group_, true);
    if (!async_op(opts.asyncOp)) work->wait();
    return finish(c10d::OpType::ALLTOALL_BASE, "all_to_all", {work}, {output}, {output, input}, {input});
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    auto o = options<cohort::AllToAllOptions>(opts.timeout, async_op(opts.asyncOp));
    std::vector<at::Tensor> keep(outputs);
    keep.insert(keep.end(), inputs.begin(), inputs.end());
    return finish(c10d::OpType::ALLTOALL, "all_to_all",
                  {group_->all_to_all(buffers_of(outputs, "all_to_all's output"),
                                      buffers_of(inputs, "all_to_all's input"), o)},
                  outputs, std::move(keep), inputs);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "send");
    return finish(c10d::OpType::SEND, "send", {group_->isend(to_buffer(t, "send's tensor"), dst, tag)}, {},
                  tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "recv");
    return finish(c10d::OpType::RECV, "recv", {group_->irecv(to_buffer(t, "recv's tensor"), src, tag)},
                  tensors, tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    at::Tensor& t = only(tensors, "recv");
    return finish(c10d::OpType::RECVANYSOURCE, "recvAnySource",
                  {group_->irecv(to_buffer(t, "recv's tensor"), cohort::kAnySourceRank, tag)}, tensors,
                  tensors, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> CohortBackend::barrier(const c10d::BarrierOptions& opts) {
  return with_torch_error_kinds([&]() -> c10::intrusive_ptr<c10d::Work> {
    return finish(c10d::OpType::BARRIER, "barrier",
                  {group_->barrier(options<cohort::BarrierOptions>(opts.timeout, async_op(opts.asyncOp)))},
                  {}, {}, {});
  });
}

void CohortBackend::setSequenceNumberForGroup() {
  // The group numbers its collectives from its creation on every rank, so
  // there is nothing to agree on; torch asks once, when it makes a group.
}

uint64_t CohortBackend::getSequenceNumberForGroup() {
  return group_->sequence_number();
}

void CohortBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // torch's zero timeout is zero (cohort's would be the group's): rank 0
  // runs out of it at once, as Gloo's does.
  if (opts.timeout.count() == 0) {
    throw cohort::TimeoutError("monitored_barrier of group " + group_->name() + ": Rank " +
                               std::to_string(getRank()) + " timed out in monitoredBarrier after 0 ms");
  }
  group_->monitored_barrier(options<cohort::BarrierOptions>(opts.timeout, false), wait_all_ranks);
}

at::Tensor CohortBackend::alloc_symmetric(int64_t bytes) {
  if (bytes < 0) throw InvalidArgument("cohort: empty_symmetric of " + std::to_string(bytes) + " bytes");
  std::shared_ptr<cohort::SymmetricMemory> block = group_->alloc_symmetric(static_cast<size_t>(bytes));
  // The tensor's deleter holds the block: it lives as long as any view of it.
  return at::from_blob(
      block->data(), {bytes}, [block](void*) {}, at::TensorOptions().dtype(at::kByte));
}

void CohortBackend::abort() {
  group_->abort("torch called abort() on the backend");
}

void CohortBackend::shutdown() {
  std::vector<std::weak_ptr<cohort::Work>> in_flight;
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    in_flight.swap(in_flight_);
  }
  for (const auto& w : in_flight) {
    auto work = w.lock();
    if (!work) continue;
    try {
      work->wait();  // bounded by the operation's own deadline
    } catch (const std::exception&) {
      // Its failure is its caller's to hear, from its own wait().
    }
  }
  group_->abort("torch shut the backend down (destroy_process_group)");
}

}  // namespace cohort_torch
