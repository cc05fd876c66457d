#include "launcher/dynamic_rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "cohort/errors.h"
#include "common/logging.h"
#include "common/socket.h"

namespace cohort::launcher {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

DynamicRendezvous::DynamicRendezvous(RendezvousBackend& backend, const LaunchConfig& config,
                                     std::string run_id, std::string node_id)
    : backend_(backend),
      config_(config),
      run_id_(std::move(run_id)),
      node_id_(std::move(node_id)),
      join_timeout_(conf_seconds(config, "join_timeout", std::chrono::seconds(600))),
      last_call_timeout_(conf_seconds(config, "last_call_timeout", std::chrono::seconds(30))),
      close_timeout_(conf_seconds(config, "close_timeout", std::chrono::seconds(30))) {}

int DynamicRendezvous::current_round() {
  std::optional<std::string> now;
  backend_.compare_set(key("round"), std::nullopt, "0", &now);
  return std::atoi(now.value_or("0").c_str());
}

RoundState DynamicRendezvous::read_round(int round) {
  RoundState fresh;
  std::optional<std::string> now;
  backend_.compare_set(key("round/" + std::to_string(round)), std::nullopt, fresh.encode(), &now);
  return RoundState::decode(now.value_or(fresh.encode()));
}

void DynamicRendezvous::open_next(int after_round, bool failure) {
  RoundState prev = read_round(after_round);
  RoundState next;
  next.restarts = prev.restarts + (failure ? 1 : 0);
  // The state first, then the number: a node that sees the new number
  // finds its state. If two nodes race, the first state written stands.
  backend_.compare_set(key("round/" + std::to_string(after_round + 1)), std::nullopt, next.encode());
  backend_.compare_set(key("round"), std::to_string(after_round), std::to_string(after_round + 1));
}

RoundAssignment DynamicRendezvous::join(const std::function<bool()>& interrupted) {
  const auto deadline = Steady::now() + join_timeout_;
  const milliseconds poll = std::min(config_.monitor_interval, milliseconds(100));
  for (;;) {
    if (Steady::now() >= deadline) {
      throw TimeoutError("rendezvous '" + run_id_ + "' on " + backend_.describe() +
                         ": no round closed with this node within join_timeout (" +
                         std::to_string(join_timeout_.count() / 1000) + " s); --nnodes " +
                         std::to_string(config_.min_nodes) + ":" + std::to_string(config_.max_nodes));
    }
    if (interrupted && interrupted()) throw Error("interrupted while waiting for the rendezvous");
    if (auto failed = job_failure()) throw Error("the job failed already:\n" + *failed);
    const int round = current_round();
    const std::string state_key = key("round/" + std::to_string(round));
    auto text = backend_.get(state_key);
    if (!text) {  // the number moved before its state was written
      read_round(round);
      continue;
    }
    RoundState state = RoundState::decode(*text);
    const int me = state.index_of(node_id_);
    if (state.closed) {
      if (me >= 0) return assignment(round, state);
      // Closed without us: a round with room opens the next one (the nodes
      // in it restart, as torch's waiting nodes make them); a full one we
      // wait out.
      if (static_cast<int>(state.participants.size()) < config_.max_nodes) {
        COHORT_LOG(kInfo) << "rendezvous: round " << round << " is closed; asking for round " << round + 1;
        open_next(round, false);
      } else {
        std::this_thread::sleep_for(poll);
      }
      continue;
    }
    RoundState next = state;
    if (me < 0) next.participants.emplace_back(node_id_, config_.nproc_per_node);
    const int n = static_cast<int>(next.participants.size());
    if (n >= config_.max_nodes) {
      next.closed = true;
    } else if (n >= config_.min_nodes) {
      if (next.last_call_ms == 0) next.last_call_ms = unix_ms() + last_call_timeout_.count();
      if (unix_ms() >= next.last_call_ms) next.closed = true;
    }
    if (next.encode() != state.encode()) {
      backend_.compare_set(state_key, *text, next.encode());
      continue;  // read back whatever won
    }
    std::this_thread::sleep_for(poll);
  }
}

RoundAssignment DynamicRendezvous::assignment(int round, const RoundState& state) {
  RoundAssignment a;
  a.round = round;
  a.group_rank = state.index_of(node_id_);
  a.group_world_size = static_cast<int>(state.participants.size());
  a.restart_count = state.restarts;
  a.world_size = 0;
  for (size_t i = 0; i < state.participants.size(); ++i) {
    if (static_cast<int>(i) < a.group_rank) a.rank_offset += state.participants[i].second;
    a.world_size += state.participants[i].second;
  }
  const std::string master_key = key("round/" + std::to_string(round) + "/master");
  if (a.group_rank == 0) {
    std::string host = config_.local_addr;
    if (host.empty()) {
      std::string endpoint_host;
      int ignored = 0;
      split_endpoint(config_.rdzv_endpoint, 0, &endpoint_host, &ignored);
      host = route_address(endpoint_host);
    }
    backend_.compare_set(master_key, std::nullopt, host + " " + std::to_string(free_port()));
  }
  auto master =
      backend_.wait_while(master_key, std::nullopt, Steady::now() + close_timeout_, milliseconds(20));
  if (!master) {
    throw TimeoutError("rendezvous round " + std::to_string(round) +
                       ": node 0 published no master address within close_timeout");
  }
  auto space = master->find(' ');
  a.master_addr = master->substr(0, space);
  a.master_port = std::atoi(master->c_str() + space + 1);
  my_round_ = round;
  group_world_size_ = a.group_world_size;
  COHORT_LOG(kInfo) << "rendezvous round " << round << ": node " << a.group_rank << " of "
                    << a.group_world_size << ", ranks " << a.rank_offset << ".."
                    << a.rank_offset + config_.nproc_per_node - 1 << " of " << a.world_size;
  return a;
}

bool DynamicRendezvous::round_moved() {
  return current_round() != my_round_;
}

bool DynamicRendezvous::restart_after_failure() {
  RoundState state = read_round(my_round_);
  if (state.restarts >= config_.max_restarts) return false;
  open_next(my_round_, true);
  return true;
}

void DynamicRendezvous::fail_job(const std::string& summary) {
  backend_.compare_set(key("failed"), std::nullopt, summary);
}

std::optional<std::string> DynamicRendezvous::job_failure() {
  return backend_.get(key("failed"));
}

void DynamicRendezvous::finish(bool wait_for_all) {
  const std::string prefix = "round/" + std::to_string(my_round_) + "/done/";
  backend_.set(key(prefix + node_id_), "1");
  if (!wait_for_all) return;
  const auto deadline = Steady::now() + close_timeout_;
  auto state = read_round(my_round_);
  for (const auto& p : state.participants) {
    while (!backend_.get(key(prefix + p.first)) && Steady::now() < deadline && !round_moved())
      std::this_thread::sleep_for(milliseconds(50));
  }
}

std::string route_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string out = "127.0.0.1";
  // A UDP connect sends nothing; it only picks the route and so our address.
  int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) ==
            0) {
      out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return out;
}

int free_port() {
  const uint16_t port = port_to_bind_later();
  if (port == 0) throw NetworkError("cohortrun: no TCP port is free on this host for the job's store");
  return port;
}

}  // namespace cohort::launcher
