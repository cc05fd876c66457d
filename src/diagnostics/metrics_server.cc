#include "diagnostics/metrics_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/config_registry.h"
#include "common/logging.h"
#include "common/socket.h"

namespace cohort {
namespace {

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Family collects one metric's samples, written under one HELP and TYPE.
struct Family {
  std::string name, type, help;
  std::vector<std::string> samples;
  void add(const std::string& labels, double value) {
    samples.push_back(name + "{" + labels + "} " + number(value));
  }
};

std::string labels(const std::string& group, int rank) {
  return "group=\"" + label_value(group) + "\",rank=\"" + std::to_string(rank) + "\"";
}

}  // namespace

std::string metrics_text(const std::vector<GroupMetrics>& groups) {
  Family collectives{"cohort_collectives_total",
                     "counter",
                     "Collectives this rank completed that every rank leaves together.",
                     {}};
  Family busy{
      "cohort_collective_seconds_total", "counter", "Time this rank spent inside those collectives.", {}};
  Family steps{"cohort_steps_per_second", "gauge", "Collectives this rank finished a second, lately.", {}};
  Family last{"cohort_straggler_last_total",
              "counter",
              "Collectives (of those the group's rank 0 joined) in which this rank arrived last.",
              {}};
  Family waited_for{"cohort_straggler_waited_for_seconds_total",
                    "counter",
                    "Time the group's other ranks spent waiting for this rank.",
                    {}};
  Family wait{
      "cohort_straggler_wait_seconds_total", "counter", "Time this rank spent waiting for others.", {}};
  Family lateness{"cohort_straggler_lateness_seconds",
                  "gauge",
                  "How late this rank was when it arrived last (its newest 128 such times).",
                  {}};
  Family straggler{"cohort_straggler_rank", "gauge", "The rank named the group's straggler; -1: none.", {}};
  Family busbw{"cohort_busbw_gbytes_per_second",
               "gauge",
               "Bus bandwidth of a collective and size class, timed by its last rank (no waiting).",
               {}};
  for (const GroupMetrics& g : groups) {
    const int rank = static_cast<int>(g.report["rank"].as_int());
    collectives.add(labels(g.group, rank), g.report["collectives"].as_double());
    busy.add(labels(g.group, rank), g.report["busy_s"].as_double());
    steps.add(labels(g.group, rank), g.report["steps_per_s"].as_double());
    const Json& summary = g.report["summary"];
    if (summary.is_null()) continue;
    const std::string group_label = "group=\"" + label_value(g.group) + "\"";
    straggler.add(group_label, summary["straggler"].as_double(-1));
    for (const Json& r : summary["ranks"].items()) {
      const std::string l = labels(g.group, static_cast<int>(r["rank"].as_int()));
      last.add(l, r["times_last"].as_double());
      waited_for.add(l, r["waited_for_s"].as_double());
      wait.add(l, r["wait_s"].as_double());
      lateness.add(l + ",quantile=\"0.5\"", r["lateness_p50_s"].as_double());
      lateness.add(l + ",quantile=\"0.9\"", r["lateness_p90_s"].as_double());
      lateness.add(l + ",quantile=\"1\"", r["lateness_max_s"].as_double());
    }
    for (const Json& o : summary["ops"].items()) {
      busbw.add(group_label + ",op=\"" + label_value(o["op"].as_string()) + "\",bytes=\"" +
                    std::to_string(o["size_class"].as_int()) + "\"",
                o["busbw_gbs"].as_double());
    }
  }
  std::string out;
  for (const Family* f :
       {&collectives, &busy, &steps, &last, &waited_for, &wait, &lateness, &straggler, &busbw}) {
    if (f->samples.empty()) continue;
    out += "# HELP " + f->name + " " + f->help + "\n# TYPE " + f->name + " " + f->type + "\n";
    for (const std::string& s : f->samples) out += s + "\n";
  }
  return out;
}

std::unique_ptr<MetricsServer> MetricsServer::start(std::function<std::string()> render) {
  const int64_t base = config_int(knobs::kMetricsPort);
  if (base == 0) return nullptr;
  int64_t local_rank = 0;
  if (const char* lr = std::getenv("LOCAL_RANK")) local_rank = std::atoll(lr);
  const int64_t port = base + local_rank;
  const std::string addr = config_string(knobs::kMetricsAddr);
  if (port > 65535) {
    COHORT_LOG(kWarning) << "metrics endpoint: COHORT_METRICS_PORT " << base << " + LOCAL_RANK " << local_rank
                         << " is past 65535; no endpoint";
    return nullptr;
  }
  auto sock = listen_tcp(addr, static_cast<uint16_t>(port), 16);
  if (!sock.ok()) {
    COHORT_LOG(kWarning) << "metrics endpoint: cannot listen on "
                         << format_address(addr, static_cast<uint16_t>(port)) << ": "
                         << sock.status().message() << "; the job runs on without it";
    return nullptr;
  }
  const int fd = sock.value().release();
  COHORT_LOG(kInfo) << "metrics endpoint: http://" << format_address(addr, local_port(fd)) << "/metrics";
  return std::unique_ptr<MetricsServer>(new MetricsServer(fd, local_port(fd), std::move(render)));
}

MetricsServer::MetricsServer(int listen_fd, uint16_t port, std::function<std::string()> render)
    : listen_fd_(listen_fd), port_(port), render_(std::move(render)) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

MetricsServer::~MetricsServer() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
  ::close(stop_fd_);
  ::close(listen_fd_);
}

void MetricsServer::run() {
  for (;;) {
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents) return;
    if (!fds[1].revents) continue;
    Socket client(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (client.valid()) answer(client.fd());
  }
}

void MetricsServer::answer(int fd) {
  // The request line and headers; a client that says nothing in two
  // seconds is dropped, so a stuck client cannot hold the endpoint.
  const Deadline deadline = Deadline::after(std::chrono::seconds(2));
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos &&
         request.size() < 16384) {
    auto n = recv_some(fd, buf, sizeof buf, deadline);
    if (!n.ok() || n.value() == 0) return;
    request.append(buf, n.value());
  }
  const bool get = request.rfind("GET ", 0) == 0;
  const size_t path_end = request.find(' ', 4);
  const std::string path = get && path_end != std::string::npos ? request.substr(4, path_end - 4) : "";
  std::string status = "200 OK", body;
  if (!get) {
    status = "405 Method Not Allowed";
    body = "only GET /metrics is served\n";
  } else if (path != "/metrics" && path.rfind("/metrics?", 0) != 0) {
    status = "404 Not Found";
    body = "only /metrics is served, not " + path + "\n";
  } else {
    body = render_();
  }
  const std::string reply = "HTTP/1.1 " + status +
                            "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  (void)send_all(fd, reply.data(), reply.size(), deadline);
}

}  // namespace cohort
