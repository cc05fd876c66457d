#include "transport/tcp/link_kind.h"

namespace cohort::tcp {
namespace {

class TcpLinkKind : public LinkKind {
 public:
  TcpLinkKind(Mesh mesh, bool lazy) : mesh_(std::move(mesh)), lazy_(lazy) {}

  const char* name() const override { return "TCP"; }
  Status set_up(const GroupMeeting&, ConnectedLinks&) override { return Status::ok_status(); }
  bool can_connect(int) const override { return true; }

  Status connect(const GroupMeeting& meeting, const std::vector<bool>& mine, ConnectedLinks& group) override {
    mesh_.wanted = mine;
    Status connected = connect_wanted(mesh_, meeting.rank, meeting.deadline, lazy_);
    if (!connected.ok()) return connected;
    TcpLinks links = make_links(std::move(mesh_), meeting.rank);
    for (size_t q = 0; q < mine.size(); ++q) {
      if (mine[q]) group.links[q] = std::move(links.links[q]);
    }
    group.acceptor = std::move(links.acceptor);
    return Status::ok_status();
  }

 private:
  Mesh mesh_;
  bool lazy_;
};

}  // namespace

std::unique_ptr<LinkKind> tcp_link_kind(Mesh mesh, bool lazy) {
  return std::make_unique<TcpLinkKind>(std::move(mesh), lazy);
}

}  // namespace cohort::tcp
