// join.h: training with uneven inputs (torch.distributed.algorithms.Join).
//
// When ranks have different numbers of batches, a rank that runs out would
// leave the others waiting in their next collective. Inside a Join, a rank
// that has finished its loop "shadows" the collectives the others still
// run, until every rank has finished:
//
//   cohort::Join join({&ddp});
//   for (auto& batch : my_batches) { ... ddp.forward(x) ... backward ... }
//   join.finish();   // also run by the destructor when no exception is in flight
//
// Each Joinable (DistributedDataParallel is one) says how to shadow one
// iteration (main hook) and what to do once all ranks are done (post hook).
// The protocol is torch's: every iteration, each rank still training
// all_reduces a 1 on the first joinable's group; joined ranks all_reduce a
// 0 and run the main hooks while the sum is non-zero.
#pragma once

#include <memory>
#include <vector>

#include "cohort/process_group.h"

namespace cohort {

// Joinable is something whose collectives a joined rank can shadow.
class Joinable {
 public:
  virtual ~Joinable() = default;
  // join_main_hook runs, on a rank that has joined, the collectives one
  // iteration of a rank still training runs, with neutral inputs.
  virtual void join_main_hook() = 0;
  // join_post_hook runs once every rank has joined; is_last_joiner is true
  // on the ranks that joined last (they hold the final state).
  virtual void join_post_hook(bool is_last_joiner) = 0;
  // join_process_group is the group the joining protocol runs on.
  virtual std::shared_ptr<ProcessGroup> join_process_group() = 0;
};

// Join is the context of a loop with uneven inputs; one per thread at a time.
class Join {
 public:
  // Join makes this the thread's current context. With enable=false it
  // does nothing (so code can be written once for even and uneven inputs).
  explicit Join(std::vector<Joinable*> joinables, bool enable = true);
  // ~Join finishes the protocol if finish() was not called and no exception
  // is in flight (then it only clears the context).
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // finish shadows the other ranks until all have joined, then runs the
  // post hooks. Call it after this rank's last iteration.
  void finish();

  // notify_join_context is called by a joinable at the start of each
  // iteration on a rank still training; it is a no-op outside a Join.
  // Returns true when a Join is active (the joinable then runs its own
  // per-iteration agreement, which its main hook mirrors).
  static bool notify_join_context(Joinable& joinable);

 private:
  std::vector<Joinable*> joinables_;
  bool enabled_;
  bool finished_ = false;
  Join* previous_ = nullptr;
};

}  // namespace cohort
