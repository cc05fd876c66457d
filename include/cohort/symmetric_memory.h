// symmetric_memory.h: memory that the ranks of a group on one host read in
// place, so that collectives on it copy nothing twice.
//
// ProcessGroup::alloc_symmetric gives every rank a block of the same size.
// With cohort's own backend, where ranks share a host, the blocks are one
// shared-memory segment that every rank there maps; a collective whose
// buffers lie in such blocks (at the same offset on every rank, or not:
// each rank says where its own is) reads and reduces the other ranks' data
// with plain loads, without the system call and page pinning that reading
// another process's ordinary memory costs (process_vm_readv). DDP puts its
// gradient buckets there. This is the CPU counterpart of torch's symmetric
// memory and of NCCL's registered user buffers. Elsewhere (another backend,
// ranks on different hosts, shared memory off) the block is ordinary memory
// and every collective works on it as on any buffer.
#pragma once

#include <cstddef>
#include <functional>

#include "cohort/types.h"

namespace cohort {

// SymmetricMemory is this rank's block of one collective allocation. It
// owns the mapping: the block is valid until the last reference goes. It may
// outlive its group (it is then ordinary memory to whatever uses it).
class SymmetricMemory {
 public:
  // Made by the backends; `release` runs once, when this object goes.
  SymmetricMemory(void* data, size_t bytes, bool shared, std::function<void()> release);
  ~SymmetricMemory();
  SymmetricMemory(const SymmetricMemory&) = delete;
  SymmetricMemory& operator=(const SymmetricMemory&) = delete;

  // data is this rank's block: bytes() long, page-aligned, zero-filled
  // when allocated.
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // shared is true when the group's other ranks on this host map the block,
  // so that collectives on it read it in place.
  bool shared() const { return shared_; }
  // buffer views `count` elements of `dtype` at `offset_bytes` into the
  // block; throws InvalidArgument when they do not fit.
  Buffer buffer(DType dtype, size_t count, size_t offset_bytes = 0) const;

 private:
  void* data_;
  size_t bytes_;
  bool shared_;
  std::function<void()> release_;
};

}  // namespace cohort
