// object_collectives.h: torch.distributed's object collectives for
// serialized objects (byte strings of any length, different on every
// rank): all_gather_object, broadcast_object_list, gather_object and
// scatter_object_list, with torch's arguments and semantics. The sizes go
// first, then the bytes, padded to the largest, as torch sends them.
// libcohort_torch adds the same four for torch::IValue (cohort/tensor.h),
// serialized with torch's pickler.
//
//   std::vector<cohort::Bytes> all(cohort::get_world_size());
//   cohort::all_gather_object(all, cohort::to_bytes("rank 3's state"));
//
// Blocking, on `group` (the default group when null); src and dst are
// global ranks, as in torch. On a group this rank is not a member of they
// do nothing. They throw InvalidArgument for a list of the wrong length
// (naming both lengths) and whatever the collectives under them throw.
#pragma once

#include <vector>

#include "cohort/distributed.h"
#include "cohort/store.h"

namespace cohort {

// all_gather_object fills object_list[q] with group rank q's `obj`;
// object_list must have one entry per rank of the group.
void all_gather_object(std::vector<Bytes>& object_list, const Bytes& obj, const GroupPtr& group = nullptr);

// broadcast_object_list replaces every entry of object_list with src's;
// every rank passes a list of the same length.
void broadcast_object_list(std::vector<Bytes>& object_list, int src = 0, const GroupPtr& group = nullptr);

// gather_object sends `obj` to dst, whose object_gather_list (one entry
// per rank of the group; null on the other ranks) receives them in group
// rank order.
void gather_object(const Bytes& obj, std::vector<Bytes>* object_gather_list, int dst = 0,
                   const GroupPtr& group = nullptr);

// scatter_object_list sets scatter_object_output_list[0] (a list of at
// least one entry) to src's scatter_object_input_list[group rank], a list
// with one entry per rank of the group on src (ignored elsewhere).
void scatter_object_list(std::vector<Bytes>& scatter_object_output_list,
                         const std::vector<Bytes>& scatter_object_input_list, int src = 0,
                         const GroupPtr& group = nullptr);

}  // namespace cohort
