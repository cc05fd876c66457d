#include "diagnostics/fingerprint.h"

#include <cstring>

namespace cohort {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

// hash_counts hashes per-rank element counts (FNV-1a over their bytes); the
// result is never 0, which means "no counts".
uint64_t hash_counts(const uint64_t* counts, size_t n, size_t stride) {
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < n; ++i) {
    uint64_t c;
    std::memcpy(&c, reinterpret_cast<const uint8_t*>(counts) + i * stride, sizeof c);
    for (int b = 0; b < 8; ++b) h = (h ^ ((c >> (8 * b)) & 0xFF)) * kFnvPrime;
  }
  return h | 1;
}

const CollectiveCallInfo& info_of(uint8_t op) {
  return call_info(static_cast<CollectiveCall>(op));
}

bool is_all_to_all(uint8_t op) {
  return info_of(op).family == Collective::kAllToAll;
}

std::string elements(uint64_t n) {
  return std::to_string(n) + (n == 1 ? " element" : " elements");
}

// ranks_in_runs writes "rank 3" or "ranks 0-2,5" (runs of three or more as a range).
std::string ranks_in_runs(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ",";
    out += std::to_string(ranks[i]);
    if (j >= i + 2) {
      out += "-" + std::to_string(ranks[j]);
    } else if (j == i + 1) {
      out += "," + std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string hex(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 0xF];
  return s;
}

}  // namespace

Fingerprint& Fingerprint::with_per_rank(const std::vector<Buffer>& per_rank) {
  if (per_rank.empty()) return *this;
  std::vector<uint64_t> counts(per_rank.size());
  total = 0;
  for (size_t q = 0; q < per_rank.size(); ++q) {
    counts[q] = per_rank[q].count;
    total += per_rank[q].count;
  }
  splits = hash_counts(counts.data(), counts.size(), sizeof(uint64_t));
  return *this;
}

std::string describe(const Fingerprint& f) {
  const auto call = static_cast<CollectiveCall>(f.op);
  std::string s = info_of(f.op).name;
  if (call == CollectiveCall::kNone) return s;
  s += "(";
  if (f.dtype == Fingerprint::kNoDType) return s + ")";
  s += dtype_name(static_cast<DType>(f.dtype));
  if (is_all_to_all(f.op)) {
    s += ", " + elements(f.count) + " out, " + std::to_string(f.total) + " in";
  } else {
    s += ", " + elements(f.count);
  }
  if (f.splits != 0) s += ", " + std::to_string(f.total) + " in all";
  if (f.root >= 0) s += ", root " + std::to_string(f.root);
  if (f.reduce_op != Fingerprint::kNoReduceOp) {
    s += std::string(", ") + reduce_op_name(ReduceOp(static_cast<ReduceOp::Kind>(f.reduce_op)));
  }
  return s + ")";
}

bool fingerprints_agree(const Fingerprint* all, int size) {
  const Fingerprint& a = all[0];
  uint64_t sent = 0, received = 0;
  for (int q = 0; q < size; ++q) {
    const Fingerprint& b = all[q];
    if (b.op != a.op || b.sequence != a.sequence || b.dtype != a.dtype || b.root != a.root ||
        b.reduce_op != a.reduce_op) {
      return false;
    }
    if (info_of(a.op).fingerprint_count_agrees && b.count != a.count) return false;
    sent += b.count;
    received += b.total;
  }
  // Where per-rank counts may differ, each rank that knows them (every rank
  // of all_gather and reduce_scatter, the root of gather and scatter)
  // expects exactly the counts the ranks pass.
  const uint64_t passed = hash_counts(&all[0].count, static_cast<size_t>(size), sizeof(Fingerprint));
  for (int q = 0; q < size; ++q) {
    if (all[q].splits != 0 && all[q].splits != passed) return false;
  }
  // all_to_all: what the ranks send is what they receive, in all.
  return !is_all_to_all(a.op) || sent == received;
}

std::string mismatch_report(uint64_t sequence, const std::string& group, const Fingerprint* all,
                            const uint8_t* arrived, int size, const Fingerprint* last) {
  const std::string number = "#" + std::to_string(sequence);
  std::vector<std::string> text(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) text[q] = arrived[q] ? describe(all[q]) : std::string();
  // Exact: two different calls that read alike (per-rank counts that
  // differ in order only, say) get what tells them apart.
  for (int q = 0; q < size; ++q) {
    for (int r = 0; r < size; ++r) {
      if (q == r || !arrived[q] || !arrived[r] || std::memcmp(&all[q], &all[r], sizeof(Fingerprint)) == 0)
        continue;
      if (describe(all[q]) == describe(all[r])) {
        text[q] = describe(all[q]) + " [sequence " + std::to_string(all[q].sequence) + ", per-rank counts " +
                  hex(all[q].splits) + "]";
      }
    }
  }
  std::string missing_last;
  if (last) {
    missing_last = "#" + std::to_string(last->sequence) + ": " + describe(*last);
  }
  std::string out = "collective " + number + " of group " + group + ": ranks differ: ";
  std::vector<bool> done(static_cast<size_t>(size), false);
  bool first = true;
  for (int q = 0; q < size; ++q) {
    if (done[q]) continue;
    std::vector<int> same;
    for (int r = q; r < size; ++r) {
      if (!done[r] && arrived[r] == arrived[q] && text[r] == text[q]) {
        same.push_back(r);
        done[r] = true;
      }
    }
    out += (first ? "" : "; ") + ranks_in_runs(same) + ": ";
    first = false;
    if (arrived[q]) {
      out += text[q];
    } else {
      const char* its = same.size() == 1 ? "its" : "their";
      out += "no collective " + number + " before the timeout (" +
             (last ? std::string(its) + " last was " + missing_last : std::string("no collective before")) +
             ")";
    }
  }
  return out;
}

}  // namespace cohort
