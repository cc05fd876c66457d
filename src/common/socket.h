// socket.h: TCP sockets with deadlines, for IPv4, IPv6 and host names.
//
// Every call that can block takes a Deadline and returns a Status instead of
// throwing, so that it can be used on any thread. Addresses print as
// "host:port", or "[v6addr]:port" for IPv6.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace cohort {

// Socket owns a file descriptor and closes it when destroyed.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// drain_wake_ups reads and drops every datagram waiting on socket `fd`,
// one whose datagrams only wake (a shared-memory doorbell), so that the
// next poll(2) sleeps until the next one comes.
void drain_wake_ups(int fd);

// format_address returns "host:port", bracketing IPv6 literals.
std::string format_address(const std::string& host, uint16_t port);
// split_address is its inverse: false when `address` is no "host:port"
// with a port of 1-65535.
bool split_address(const std::string& address, std::string* host, uint16_t* port);

// listen_tcp binds and listens on host:port. An empty host listens on every
// address (IPv6 dual-stack where available, else IPv4). Port 0 picks a free
// port; local_port() tells which. The socket is non-blocking.
Result<Socket> listen_tcp(const std::string& host, uint16_t port, int backlog = 65535);

// local_port returns the port a socket is bound to, or 0.
uint16_t local_port(int fd);

// port_to_bind_later is a port that can be bound now, for a server that a
// process yet to start binds (a job's store in rank 0): drawn at random
// below the kernel's ephemeral range (/proc/sys/net/ipv4/
// ip_local_port_range), so that no socket the kernel numbers itself (a
// rank's listener on port 0, a connection's own end) takes it in between,
// as an ephemeral one was taken by a rank's listener at 16 ranks. An
// ephemeral port when none below is free.
uint16_t port_to_bind_later();

// peer_address returns "addr:port" of the other end, or "the peer" once
// the connection is gone (the kernel forgets it on a reset).
std::string peer_address(int fd);

// connect_tcp connects to host:port, trying every address the name resolves
// to and retrying with growing pauses (up to COHORT_CONNECT_RETRY_MAX_MS)
// while the peer is not yet listening, until `deadline`. The socket comes
// back non-blocking with TCP_NODELAY. Fails with kTimeout naming the address
// and the last error, or kNetworkError when the name does not resolve.
Result<Socket> connect_tcp(const std::string& host, uint16_t port, Deadline deadline);

// set_nonblocking switches O_NONBLOCK on or off.
Status set_nonblocking(int fd, bool on);

// send_all writes all `n` bytes to a non-blocking socket before `deadline`.
Status send_all(int fd, const void* data, size_t n, Deadline deadline);

// recv_some waits until at least one byte is readable and reads up to `n`.
// It first polls without sleeping for up to `spin` (a reply that is a few
// microseconds away costs less than a wake-up), then sleeps in poll(2).
// Returns the count; a peer that closed is kNetworkError.
Result<size_t> recv_some(int fd, void* data, size_t n, Deadline deadline,
                         std::chrono::microseconds spin = std::chrono::microseconds(0));

// recv_all receives exactly `n` bytes (recv_some until they are in), with
// recv_some's errors.
Status recv_all(int fd, void* data, size_t n, Deadline deadline);

// raise_fd_limit raises this process's open-file limit (to 65536 when
// privileged, else to the hard limit), so that a server (or a benchmark)
// can hold thousands of connections.
void raise_fd_limit();

}  // namespace cohort
