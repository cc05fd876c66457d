// shrink_agreement.h: how the survivors of a failed group agree, through
// the group's store, on which of its ranks make up the shrunk group.
//
// Every survivor appends "rank:suspects;" to one key: the ranks it saw
// drop their connection while it was healthy (Transport::lost_peers) and
// the ones the caller excludes. Every rank that arrives is alive, so the
// members are exactly the ranks that arrived; the suspects only tell the
// survivors when they may stop waiting: once every rank of the group has
// arrived or is suspected by someone, they wait a short grace for late
// survivors (a suspect can be a survivor whose report was cut off), and
// one of them fixes the list with compare_set, which every rank then
// reads. A rank that no one suspects and that never arrives (stopped, not
// dead) is waited for until the timeout. Ranks excluded by the caller are
// left out even if they arrive.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cohort/store.h"

namespace cohort {

struct SurvivorVote {
  int rank;                   // the rank of the old group that arrived
  std::vector<int> suspects;  // ranks it believes gone
};

// encode_vote / parse_votes: the records appended to the arrivals key,
// "2:1,3;0:1;". parse_votes throws InvalidArgument naming a malformed record.
std::string encode_vote(const SurvivorVote& vote);
std::vector<SurvivorVote> parse_votes(const std::string& text);

// may_decide is true when every rank of [0, size) arrived or is suspected
// (or excluded), so that no survivor is still to be waited for.
bool may_decide(const std::vector<SurvivorVote>& votes, const std::vector<int>& excluded, int size);

// members_of lists the ranks that arrived and are not excluded, in rank order.
std::vector<int> members_of(const std::vector<SurvivorVote>& votes, const std::vector<int>& excluded);

struct AgreementOptions {
  std::chrono::milliseconds timeout{30000};  // longest wait for ranks nobody suspects
  std::chrono::milliseconds grace{250};      // wait for late survivors once every rank is accounted for
};

// agree_on_survivors runs the agreement for `vote` (this rank's) among a
// group of `size` ranks under `key_prefix` in `store`, and returns the
// agreed members (old group ranks, ascending). `what` names the group for
// errors. Throws NetworkError when this rank is not among them.
std::vector<int> agree_on_survivors(Store& store, const std::string& key_prefix, const SurvivorVote& vote,
                                    int size, const std::vector<int>& excluded,
                                    const AgreementOptions& options, const std::string& what);

}  // namespace cohort
