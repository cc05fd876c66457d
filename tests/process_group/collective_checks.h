// collective_checks.h: the collective matrix's checks, one function per
// behaviour, each run on every rank of a group (of any backend) and
// checking that rank's results against reference.h with gtest assertions.
#pragma once

#include <string>
#include <vector>

#include "cohort/process_group.h"

namespace cohort::testing {

void check_all_reduce_every_dtype_op_and_size(ProcessGroup& g);
void check_reduce_every_dtype_op_and_size(ProcessGroup& g);
void check_all_reduce_coalesced_with_splits_that_differ_by_rank(ProcessGroup& g);
void check_reduce_scatter_every_dtype_op_and_size(ProcessGroup& g);
void check_broadcast_from_every_root(ProcessGroup& g);
void check_all_gather_uneven_and_into_one_tensor(ProcessGroup& g);
void check_gather_and_scatter_at_every_root(ProcessGroup& g);
void check_reduce_scatter_uneven_blocks(ProcessGroup& g);
void check_reduce_scatter_tensor_in_place(ProcessGroup& g);
void check_all_to_all_uneven_splits(ProcessGroup& g);
// Equal blocks (all_to_all_single without splits, and the list form) of 1,
// 7 and 1000 elements, int32, float64 and uint8.
void check_all_to_all_even_splits(ProcessGroup& g);
void check_barrier_and_async_work_in_order(ProcessGroup& g);
void check_point_to_point_ring_and_any_source(ProcessGroup& g);
void check_isend_moves_while_sender_waits_in_collective(ProcessGroup& g);

// CollectiveCheck names one check for a test's name; `min_world` is the
// smallest group it means something for (point-to-point needs two ranks).
struct CollectiveCheck {
  std::string name;
  void (*run)(ProcessGroup& g);
  int min_world;
};

// collective_checks lists every check above, in a fixed order (every rank
// of an MPI job runs them in the same order).
const std::vector<CollectiveCheck>& collective_checks();

}  // namespace cohort::testing
