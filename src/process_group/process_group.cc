// ProcessGroup: argument checks on the caller's thread, then one worker
// thread per group that runs operations in call order (docs/threading.md).
// A blocking collective that finds the group idle runs on the caller's
// thread instead (process_group_ops.cc): handing it to the worker and back
// costs two thread wake-ups, more than a whole small collective over
// shared memory.
#include "cohort/process_group.h"

#include <numeric>

#include "cohort/errors.h"
#include "cohort/store.h"
#include "common/logging.h"
#include "diagnostics/group_monitor.h"
#include "diagnostics/group_trace.h"
#include "process_group/backend.h"
#include "process_group/desync_check.h"
#include "process_group/group_log.h"
#include "process_group/op_description.h"
#include "process_group/process_group_state.h"
#include "reduce/reduce.h"

namespace cohort {
namespace {

// completed_work is what every blocking collective run on its caller's
// thread returns (torch returns nothing for a blocking call): one Work,
// complete and successful, that lives as long as the process. It is handed
// out as a shared_ptr that owns nothing, so that copying and dropping it
// touches no reference count (two locked instructions per collective), and
// it stays valid even if the caller keeps it past its group. `complete`
// is given by the group's constructor: only a ProcessGroup may complete a
// Work.
template <class Complete>
std::shared_ptr<Work> completed_work(Complete complete) {
  static const std::shared_ptr<Work>* const kDone = [&] {
    auto* done = new std::shared_ptr<Work>(std::make_shared<Work>("a blocking collective, complete"));
    complete(**done);
    return done;
  }();
  return std::shared_ptr<Work>(std::shared_ptr<Work>(), kDone->get());
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend, int rank, std::vector<int> global_ranks,
                           std::string name, std::chrono::milliseconds timeout, std::shared_ptr<Store> store)
    : state_(std::make_unique<State>(std::move(backend), rank, std::move(global_ranks), std::move(name),
                                     timeout, std::move(store))) {
  State& s = *state_;
  s.done_work_ = completed_work([](Work& w) { w.complete(nullptr); });
  s.trace_ = std::make_shared<GroupTrace>(s.name_, s.rank_, s.global_ranks_, s.backend_->name(), s.store_,
                                          trace_buffer_entries());
  s.monitored_ = std::make_unique<MonitorLease>(s.trace_);
  s.desync_ = DesyncCheck::make(*s.backend_, s.rank_, size(), s.name_, s.store_);
  log_group_created(*this, *s.backend_, s.desync_.get());  // COHORT_DEBUG=info
  s.worker_ = std::thread([this] { worker_loop(); });
}

ProcessGroup::ProcessGroup(NonMemberTag, std::vector<int> global_ranks, std::string name)
    : state_(std::make_unique<State>(nullptr, -1, std::move(global_ranks), std::move(name),
                                     std::chrono::milliseconds(0), nullptr)) {
  state_->done_work_ = completed_work([](Work& w) { w.complete(nullptr); });
}

std::string ProcessGroup::stragglers_json() const {
  if (!state_->trace_) throw InvalidArgument("stragglers: this rank is not a member of group " + name());
  return state_->trace_->arrivals().report().dump(2);
}

bool ProcessGroup::is_member() const {
  return state_->backend_ != nullptr;
}
int ProcessGroup::rank() const {
  return state_->rank_;
}
int ProcessGroup::size() const {
  return is_member() ? static_cast<int>(state_->global_ranks_.size()) : -1;
}
const std::string& ProcessGroup::name() const {
  return state_->name_;
}
const std::vector<int>& ProcessGroup::global_ranks() const {
  return state_->global_ranks_;
}
std::chrono::milliseconds ProcessGroup::timeout() const {
  return state_->timeout_;
}
const std::shared_ptr<Store>& ProcessGroup::store() const {
  return state_->store_;
}
uint64_t ProcessGroup::sequence_number() const {
  return state_->gate_.load() >> kSequenceShift;
}
void ProcessGroup::stop_driving() {
  state_->gate_.fetch_and(~kDriving, std::memory_order_release);
}

std::shared_ptr<ProcessGroup> ProcessGroup::non_member(std::vector<int> global_ranks, std::string name) {
  return std::shared_ptr<ProcessGroup>(
      new ProcessGroup(NonMemberTag{}, std::move(global_ranks), std::move(name)));
}

ProcessGroup::~ProcessGroup() {
  if (!is_member()) return;  // no worker, no backend
  {
    std::lock_guard<std::mutex> lock(state_->mu_);
    state_->gate_.fetch_or(kStopping);
  }
  state_->cv_.notify_all();
  state_->backend_->wake();
  state_->worker_.join();
  // Pending point-to-point requests complete (with an error) as the
  // backend's transport goes away.
  state_->backend_.reset();
}

std::string ProcessGroup::backend_name() const {
  return is_member() ? state_->backend_->name() : std::string();
}

void ProcessGroup::check_rank(int r, const char* what) const {
  if (r < 0 || r >= size()) {
    throw InvalidArgument(std::string(what) + " is " + std::to_string(r) + ", out of range for group " +
                          state_->name_ + " of " + std::to_string(size()) + " ranks");
  }
}

bool ProcessGroup::try_drive(bool last) {
  uint64_t g = state_->gate_.load(std::memory_order_relaxed);
  do {
    if (g & kDriving) return false;
  } while (!state_->gate_.compare_exchange_weak(g, (g | kDriving) & ~(last ? kQueued : 0),
                                                std::memory_order_acquire, std::memory_order_relaxed));
  return true;
}

void ProcessGroup::worker_loop() {
  std::unique_lock<std::mutex> lock(state_->mu_);
  for (;;) {
    if (state_->gate_.load(std::memory_order_relaxed) & kStopping)
      break;  // what is still queued is cancelled below
    if (!state_->queue_.empty()) {
      // A caller that runs its collective itself wakes us when it is done
      // (release_inline sees kQueued).
      if (!try_drive(state_->queue_.size() == 1)) {
        state_->cv_.wait(lock);
        continue;
      }
      std::pair<std::shared_ptr<Work>, Task> item = std::move(state_->queue_.front());
      state_->queue_.pop_front();
      lock.unlock();
      run_task(*item.first, item.second);
      stop_driving();
      item = {};
      lock.lock();
      continue;
    }
    // Nothing queued: drive isend/irecv in flight until new work (or stop)
    // wakes us. Only a driver may look at the backend.
    if (try_drive(false)) {
      if (state_->backend_->has_pending()) {
        lock.unlock();
        state_->backend_->progress(Deadline::never());
        stop_driving();
        lock.lock();
        continue;
      }
      stop_driving();
    }
    // Holding state_->mu_ from the checks above to here: whoever queues work or
    // leaves requests in flight notifies under state_->mu_, so no wake-up is lost.
    state_->cv_.wait(lock);
  }
  // Whatever is still queued fails with a clear reason, each Work once.
  std::deque<std::pair<std::shared_ptr<Work>, Task>> left;
  left.swap(state_->queue_);
  lock.unlock();
  for (auto& item : left) {
    item.first->complete(status_exception(
        Status(StatusCode::kBackendError,
               item.first->description() + " was cancelled: group " + state_->name_ + " was destroyed")));
  }
}

void ProcessGroup::run_task(Work& work, const Task& task) {
  if (std::exception_ptr refused = refusal()) return work.complete(refused);
  try {
    task();
  } catch (...) {
    // A throwing task is a bug in cohort; its Work still completes.
    work.complete(std::current_exception());
  }
}

std::shared_ptr<Work> ProcessGroup::enqueue(std::string_view op, const OpShape& shape,
                                            const CollectiveOptions& options,
                                            std::function<void(Work&, const OpContext&)> run,
                                            bool is_collective) {
  const auto timeout = options.timeout.count() > 0 ? options.timeout : state_->timeout_;
  // The deadline counts from the call, not from when the worker gets to it.
  const Deadline deadline = Deadline::after(timeout);
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(state_->mu_);
    uint64_t g = state_->gate_.load(std::memory_order_relaxed);
    if (g & kStopping)
      throw InvalidArgument(std::string(op) + ": group " + state_->name_ + " is being destroyed");
    // Numbered and marked queued in one step, under the queue's lock, so
    // that numbers follow queue order even when several threads issue
    // operations and a caller claims the group inline meanwhile.
    // Collectives are numbered alike on every rank (their messages carry
    // the number); point-to-point calls need not match up, so they count
    // apart.
    uint64_t seq;
    if (is_collective) {
      while (
          !state_->gate_.compare_exchange_weak(g, (g + kOneSequence) | kQueued, std::memory_order_relaxed)) {
      }
      seq = (g >> kSequenceShift) + 1;
    } else {
      state_->gate_.fetch_or(kQueued, std::memory_order_relaxed);
      seq = ++state_->p2p_sequence_;
    }
    work = std::make_shared<Work>(describe(op, seq, is_collective, state_->name_));
    OpContext context{seq, deadline, &work->description(), work};
    context.trace = state_->trace_->recorder().scheduled(op, shape, seq, is_collective);
    state_->queue_.emplace_back(work, [this, work, context, run = std::move(run)] {
      state_->trace_->recorder().started(context.trace);
      run(*work, context);
    });
  }
  state_->cv_.notify_one();
  state_->backend_->wake();
  if (!options.async_op) work->wait();
  return work;
}

bool ProcessGroup::claim_inline(uint64_t* sequence) {
  uint64_t g = state_->gate_.load(std::memory_order_relaxed);
  if (g & (kDriving | kQueued | kStopping)) return false;
  if (!state_->gate_.compare_exchange_strong(g, (g + kOneSequence) | kDriving, std::memory_order_acquire,
                                             std::memory_order_relaxed))
    return false;  // someone queued or claimed meanwhile: queue behind them
  *sequence = (g >> kSequenceShift) + 1;
  return true;
}

bool ProcessGroup::claim_p2p_now() {
  uint64_t g = state_->gate_.load(std::memory_order_relaxed);
  if (g & (kDriving | kQueued | kStopping)) return false;
  // No collective number is taken: point-to-point calls count apart.
  return state_->gate_.compare_exchange_strong(g, g | kDriving, std::memory_order_acquire,
                                               std::memory_order_relaxed);
}

void ProcessGroup::release_inline() {
  // Requests left in flight, or work queued meanwhile, need the worker.
  // Asked while this thread still drives: only a driver may look.
  const bool pending = state_->backend_->has_pending();
  const uint64_t g = state_->gate_.fetch_and(~kDriving, std::memory_order_release);
  if (pending || (g & kQueued)) {
    // Under state_->mu_: the worker checks the gate and sleeps while holding it.
    std::lock_guard<std::mutex> lock(state_->mu_);
    state_->cv_.notify_one();
  }
}

// mark_broken makes the group refuse new work after `what` failed: its
// peers may be gone or out of step, and later operations would hang or mix
// up messages. The error keeps its class (NetworkError, TimeoutError, ...).
void ProcessGroup::mark_broken(std::exception_ptr error, const std::string& what) {
  if (state_->broken_) return;
  // The group's later calls fail with the kind of the failure that broke
  // it: a store's failure stays a StoreError; anything else that is not a
  // timeout, desync or dead peer (an unsupported call found while running)
  // is a BackendError, not a "network" error.
  StatusCode code = StatusCode::kBackendError;
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    code = StatusCode::kTimeout;
    message = e.what();
  } catch (const DesyncError& e) {
    code = StatusCode::kDesync;
    message = e.what();
  } catch (const NetworkError& e) {
    code = StatusCode::kNetworkError;
    message = e.what();
  } catch (const StoreError& e) {
    code = StatusCode::kStoreError;
    message = e.what();
  } catch (const std::exception& e) {  // an InvalidArgument found while running, too
    message = e.what();
  }
  state_->broken_ =
      status_exception(Status(code, "group " + state_->name_ + " can no longer be used because " + what +
                                        " failed (create a new group): " + message));
}

void ProcessGroup::abort(const std::string& reason) {
  if (!is_member()) return;
  const Status status(StatusCode::kNetworkError, "group " + state_->name_ + " was aborted: " + reason);
  {
    std::lock_guard<std::mutex> lock(state_->abort_mu_);
    if (!state_->abort_error_) state_->abort_error_ = status_exception(status);
  }
  state_->aborted_.store(true, std::memory_order_release);
  state_->backend_->abort(status);
}

std::exception_ptr ProcessGroup::refusal() {
  // An operation that needs nothing of the transport (a shared-memory
  // collective whose peers all arrive) would not see the backend's abort:
  // the driving thread takes it in here, before running anything.
  if (!state_->broken_ && state_->aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(state_->abort_mu_);
    state_->broken_ = state_->abort_error_;
  }
  return state_->broken_;
}

std::vector<int> ProcessGroup::lost_ranks() const {
  if (!is_member()) return {};
  return state_->backend_->lost_peers();
}

std::shared_ptr<SymmetricMemory> ProcessGroup::alloc_symmetric(size_t bytes,
                                                               std::chrono::milliseconds timeout) {
  if (!is_member()) {
    throw InvalidArgument("alloc_symmetric: this rank is not a member of group " + state_->name_ +
                          " (its handle came from new_group on a rank outside it)");
  }
  const uint64_t id = ++state_->symmetric_allocations_;
  const auto limit = timeout.count() > 0 ? timeout : state_->timeout_;
  auto block = state_->backend_->alloc_symmetric(state_->store_.get(), id, bytes, Deadline::after(limit));
  if (!block.ok()) {
    throw_status(Status(block.status().code(), "alloc_symmetric #" + std::to_string(id) + " of " +
                                                   std::to_string(bytes) + " bytes on group " +
                                                   state_->name_ + ": " + block.status().message()));
  }
  return std::move(block.value());
}

bool ProcessGroup::can_shrink() const {
  if (!is_member()) return false;
  return state_->backend_->can_shrink() && state_->store_ != nullptr;
}

}  // namespace cohort
