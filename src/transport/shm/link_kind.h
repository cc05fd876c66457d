// link_kind.h (shm): shared memory as a link kind (link_kinds.h): it
// reaches the group's ranks on this host (those whose host identity is
// this rank's: the same boot, /dev/shm and pid namespace), through the
// host's arena, with no connection: a doorbell and a pidfd per peer.
#pragma once

#include <memory>

#include "transport/link_kinds.h"

namespace cohort::shm {

std::unique_ptr<LinkKind> shm_link_kind();

}  // namespace cohort::shm
