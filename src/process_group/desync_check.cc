#include "process_group/desync_check.h"

#include <algorithm>
#include <cstring>

#include "cohort/errors.h"
#include "cohort/store.h"
#include "common/debug_level.h"
#include "common/logging.h"

namespace cohort {
namespace {

std::string fingerprint_key(uint64_t sequence, int rank) {
  return "desync/" + std::to_string(sequence) + "/" + std::to_string(rank);
}

}  // namespace

std::unique_ptr<DesyncCheck> DesyncCheck::make(Backend& backend, int rank, int size, const std::string& group,
                                               std::shared_ptr<Store> store) {
  if (debug_level() != DebugLevel::kDetail || size < 2) return nullptr;
  if (backend.has_fingerprint_exchange()) store = nullptr;
  if (!backend.has_fingerprint_exchange() && !store) {
    COHORT_LOG(kWarning) << "COHORT_DEBUG=detail: group " << group << " is not checked: backend "
                         << backend.name() << " cannot exchange fingerprints and the group has no store";
    return nullptr;
  }
  return std::unique_ptr<DesyncCheck>(new DesyncCheck(backend, rank, size, group, std::move(store)));
}

DesyncCheck::DesyncCheck(Backend& backend, int rank, int size, std::string group,
                         std::shared_ptr<Store> store)
    : backend_(backend),
      rank_(rank),
      size_(size),
      group_(std::move(group)),
      store_(std::move(store)),
      all_(static_cast<size_t>(size)),
      arrived_(static_cast<size_t>(size)) {}

Status DesyncCheck::check(Fingerprint mine, const OpContext& op) {
  mine.sequence = op.sequence;
  std::fill(arrived_.begin(), arrived_.end(), uint8_t{0});
  std::fill(all_.begin(), all_.end(), Fingerprint());
  all_[rank_] = mine;
  arrived_[rank_] = 1;
  Status st = store_ ? exchange_through_store(op)
                     : backend_.exchange_fingerprints(&all_[rank_], sizeof(Fingerprint), all_.data(),
                                                      arrived_.data(), op);
  // A timeout means some rank never sent its fingerprint of #n: a rank
  // that called one collective fewer (or is stuck). Anything else (a dead
  // peer, abort) says more as it is.
  if (!st.ok() && st.code() != StatusCode::kTimeout) return st;
  bool everyone = true;
  for (uint8_t a : arrived_) everyone = everyone && a;
  if (!st.ok() && everyone) return st;
  if (everyone && fingerprints_agree(all_.data(), size_)) {
    last_ = mine;
    has_last_ = true;
    return Status::ok_status();
  }
  return Status(StatusCode::kDesync, mismatch_report(op.sequence, group_, all_.data(), arrived_.data(), size_,
                                                     has_last_ ? &last_ : nullptr));
}

Status DesyncCheck::exchange_through_store(const OpContext& op) {
  std::vector<std::string> keys;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) keys.push_back(fingerprint_key(op.sequence, q));
  }
  try {
    const auto* mine = reinterpret_cast<const uint8_t*>(&all_[rank_]);
    store_->set(fingerprint_key(op.sequence, rank_), Bytes(mine, mine + sizeof(Fingerprint)));
    if (op.sequence > 2) store_->delete_key(fingerprint_key(op.sequence - 2, rank_));
    const auto left = op.deadline.as_timeout();
    Status waited;
    try {
      store_->wait(keys, left);
    } catch (const TimeoutError& e) {
      waited = timeout_error(*op.what + ": " + e.what());
    }
    // After a timeout, take what came, one key at a time.
    std::vector<Bytes> values = waited.ok() ? store_->multi_get(keys) : std::vector<Bytes>(keys.size());
    for (int q = 0, i = 0; q < size_; ++q) {
      if (q == rank_) continue;
      Bytes& value = values[static_cast<size_t>(i++)];
      if (!waited.ok()) {
        if (!store_->check({fingerprint_key(op.sequence, q)})) continue;
        value = store_->get(fingerprint_key(op.sequence, q));
      }
      if (value.size() != sizeof(Fingerprint)) {
        return Status(StatusCode::kDesync, *op.what + ": rank " + std::to_string(q) + "'s fingerprint has " +
                                               std::to_string(value.size()) + " bytes, not " +
                                               std::to_string(sizeof(Fingerprint)) +
                                               " (a different cohort build?)");
      }
      std::memcpy(&all_[q], value.data(), sizeof(Fingerprint));
      arrived_[q] = 1;
    }
    return waited;
  } catch (const Error& e) {
    return store_error(*op.what + ": exchanging fingerprints through the store failed: " + e.what());
  }
}

}  // namespace cohort
