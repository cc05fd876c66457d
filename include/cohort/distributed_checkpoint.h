// distributed_checkpoint.h: torch.distributed.checkpoint (DCP) for libtorch
// programs: every rank writes its own pieces of a state dict, and a load
// reshards them to whatever layout, mesh and world size reads them back.
//
//   auto state = cohort::dcp::sharded_state_dict(*model);   // an FSDP model's shards
//   state["step"] = cohort::dcp::Entry::integer(step);
//   cohort::dcp::save(state, "ckpt");                       // collective
//   ...                                                     // later, at any world size:
//   auto state = cohort::dcp::sharded_state_dict(*model);
//   cohort::dcp::load(state, "ckpt");                       // fills the shards in place
//
// As torch's DCP: a directory holds one data file per writing rank
// ("__<rank>_<id>.distcp") and one ".metadata" that lists, for every
// entry, its dtype, global shape and the pieces each file holds (offsets,
// sizes, byte offset). A replicated tensor is written once (by the group's
// rank 0). load reads, for each of this rank's pieces, the overlapping
// parts of the saved pieces, so a checkpoint saved at 4 ranks loads at 2
// or 3, sharded or whole.
//
// A crash during save leaves the previous checkpoint loadable: data files
// carry a fresh id, and ".metadata" (which names them) is written to a
// temporary name and renamed over the old one only once every rank's
// pieces are on disk; the previous save's files are removed after that.
// async_save copies the pieces (so training may go on changing them),
// writes them on a thread of its own, and its future is ready when this
// rank's part is done (on rank 0: the whole checkpoint).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "cohort/dtensor.h"

namespace cohort::dcp {

// Entry is one value of a state dict: a piece of a tensor, or a scalar.
struct Entry {
  enum class Kind { kTensor, kInteger, kNumber, kText };
  Kind kind = Kind::kTensor;
  // kTensor: this rank's piece `local` of a tensor of `global_shape`,
  // starting at `offsets` (one per dimension); `write` is false for a
  // copy another rank writes (replicated pieces). load fills `local`.
  at::Tensor local;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
  bool write = true;
  int64_t integer_value = 0;
  double number_value = 0;
  std::string text_value;

  // tensor: the whole tensor, the same on every rank (rank 0 writes it).
  static Entry tensor(const at::Tensor& whole);
  // dtensor: a DTensor's piece (Shard or Replicate; a Partial must be
  // reduced first). Of replicated copies, the mesh's first writes.
  static Entry dtensor(const DTensor& t);
  static Entry piece(const at::Tensor& local, std::vector<int64_t> global_shape, std::vector<int64_t> offsets,
                     bool write = true);
  static Entry integer(int64_t value);
  static Entry number(double value);
  static Entry text(std::string value);
};

using StateDict = std::map<std::string, Entry>;

// save writes `state` under `dir` (made if missing). Collective over
// `group` (default: the default group): every rank calls it with its own
// pieces; returns once the checkpoint is complete. Throws Error naming the
// file or the rank whose part is missing.
void save(const StateDict& state, const std::string& dir, const GroupPtr& group = nullptr);

// async_save is save with the writing on a thread: it returns at once
// (after agreeing on the checkpoint's id, a collective) with a future that
// holds any error.
std::future<void> async_save(const StateDict& state, const std::string& dir, const GroupPtr& group = nullptr);

// load fills every tensor entry's `local` (in place, the part that its
// offsets and shape say) and every scalar entry from the checkpoint under
// `dir`. Not collective. Throws InvalidArgument naming the entry when the
// checkpoint lacks it, has another global shape, or does not cover a piece.
void load(StateDict& state, const std::string& dir);

// sharded_state_dict is a module's parameters and buffers by name: those
// an FSDP unit shards (cohort/fsdp.h) as this rank's rows, the others as
// whole tensors. Loading into it loads the module.
StateDict sharded_state_dict(torch::nn::Module& module);

}  // namespace cohort::dcp
