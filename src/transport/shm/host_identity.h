// host_identity.h: deciding which ranks can share memory.
//
// Two ranks may talk through /dev/shm only if they run on the same kernel
// (boot id), see the same host name, and share the IPC, mount and pid
// namespaces: two containers on one host differ in at least one of those,
// so they are never mistaken for one host and fall back to TCP.
#pragma once

#include <string>

namespace cohort::shm {

// host_identity is a string equal for two processes exactly when they may
// share memory segments by name.
std::string host_identity();

}  // namespace cohort::shm
