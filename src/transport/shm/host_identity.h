// host_identity.h: deciding which ranks can share memory.
//
// Two ranks may talk through shared memory exactly when what the transport
// relies on is common to both, whatever else differs:
//   - the same kernel (boot id), so that one physical memory backs a segment;
//   - the same /dev/shm (its file system's device and the directory's inode),
//     where segments are made and opened by name (as NCCL compares the shm
//     device): containers or namespaces that mount their own /dev/shm never
//     meet there;
//   - the same pid namespace, since a rank sees a dead peer by its pid.
// The host name, the IPC and mount namespaces do not matter: ranks started
// apart on one host (each by its own `ip netns exec`, or in containers that
// share /dev/shm and pids) share memory and the hierarchy.
#pragma once

#include <string>

namespace cohort::shm {

// host_identity is a string equal for two processes exactly when they may
// share memory segments by name.
std::string host_identity();
// boot_id is the kernel's boot id ("?" when unreadable): one per machine,
// whatever the namespaces (rank_place.h counts a machine's CPUs by it).
std::string boot_id();

}  // namespace cohort::shm
