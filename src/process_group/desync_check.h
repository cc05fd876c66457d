// desync_check.h: COHORT_DEBUG=detail's check that the ranks of a group
// call the same collective, before it runs.
//
// Before collective #n, every rank gives the others its Fingerprint of #n
// and compares them all. Where they differ, every rank returns the same
// DesyncError listing what each rank called; where some rank sends none by
// the operation's deadline (it called one collective fewer, or is stuck),
// the ranks that did return a DesyncError naming it, with the call all
// ranks agreed on before (#n-1). The exchange runs through the backend's
// own messages (native, MPI), or through the group's store (NCCL).
//
// Cost: one exchange of 40 bytes per rank pair per collective; none when
// COHORT_DEBUG is not detail (the group then has no DesyncCheck).
// Threading: used only by the thread driving the group's backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "diagnostics/fingerprint.h"
#include "process_group/backend.h"

namespace cohort {

class Store;

class DesyncCheck {
 public:
  // make returns the group's check when COHORT_DEBUG is detail and the
  // group has more than one rank; null otherwise. `store` is the group's
  // (for backends without a fingerprint exchange); without either, the
  // group is not checked, and a warning says so.
  static std::unique_ptr<DesyncCheck> make(Backend& backend, int rank, int size, const std::string& group,
                                           std::shared_ptr<Store> store);

  // check compares this rank's call `mine` of collective op.sequence with
  // the other ranks'. ok when they agree; kDesync with the report when they
  // differ or some rank sent none by op.deadline; any other error of the
  // exchange (a dead peer, abort) as it came.
  Status check(Fingerprint mine, const OpContext& op);

  // through_store says how fingerprints travel (for the info log).
  bool through_store() const { return store_ != nullptr; }

 private:
  DesyncCheck(Backend& backend, int rank, int size, std::string group, std::shared_ptr<Store> store);
  // exchange_through_store: each rank sets desync/<n>/<rank> and waits for
  // the others' keys; it deletes its key of #n-2, which every rank has read
  // by the time any rank reaches #n.
  Status exchange_through_store(const OpContext& op);

  Backend& backend_;
  const int rank_;
  const int size_;
  const std::string group_;
  const std::shared_ptr<Store> store_;  // null: the backend's exchange
  std::vector<Fingerprint> all_;        // collective #n's, rank q's at q
  std::vector<uint8_t> arrived_;        // 1 where all_[q] came
  Fingerprint last_;                    // the last call every rank agreed on
  bool has_last_ = false;
};

}  // namespace cohort
