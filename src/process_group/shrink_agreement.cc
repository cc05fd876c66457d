// The survivors' agreement of shrink_group (shrink_agreement.h).
#include "process_group/shrink_agreement.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>

#include "cohort/errors.h"
#include "common/logging.h"
#include "common/rank_list.h"

namespace cohort {
namespace {

// How often a survivor looks at the arrivals while it waits: a shrink
// follows a failure, so a few store round trips per 10 ms cost nothing.
constexpr std::chrono::milliseconds kPollInterval{10};

int parse_rank(const std::string& text, const std::string& record) {
  int value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw InvalidArgument("shrink_group: malformed survivor record '" + record + "' in the store");
  }
  return value;
}

// join_ranks writes "0,1,3"; parse_ranks reads it back (`record` names
// the text in errors).
std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

std::vector<int> parse_ranks(const std::string& text, const std::string& record) {
  std::vector<int> ranks;
  size_t p = 0;
  while (p < text.size()) {
    size_t comma = text.find(',', p);
    if (comma == std::string::npos) comma = text.size();
    ranks.push_back(parse_rank(text.substr(p, comma - p), record));
    p = comma + 1;
  }
  return ranks;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

std::string encode_vote(const SurvivorVote& vote) {
  return std::to_string(vote.rank) + ":" + join_ranks(vote.suspects) + ";";
}

std::vector<SurvivorVote> parse_votes(const std::string& text) {
  std::vector<SurvivorVote> votes;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find(';', start);
    if (end == std::string::npos) {
      throw InvalidArgument("shrink_group: unterminated survivor record '" + text.substr(start) +
                            "' in the store");
    }
    const std::string record = text.substr(start, end - start);
    const size_t colon = record.find(':');
    if (colon == std::string::npos) {
      throw InvalidArgument("shrink_group: malformed survivor record '" + record + "' in the store");
    }
    votes.push_back(SurvivorVote{parse_rank(record.substr(0, colon), record),
                                 parse_ranks(record.substr(colon + 1), record)});
    start = end + 1;
  }
  return votes;
}

bool may_decide(const std::vector<SurvivorVote>& votes, const std::vector<int>& excluded, int size) {
  std::set<int> accounted(excluded.begin(), excluded.end());
  for (const auto& v : votes) {
    accounted.insert(v.rank);
    accounted.insert(v.suspects.begin(), v.suspects.end());
  }
  for (int r = 0; r < size; ++r) {
    if (!accounted.count(r)) return false;
  }
  return true;
}

std::vector<int> members_of(const std::vector<SurvivorVote>& votes, const std::vector<int>& excluded) {
  std::set<int> members;
  for (const auto& v : votes) {
    if (!contains(excluded, v.rank)) members.insert(v.rank);
  }
  return std::vector<int>(members.begin(), members.end());
}

std::vector<int> agree_on_survivors(Store& store, const std::string& key_prefix, const SurvivorVote& vote,
                                    int size, const std::vector<int>& excluded,
                                    const AgreementOptions& options, const std::string& what) {
  const std::string arrivals_key = key_prefix + "arrivals";
  const std::string members_key = key_prefix + "members";
  store.append(arrivals_key, to_bytes(encode_vote(vote)));
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.timeout;
  auto decide_at = std::chrono::steady_clock::time_point::max();
  while (!store.check({members_key})) {
    const auto votes = parse_votes(to_string(store.get(arrivals_key)));
    const auto now = std::chrono::steady_clock::now();
    if (decide_at == std::chrono::steady_clock::time_point::max() && may_decide(votes, excluded, size)) {
      decide_at = now + options.grace;
    }
    if (now >= decide_at || now >= deadline) {
      // Read once more: a late survivor may have arrived during the grace.
      const auto final_votes = parse_votes(to_string(store.get(arrivals_key)));
      const std::vector<int> members = members_of(final_votes, excluded);
      if (now >= deadline && now < decide_at) {
        COHORT_LOG(kWarning) << what << ": ranks still unaccounted for after " << options.timeout.count()
                             << " ms; shrinking to the ranks that arrived, " << rank_list(members);
      }
      store.compare_set(members_key, {}, to_bytes(join_ranks(members)));
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  // Whoever's compare_set came first fixed the list; everyone reads it.
  const std::string agreed = to_string(store.get(members_key));
  const std::vector<int> members = parse_ranks(agreed, agreed);
  if (!contains(members, vote.rank)) {
    throw NetworkError(what + ": this rank (" + std::to_string(vote.rank) +
                       ") is not among the survivors agreed on, " + rank_list(members) +
                       ": it arrived after they were fixed");
  }
  COHORT_LOG(kInfo) << what << ": survivors " << rank_list(members) << " agreed in "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count()
                    << " ms";
  return members;
}

}  // namespace cohort
