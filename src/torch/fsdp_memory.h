// fsdp_memory.h: the memory of FSDP's gathered parameters and reduced
// gradients (fsdp.cc).
//
// A unit gives its whole parameters back when it reshards and takes them
// again for backward and the next step: tens of MB a step for a model of
// a few million parameters. Taken from malloc, whose trimming hands large
// freed blocks back to the system, every 4 KiB page of them came back as
// a page fault and the zeroing of the page, which cost more than the
// step's copies. So blocks of 2 MiB and more are mapped on their own, in
// transparent huge pages where the system offers them (madvise), and a
// few that a unit gave back are kept for the next gather instead of being
// unmapped (a block taken again costs no fault and no zeroing): at most
// kKeptBlocks, the size of the prefetch window, and all of them unmapped
// when a backward ends, so that between steps FSDP holds no whole
// parameter.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>

namespace cohort::fsdp_memory {

// At most this many given-back blocks are kept for reuse.
constexpr size_t kKeptBlocks = 2;

// allocate returns `bytes` of memory. Blocks of 2 MiB and more are
// mappings of their own; with `reusable`, the block goes to the kept ones
// when freed (whole parameters), else it is unmapped (reduced gradients,
// which the optimizer holds).
c10::DataPtr allocate(size_t bytes, bool reusable);

// release_kept unmaps every kept block (at the end of a backward).
void release_kept();

// kept_bytes: what the kept blocks map now (tests).
size_t kept_bytes();

}  // namespace cohort::fsdp_memory
