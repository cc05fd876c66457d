// store_bench: cohort's TcpStore and libtorch's c10d::TCPStore (torch 2.x:
// its libuv server, the default), measured the same way in one run.
//
//   store_bench [--reps R] [--ops N] [--clients 16,64,256,1024,4096] [--latency on|off]
//               [--only cohort|libtorch]
//
// Latency: one client, the server in a child process (as rank 0 hosts it),
// N operations per repetition; each cell is the median over R repetitions of
// the mean time per operation. Rendezvous: N clients (threads) each connect,
// add("arrived", 1) and wait until all arrived (the last to arrive sets a
// key that all wait for); the time from releasing the (already created)
// threads to the last return, median over R repetitions. Prints a markdown table with both and
// the ratio cohort / libtorch (lower is better for cohort).
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"
#include "common/socket.h"

namespace {

using Clock = std::chrono::steady_clock;

// KvClient is the little both stores have in common for this benchmark.
struct KvClient {
  virtual ~KvClient() = default;
  virtual void set(const std::string& k, const std::vector<uint8_t>& v) = 0;
  virtual std::vector<uint8_t> get(const std::string& k) = 0;
  virtual int64_t add(const std::string& k, int64_t n) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
};

template <class S>
struct Adapter : KvClient {
  explicit Adapter(std::unique_ptr<S> s) : store(std::move(s)) {}
  void set(const std::string& k, const std::vector<uint8_t>& v) override { store->set(k, v); }
  std::vector<uint8_t> get(const std::string& k) override { return store->get(k); }
  int64_t add(const std::string& k, int64_t n) override { return store->add(k, n); }
  bool check(const std::vector<std::string>& keys) override { return store->check(keys); }
  void wait(const std::vector<std::string>& keys) override { store->wait(keys); }
  std::unique_ptr<S> store;
};

// Implementation: how to start a server and make clients for one store.
struct Implementation {
  std::string name;
  // start_server returns an owner of the server and the port it listens on.
  std::function<std::shared_ptr<void>(uint16_t* port)> start_server;
  std::function<std::unique_ptr<KvClient>(uint16_t port)> connect;
};

Implementation cohort_impl() {
  return {"cohort",
          [](uint16_t* port) {
            cohort::TcpStoreServerOptions o;
            o.host = "127.0.0.1";
            o.port = 0;
            o.token = "";
            auto server = std::make_shared<cohort::TcpStoreServer>(o);
            *port = server->port();
            return std::shared_ptr<void>(server);
          },
          [](uint16_t port) -> std::unique_ptr<KvClient> {
            cohort::TcpStoreOptions o;
            o.port = port;
            o.token = "";
            o.timeout = std::chrono::seconds(120);
            return std::make_unique<Adapter<cohort::TcpStore>>(
                std::make_unique<cohort::TcpStore>("127.0.0.1", o));
          }};
}

Implementation torch_impl() {
  return {
      "libtorch",
      [](uint16_t* port) {
        // torch's server lives inside a TCPStore with isServer.
        c10d::TCPStoreOptions o;
        o.port = 0;
        o.isServer = true;
        o.waitWorkers = false;
        o.timeout = std::chrono::seconds(120);
        auto server = std::make_shared<c10d::TCPStore>("127.0.0.1", o);
        *port = server->getPort();
        return std::shared_ptr<void>(server);
      },
      [](uint16_t port) -> std::unique_ptr<KvClient> {
        c10d::TCPStoreOptions o;
        o.port = port;
        o.waitWorkers = false;
        o.timeout = std::chrono::seconds(120);
        return std::make_unique<Adapter<c10d::TCPStore>>(std::make_unique<c10d::TCPStore>("127.0.0.1", o));
      }};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ServerProcess runs an implementation's server in a child process, as
// rank 0 would host it, so that the server has its own file-descriptor
// limit (4096 clients take 8192 descriptors, more with libtorch's second
// connection per client) and its own scheduler footprint.
class ServerProcess {
 public:
  explicit ServerProcess(const Implementation& impl) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      cohort::raise_fd_limit();
      uint16_t port = 0;
      auto server = impl.start_server(&port);
      if (::write(fds[1], &port, sizeof port) != sizeof port) _exit(1);
      for (;;) pause();  // until killed
    }
    ::close(fds[1]);
    if (::read(fds[0], &port_, sizeof port_) != sizeof port_) throw std::runtime_error("server child died");
    ::close(fds[0]);
  }
  ~ServerProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// latency_us measures one operation kind; returns the median µs per op.
double latency_us(const Implementation& impl, const std::string& op, int reps, int ops) {
  ServerProcess server(impl);
  auto client = impl.connect(server.port());
  std::vector<uint8_t> value(16, 'v');
  client->set("key", value);
  client->set("counter", {'0'});
  std::function<void()> one;
  if (op == "set") one = [&] { client->set("key", value); };
  if (op == "get") one = [&] { client->get("key"); };
  if (op == "add") one = [&] { client->add("counter", 1); };
  if (op == "check") one = [&] { client->check({"key"}); };
  for (int i = 0; i < ops / 10; ++i) one();  // warm up
  std::vector<double> per_op;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    for (int i = 0; i < ops; ++i) one();
    per_op.push_back(seconds_since(t) * 1e6 / ops);
  }
  return median(per_op);
}

// StartLine holds every client thread until all exist, so that the timed
// part is the rendezvous itself, not creating a thousand threads.
// Waiting on a futex word rather than a condition variable lets all threads
// wake at once instead of handing one mutex down the line.
struct StartLine {
  std::atomic<int> go{0};
  std::mutex mu;
  int finished = 0;
  Clock::time_point last_finish;

  void wait() {
    while (go.load() == 0) syscall(SYS_futex, &go, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  }
  void release() {
    go.store(1);
    syscall(SYS_futex, &go, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  }
};

struct ThreadArgs {
  const Implementation* impl;
  uint16_t port;
  int n;
  std::atomic<int>* failures;
  StartLine* line;
};

void* rendezvous_client(void* p) {
  auto* a = static_cast<ThreadArgs*>(p);
  a->line->wait();
  try {
    auto c = a->impl->connect(a->port);
    if (c->add("arrived", 1) == a->n) c->set("all_arrived", {'1'});
    c->wait({"all_arrived"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s client: %s\n", a->impl->name.c_str(), e.what());
    a->failures->fetch_add(1);
  }
  {
    std::lock_guard<std::mutex> lock(a->line->mu);
    a->line->finished++;
    a->line->last_finish = Clock::now();
  }
  return nullptr;
}

// rendezvous_ms runs one rendezvous of n clients; returns milliseconds from
// the start signal to the last client's return, or -1 when a client failed.
double rendezvous_ms(const Implementation& impl, int n) {
  ServerProcess server(impl);
  std::atomic<int> failures{0};
  StartLine line;
  ThreadArgs args{&impl, server.port(), n, &failures, &line};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);  // thousands of threads
  std::vector<pthread_t> threads(n);
  int started = 0;
  for (; started < n; ++started) {
    if (pthread_create(&threads[started], &attr, rendezvous_client, &args) != 0) break;
  }
  Clock::time_point t = Clock::now();
  line.release();
  for (int i = 0; i < started; ++i) pthread_join(threads[i], nullptr);
  pthread_attr_destroy(&attr);
  if (started < n || failures.load() > 0) return -1;
  return std::chrono::duration<double, std::milli>(line.last_finish - t).count();
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

std::string cell(double v, const char* unit) {
  if (v < 0) return "failed";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  return buf;
}

std::string ratio(double a, double b) {
  if (a < 0 || b <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", a / b);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, ops = 2000;
  bool latency = true;
  std::string only;  // "cohort" or "libtorch" to profile one alone
  std::vector<int> clients = {16, 64, 256, 1024, 4096};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ops"))
      ops = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--clients"))
      clients = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--latency"))
      latency = std::strcmp(argv[i + 1], "off") != 0;
    else {
      std::fprintf(stderr,
                   "usage: store_bench [--reps R] [--ops N] [--clients 16,64,...] [--latency on|off] [--only "
                   "cohort|libtorch]\n");
      return 2;
    }
  }
  cohort::raise_fd_limit();
  Implementation ours = cohort_impl(), theirs = torch_impl();
  std::printf("| measurement | cohort | libtorch %s | cohort / libtorch |\n|---|---|---|---|\n",
              TORCH_VERSION);
  for (const char* op : {"set", "get", "add", "check"}) {
    if (!latency) break;
    double a = only == "libtorch" ? -1 : latency_us(ours, op, reps, ops);
    double b = only == "cohort" ? -1 : latency_us(theirs, op, reps, ops);
    std::printf("| %s latency, 1 client | %s | %s | %s |\n", op, cell(a, "µs").c_str(), cell(b, "µs").c_str(),
                ratio(a, b).c_str());
    std::fflush(stdout);
  }
  for (int n : clients) {
    std::vector<double> a, b;
    int r = n >= 1024 ? std::max(1, reps / 2) : reps;
    for (int i = 0; i < r; ++i) {
      a.push_back(only == "libtorch" ? -1 : rendezvous_ms(ours, n));
      b.push_back(only == "cohort" ? -1 : rendezvous_ms(theirs, n));
    }
    double ma = *std::min_element(a.begin(), a.end()) < 0 ? -1 : median(a);
    double mb = *std::min_element(b.begin(), b.end()) < 0 ? -1 : median(b);
    std::printf("| rendezvous, %d clients | %s | %s | %s |\n", n, cell(ma, "ms").c_str(),
                cell(mb, "ms").c_str(), ratio(ma, mb).c_str());
    std::fflush(stdout);
  }
  return 0;
}
