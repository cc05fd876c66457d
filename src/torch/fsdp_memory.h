// fsdp_memory.h: the memory of FSDP's gathered parameters and reduced
// gradients (fsdp.cc).
//
// A unit gives its whole parameters back when it reshards and takes them
// again for backward and the next step: tens of MB a step for a model of
// a few million parameters. Taken from malloc, whose trimming hands large
// freed blocks back to the system, every 4 KiB page of them came back as
// a page fault and the zeroing of the page, which cost more than the
// step's copies. So blocks of 2 MiB and more are mapped on their own, in
// transparent huge pages where the system offers them (madvise), and
// blocks freed within a step are kept for the next use of their kind
// instead of being unmapped (a block taken again costs no fault and no
// zeroing):
//  - whole parameters a unit gave back: at most kKeptBlocks, the size of
//    the prefetch window, for backward's gathers;
//  - reduced gradients the optimizer let go (zero_grad): every one, for
//    the next backward's reductions, which make gradients of the same
//    sizes. A pool of them never holds more than the gradients it
//    replaced.
// Every kept block is unmapped when a backward ends, so between steps
// FSDP holds no whole parameter, and no gradient memory beyond what the
// last zero_grad let go (when zero_grad comes after the step, that memory
// stays mapped until the next backward ends or a unit is destroyed).
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>

namespace cohort::fsdp_memory {

// At most this many given-back whole parameters are kept for reuse.
constexpr size_t kKeptBlocks = 2;

// What a block holds, which decides what happens to it when freed.
enum class Use {
  kWholeParameter,   // kept, up to kKeptBlocks, for the next gather
  kReducedGradient,  // kept for the next reduction
  kOwn,              // unmapped
};

// allocate returns `bytes` of memory for `use`: blocks of 2 MiB and more
// are mappings of their own, taken from the kept blocks of that use when
// one holds `bytes`; smaller ones come from the CPU allocator.
c10::DataPtr allocate(size_t bytes, Use use);

// release_kept unmaps every kept block (at the end of a backward).
void release_kept();

// kept_bytes: what the kept blocks map now (tests).
size_t kept_bytes();

}  // namespace cohort::fsdp_memory
