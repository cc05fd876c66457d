#include "transport/shm/peer_signals.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cohort::shm {
namespace {

Status signal_error(const std::string& what, const std::string& path) {
  return Status(StatusCode::kBackendError, what + " " + path + " failed: " + std::strerror(errno));
}

bool fill_address(const std::string& path, sockaddr_un* address) {
  std::memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  if (path.size() >= sizeof address->sun_path) return false;
  std::memcpy(address->sun_path, path.c_str(), path.size() + 1);
  return true;
}

Socket datagram_socket() {
  return Socket(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

}  // namespace

PeerSignals::~PeerSignals() {
  if (!bound_path_.empty()) ::unlink(bound_path_.c_str());
}

std::string PeerSignals::doorbell_path(const std::string& segment_name, int local) {
  return "/dev/shm" + segment_name + ".bell." + std::to_string(local);
}

Status PeerSignals::bind(const std::string& path) {
  sockaddr_un address;
  if (!fill_address(path, &address)) {
    return Status(StatusCode::kBackendError, "doorbell path " + path + " is too long for a Unix socket");
  }
  doorbell_ = datagram_socket();
  if (!doorbell_.valid()) return signal_error("making the doorbell", path);
  if (::bind(doorbell_.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return signal_error("binding the doorbell", path);
  }
  bound_path_ = path;
  return Status::ok_status();
}

Status PeerSignals::connect_peers(const std::string& segment_name, int me, const std::vector<int>& pids) {
  const size_t n = pids.size();
  to_peer_.resize(n);
  death_.resize(n);
  gone_before_watched_.assign(n, false);
  for (size_t q = 0; q < n; ++q) {
    if (static_cast<int>(q) == me) continue;
    const std::string path = doorbell_path(segment_name, static_cast<int>(q));
    sockaddr_un address;
    if (!fill_address(path, &address)) {
      return Status(StatusCode::kBackendError, "doorbell path " + path + " is too long for a Unix socket");
    }
    to_peer_[q] = datagram_socket();
    if (!to_peer_[q].valid()) return signal_error("making a socket for the doorbell", path);
    if (::connect(to_peer_[q].fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      return signal_error("connecting to the doorbell", path);
    }
    // The peer said it mapped the arena, so it ran: a pid that no longer
    // exists is a peer that died since, and its link ends at once.
    const long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(pids[q]), 0);
    if (fd >= 0) {
      death_[q] = Socket(static_cast<int>(fd));
    } else if (errno == ESRCH) {
      gone_before_watched_[q] = true;
    } else {
      return Status(StatusCode::kBackendError, "watching local peer " + std::to_string(q) + " (pid " +
                                                   std::to_string(pids[q]) + ") with pidfd_open failed: " +
                                                   std::strerror(errno));
    }
  }
  return Status::ok_status();
}

void PeerSignals::forget_paths(const std::string& segment_name, int local_size) {
  for (int q = 0; q < local_size; ++q) ::unlink(doorbell_path(segment_name, q).c_str());  // ENOENT: gone already
  bound_path_.clear();
}

void PeerSignals::ring(int local) const {
  const uint8_t bell = 0;
  ssize_t ignored = ::send(to_peer_[static_cast<size_t>(local)].fd(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
}

int PeerSignals::death_fd(int local) const {
  return death_[static_cast<size_t>(local)].fd();
}

bool PeerSignals::gone_before_watched(int local) const {
  return gone_before_watched_[static_cast<size_t>(local)];
}

}  // namespace cohort::shm
