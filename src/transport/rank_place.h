// rank_place.h: where a rank runs, as far as the group must know it: the
// machine (its kernel) and the CPUs the rank may run on, for the algorithm
// table, and the host whose memory it may share (shm/host_identity.h), for
// the shared-memory link kind.
//
// Ranks that share a machine share its CPUs even when they share no memory
// (COHORT_SHM=off, other containers or network namespaces of one kernel):
// sixteen ranks on two cores post their messages eight to a core, and a
// table that priced each rank with a core of its own chose P-1 messages a
// rank where four steps were twice as fast (issue 48). Each rank publishes
// its place with its address (tcp/connect.cc), so every rank reads the
// same places, computes the same crowding and finds the same hosts, and
// the join needs no exchange of its own for them.
#pragma once

#include <string>
#include <vector>

namespace cohort {

struct RankPlace {
  std::string machine;    // the kernel's boot id: one per machine, whatever the namespaces
  std::vector<int> cpus;  // the CPUs this rank may run on (its affinity when it joined)
  std::string host;       // shm::host_identity(): equal exactly where memory can be shared
};

// this_rank_place: the calling thread's, as text for the address record:
// "<boot id> <cpu list> <host identity>" ("1b2c... 0-3 boot=1b2c... shm=...").
std::string this_rank_place();
// parse_rank_place reads that text; a missing or unreadable part is left
// empty (a rank of unknown place crowds nobody).
RankPlace parse_rank_place(const std::string& text);

// ranks_per_cpu: the most ranks any machine of the group runs per CPU
// they may use between them (the union of their affinities), at least 1:
// the collective goes at its most crowded machine's pace. 1 when no place
// is known.
double ranks_per_cpu(const std::vector<RankPlace>& places);

// cpus_of_ranks: the CPUs `ranks` (indices into places) may use between
// them, the union of their published affinities, ascending; empty where a
// rank's are unknown. Ranks that outnumber theirs (taskset -c 0 for two of
// them; not two ranks bound to a core each) take turns on a CPU, so their
// waits on each other must yield it from the start.
std::vector<int> cpus_of_ranks(const std::vector<RankPlace>& places, const std::vector<int>& ranks);

}  // namespace cohort
