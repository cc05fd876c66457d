// link_kind.h (tcp): TCP as a link kind (link_kinds.h): it reaches every
// peer, so it goes last in the list and takes the peers no kind before it
// did; each of those is connected now, or on its first message when `lazy`
// (COHORT_TCP_CONNECT=lazy: link.h, acceptor.h).
#pragma once

#include <memory>

#include "transport/link_kinds.h"
#include "transport/tcp/connect.h"

namespace cohort::tcp {

// tcp_link_kind takes over `mesh`, which join_mesh made (the rank's seat
// and every address) before any kind was set up.
std::unique_ptr<LinkKind> tcp_link_kind(Mesh mesh, bool lazy);

}  // namespace cohort::tcp
