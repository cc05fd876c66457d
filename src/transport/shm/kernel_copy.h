// kernel_copy.h: how fast this machine's kernel copies between processes
// (process_vm_readv) against a plain memcpy, measured once per process.
//
// Whether one copy by the kernel beats two through shared memory depends
// on the machine: on one AMD EPYC VM the kernel copied at ~5 GB/s and the
// slots won at every size; on an Intel Xeon VM it copies at 0.6 of
// memcpy's speed and reading a peer's buffer in place made a 2-rank
// all_gather of 32 KiB per rank 2x faster. So the arena asks (arena.cc).
#pragma once

namespace cohort::shm {

// kernel_copy_speed returns the kernel's copy bandwidth over memcpy's for
// kKernelCopyProbeBytes held in cache (the best of several tries of each,
// so that a preempted try does not count), measured on the first call;
// 0 when this process may not use process_vm_readv.
double kernel_copy_speed();

inline constexpr unsigned long kKernelCopyProbeBytes = 256ul << 10;

// From this speed up, single-copy reads pay: 0.55-0.6 where they won by up
// to 2x; the machine where they lost copied at ~5 GB/s, a fraction of
// its memcpy.
inline constexpr double kKernelCopyMinSpeed = 0.4;

}  // namespace cohort::shm
