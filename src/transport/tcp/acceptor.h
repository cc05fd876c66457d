// acceptor.h (tcp): where the peers of a lazy group connect to this rank.
//
// It accepts connections on the rank's listener, reads each caller's hello
// (hello.h) and answers it: kWelcome hands the connection to the caller's
// link; kUseYours when this rank already called that peer and, being the
// lower rank, keeps its own connection; kRefused, with why, to a process
// that is no peer of this group (it is logged, and this rank goes on
// waiting for its real peer). Each pair thus ends with exactly one
// connection, and no message is sent before both sides agreed on it.
#pragma once

#include <memory>
#include <vector>

#include "common/socket.h"
#include "transport/link.h"
#include "transport/tcp/hello.h"
#include "transport/tcp/link.h"

namespace cohort::tcp {

class TcpAcceptor : public Acceptor {
 public:
  // links[q] is peer q's link (null for this rank), owned by the engine,
  // which destroys the acceptor first.
  TcpAcceptor(int rank, Socket listener, std::vector<TcpLink*> links,
              std::shared_ptr<const GroupCredentials> credentials);

  void watch(std::vector<pollfd>& fds) override;
  Status on_ready(const pollfd* fds, size_t n, std::vector<int>* became_ready) override;

 private:
  // A connection accepted from a peer that has not said who it is yet.
  struct Handshake {
    Socket socket;
    std::vector<uint8_t> hello;  // as received so far
  };

  Status accept_all();
  // read_handshake reads more of handshake `index`'s hello and, once it is
  // whole, answers it.
  Status read_handshake(size_t index, std::vector<int>* became_ready);

  const int rank_;
  Socket listener_;
  std::vector<TcpLink*> links_;
  std::shared_ptr<const GroupCredentials> credentials_;
  std::vector<Handshake> handshakes_;
  std::vector<size_t> ready_handshakes_;  // reused between calls
};

}  // namespace cohort::tcp
