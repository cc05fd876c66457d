// cohort-bench: collective performance in the manner of nccl-tests.
//
//   cohort-bench COLLECTIVE [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-R ROUNDS]
//                [-c 0|1] [-d DTYPE] [-o OP] [-r ROOT] [--json] [--spawn N]
//                [--backend cohort|mpi|SPEC] [--symmetric]
//
// COLLECTIVE: all_reduce, all_gather, reduce_scatter, broadcast, reduce,
// all_to_all, barrier, ping_pong (rank 0 sends to rank 1, which sends it
// back; time is half the round trip, as osu_latency's; other ranks idle;
// needs 2 ranks or more). Sizes take K, M, G suffixes. Every rank is a process that
// joins through env:// (any launcher works); --spawn N starts N local ranks
// itself. --backend mpi runs over Open MPI: start it with
// `mpirun -np N cohort-bench ... --backend mpi`. Rank 0 prints one line per size:
//   size count type redop root time(us) algbw(GB/s) busbw(GB/s) #wrong
// time is the mean over -n iterations of the slowest rank (with -R, the
// median of R such means); algbw = size /
// time; busbw = algbw x the factor nccl-tests documents: all_reduce
// 2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n; broadcast and
// reduce 1. size is, as in nccl-tests, the largest buffer involved (the
// input of all_reduce, broadcast, reduce, reduce_scatter and all_to_all; the
// output of all_gather). Exits 1 when any result was wrong (-c 1, SUM).
// --symmetric puts the buffers in symmetric memory
// (ProcessGroup::alloc_symmetric), which the ranks of a host read in place.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "cohort/tcp_store_server.h"
#include "common/cpu_binding.h"
#include "common/elements.h"
#include "common/size_text.h"
#include "common/socket.h"

using namespace cohort;

namespace {

struct Args {
  std::string collective;
  size_t min_bytes = 8, max_bytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 5, rounds = 1;
  bool check = true, json = false, symmetric = false;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::SUM;
  int root = 0;
  int spawn = 0;
  BindMode bind = BindMode::kAuto;
  std::string backend = "cohort";
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "cohort-bench: %s\nusage: cohort-bench "
               "all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all|barrier|ping_pong "
               "[-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-R ROUNDS] [-c 0|1] [-d DTYPE] [-o OP] "
               "[-r ROOT] [--json] "
               "[--spawn N [--bind auto|cores|numa|none]] [--backend cohort|mpi] [--symmetric]\n",
               why.c_str());
  std::exit(2);
}

DType parse_dtype(const std::string& s) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                  DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kBool}) {
    if (s == dtype_name(d)) return d;
  }
  usage("unknown dtype '" + s + "'");
}

ReduceOp parse_op(const std::string& s) {
  for (ReduceOp::Kind k : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                           ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    std::string name = reduce_op_name(ReduceOp(k));
    for (auto& c : name) c = static_cast<char>(std::tolower(c));
    if (s == name) return ReduceOp(k);
  }
  usage("unknown op '" + s + "'");
}

[[noreturn]] void help() {
  std::printf(
      "cohort-bench: times one collective over a range of sizes, with nccl-tests' columns\n"
      "(size count type redop root time algbw busbw #wrong). Run one process per rank, under\n"
      "cohortrun (or mpirun with --backend mpi), or let --spawn start the ranks itself.\n\n"
      "usage: cohort-bench COLLECTIVE [flags]\n"
      "  COLLECTIVE    all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, barrier,\n"
      "                ping_pong\n"
      "  -b MIN        smallest size in bytes (K, M, G suffixes)\n"
      "  -e MAX        largest size in bytes\n"
      "  -f FACTOR     size multiplier from one row to the next\n"
      "  -n ITERS      timed iterations per size\n"
      "  -w WARMUP     untimed iterations per size\n"
      "  -R ROUNDS     time -n iterations ROUNDS times; the time is the median round's (default 1)\n"
      "  -c 0|1        check every result (the #wrong column)\n"
      "  -d DTYPE      float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool\n"
      "  -o OP         sum, avg, product, min, max, band, bor, bxor\n"
      "  -r ROOT       root of broadcast and reduce\n"
      "  --json        one JSON object per row instead of the table\n"
      "  --spawn N     start N ranks as processes of this host\n"
      "  --bind MODE   how --spawn binds its ranks, as cohortrun's --bind: auto (default: a core\n"
      "                or more each when there is one per rank, else neighbours share a core),\n"
      "                cores, numa, none\n"
      "  --backend B   cohort (default) or mpi\n"
      "  --symmetric   buffers in symmetric memory\n"
      "  -h, --help    this text\n");
  std::exit(0);
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("name a collective");
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") help();
  }
  a.collective = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing value after " + f);
      return argv[++i];
    };
    if (f == "-b")
      a.min_bytes = parse_size_text(next());
    else if (f == "-e")
      a.max_bytes = parse_size_text(next());
    else if (f == "-f")
      a.factor = std::atof(next());
    else if (f == "-n")
      a.iters = std::atoi(next());
    else if (f == "-w")
      a.warmup = std::atoi(next());
    else if (f == "-R")
      a.rounds = std::atoi(next());
    else if (f == "-c")
      a.check = std::atoi(next()) != 0;
    else if (f == "-d")
      a.dtype = parse_dtype(next());
    else if (f == "-o")
      a.op = parse_op(next());
    else if (f == "-r")
      a.root = std::atoi(next());
    else if (f == "--json")
      a.json = true;
    else if (f == "--spawn")
      a.spawn = std::atoi(next());
    else if (f == "--bind") {
      auto mode = parse_bind_mode(next(), "--bind");
      if (!mode.ok()) usage(mode.status().message());
      a.bind = mode.value();
    } else if (f == "--backend")
      a.backend = next();
    else if (f == "--symmetric")
      a.symmetric = true;
    else
      usage("unknown option " + f);
  }
  if (a.factor <= 1) usage("-f must be more than 1");
  if (a.rounds < 1) usage("-R must be 1 or more");
  return a;
}

// spawn runs this program n times as ranks 0..n-1 of a local job, each
// bound to its share of this process's CPUs as cohortrun binds its workers.
int spawn(int n, BindMode bind, char** argv) {
  const CpuTopology topology = CpuTopology::of_this_process();
  std::vector<std::vector<int>> cpus(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto share = share_of_cpus(bind, topology, r, n, "cohort-bench's affinity");
    if (!share.ok()) {
      std::fprintf(stderr, "cohort-bench: --bind %s: %s\n", bind_mode_name(bind),
                   share.status().message().c_str());
      return 2;
    }
    cpus[static_cast<size_t>(r)] = share.value().cpus;
    if (share.value().cpus.empty()) {
      std::fprintf(stderr, "# ranks unbound: %s\n", share.value().why_unbound.c_str());
      cpus.assign(static_cast<size_t>(n), {});
      break;
    }
  }
  // On stderr: stdout is the table (or JSON) alone.
  if (!cpus.front().empty()) {
    std::string text = "# ranks bound to CPUs:";
    for (const auto& c : cpus) text += " " + cpu_list_text(c);
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  // The job's store is this process's, bound before any rank starts, as
  // torchrun's agent hosts it: a port picked free and bound later by rank
  // 0 could be taken in between (by a rank's own listener, at 16 ranks).
  TcpStoreServerOptions store_options;
  store_options.host = "127.0.0.1";
  store_options.port = 0;
  TcpStoreServer store(store_options);
  const std::string port = std::to_string(store.port());
  // Everything a rank needs is made before fork: the store's thread runs
  // in this process, so a child may not allocate (a lock that thread held
  // stays held in the child) before it execs.
  std::vector<char*> args;
  for (char** a = argv; *a; ++a) {
    if (std::strcmp(*a, "--spawn") == 0) {
      ++a;
      continue;
    }
    args.push_back(*a);
  }
  args.push_back(nullptr);
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(n));
  std::vector<std::vector<char*>> envps(static_cast<size_t>(n));
  const std::string world = std::to_string(n);
  for (int r = 0; r < n; ++r) {
    std::vector<std::string>& env = envs[static_cast<size_t>(r)];
    const std::vector<std::pair<std::string, std::string>> vars = {
        {"RANK", std::to_string(r)}, {"WORLD_SIZE", world}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", world},
        // Bound here, or left unbound on purpose: the rank must not bind itself.
        {"COHORT_BIND", "none"}};
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& v : vars) replaced = replaced || v.first == name;
      if (!replaced) env.push_back(entry);
    }
    for (const auto& v : vars) env.push_back(v.first + "=" + v.second);
    for (std::string& e : env) envps[static_cast<size_t>(r)].push_back(e.data());
    envps[static_cast<size_t>(r)].push_back(nullptr);
  }
  static const char kUnbound[] = "cohort-bench: could not bind a rank to its CPUs; it runs unbound\n";
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      if (!cpus[static_cast<size_t>(r)].empty() && !bind_this_thread(cpus[static_cast<size_t>(r)])) {
        ssize_t ignored = ::write(2, kUnbound, sizeof kUnbound - 1);
        (void)ignored;
      }
      execve("/proc/self/exe", args.data(), envps[static_cast<size_t>(r)].data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  // A rank that fails ends the run: the others would wait for it (or for
  // rank 0's store) until their timeout.
  int status = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int s;
    const pid_t done = waitpid(-1, &s, 0);
    if (done < 0) break;
    if (WIFEXITED(s) && WEXITSTATUS(s) == 0) continue;
    const auto at = std::find(pids.begin(), pids.end(), done);
    if (status == 0) {
      std::fprintf(stderr, "cohort-bench: rank %d %s %d; stopping the other ranks\n",
                   static_cast<int>(at - pids.begin()),
                   WIFEXITED(s) ? "exited with status" : "was killed by signal",
                   WIFEXITED(s) ? WEXITSTATUS(s) : WTERMSIG(s));
      for (pid_t p : pids) {
        if (p != done) kill(p, SIGTERM);
      }
    }
    status = 1;
  }
  return status;
}

// PageBuffer is a zeroed buffer that starts on a page, as bench/mpi_bench's
// do: where a buffer starts changes the speed of its copies (Open MPI's
// 64 KiB all_gather at 2 ranks ran 10-15% slower from a heap block than
// from a page here), so both benchmarks place their buffers alike. With
// --symmetric it is the rank's block of a symmetric allocation (also on a
// page), made collectively on `group`.
class PageBuffer {
 public:
  PageBuffer(size_t bytes, ProcessGroup* group) {
    if (group) {
      block_ = group->alloc_symmetric(bytes);
      data_ = static_cast<uint8_t*>(block_->data());
      return;
    }
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, bytes);
  }
  ~PageBuffer() {
    if (!block_) std::free(data_);
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  static constexpr size_t kPage = 4096;
  uint8_t* data_ = nullptr;
  std::shared_ptr<SymmetricMemory> block_;
};

double bus_factor(const std::string& c, int n) {
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "all_gather" || c == "reduce_scatter" || c == "all_to_all") return static_cast<double>(n - 1) / n;
  return 1.0;
}

// fill gives element i of rank r a small value, exact in every dtype.
double value(int r, size_t i) {
  return static_cast<double>((r + i) % 4);
}

// The collective is picked once, not by name in every timed call (string
// compares cost ~10 ns a call: more than 2% of a 4-byte all_reduce).
enum class Which {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier,
  kPingPong
};

Which which_collective(const std::string& c) {
  const std::pair<const char*, Which> kNames[] = {{"all_reduce", Which::kAllReduce},
                                                  {"all_gather", Which::kAllGather},
                                                  {"reduce_scatter", Which::kReduceScatter},
                                                  {"broadcast", Which::kBroadcast},
                                                  {"reduce", Which::kReduce},
                                                  {"all_to_all", Which::kAllToAll},
                                                  {"barrier", Which::kBarrier},
                                                  {"ping_pong", Which::kPingPong}};
  const auto found =
      std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& e) { return c == e.first; });
  if (found == std::end(kNames)) usage("unknown collective '" + c + "'");
  return found->second;
}

// Bench is what every row of the sweep runs with.
struct Bench {
  const Args& a;
  Which which;
  ProcessGroup& g;
  int rank;
  int n;
};

// run_collective runs the collective once on `count` elements of `in`
// (and `out`, for the collectives with an output of their own).
void run_collective(const Bench& b, size_t count, const PageBuffer& in, const PageBuffer& out) {
  const Args& a = b.a;
  ProcessGroup* g = &b.g;
  const int n = b.n;
  switch (b.which) {
    case Which::kAllReduce: {
      AllReduceOptions o;
      o.op = a.op;
      g->all_reduce(Buffer{in.data(), count, a.dtype, {}}, o);
      break;
    }
    case Which::kBroadcast: {
      BroadcastOptions o;
      o.src = a.root;
      g->broadcast(Buffer{in.data(), count, a.dtype, {}}, o);
      break;
    }
    case Which::kReduce: {
      ReduceOptions o;
      o.dst = a.root;
      o.op = a.op;
      g->reduce(Buffer{in.data(), count, a.dtype, {}}, o);
      break;
    }
    case Which::kAllGather:
      g->all_gather_into_tensor(Buffer{out.data(), count, a.dtype, {}},
                                Buffer{in.data(), count / n, a.dtype, {}});
      break;
    case Which::kReduceScatter: {
      ReduceScatterOptions o;
      o.op = a.op;
      g->reduce_scatter_tensor(Buffer{out.data(), count / n, a.dtype, {}},
                               Buffer{in.data(), count, a.dtype, {}}, o);
      break;
    }
    case Which::kBarrier:
      g->barrier();
      break;
    case Which::kAllToAll:
      g->all_to_all_single(Buffer{out.data(), count, a.dtype, {}}, Buffer{in.data(), count, a.dtype, {}});
      break;
    case Which::kPingPong:
      if (b.rank == 0) {
        g->send(Buffer{in.data(), count, a.dtype, {}}, 1)->wait();
        g->recv(Buffer{out.data(), count, a.dtype, {}}, 1)->wait();
      } else if (b.rank == 1) {
        g->recv(Buffer{out.data(), count, a.dtype, {}}, 0)->wait();
        g->send(Buffer{out.data(), count, a.dtype, {}}, 0)->wait();
      }
      break;
  }
}

// refill gives `in` this rank's fresh inputs.
void refill(const Bench& b, size_t count, const PageBuffer& in) {
  for (size_t i = 0; i < count; ++i) store_element(b.a.dtype, in.data(), i, value(b.rank, i));
}

// time_collective returns the time of one run in microseconds, of the
// slowest rank, after the warm-up runs (one way, for ping_pong): the mean
// over -n runs, or with -R, the median of -R such means (a round that a
// burst of the machine's other work slowed does not move it).
double time_collective(const Bench& b, size_t count, const PageBuffer& in, const PageBuffer& out) {
  for (int i = 0; i < b.a.warmup; ++i) run_collective(b, count, in, out);
  std::vector<double> rounds;
  for (int r = 0; r < b.a.rounds; ++r) {
    b.g.barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < b.a.iters; ++i) run_collective(b, count, in, out);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / b.a.iters;
    if (b.which == Which::kPingPong) us /= 2;  // one way
    AllReduceOptions max;
    max.op = ReduceOp::MAX;
    b.g.all_reduce(Buffer::of(&us, 1), max);
    rounds.push_back(us);
  }
  std::sort(rounds.begin(), rounds.end());
  const size_t mid = rounds.size() / 2;
  return rounds.size() % 2 ? rounds[mid] : (rounds[mid - 1] + rounds[mid]) / 2;
}

// count_wrong compares this rank's result of a run from fresh inputs (a
// SUM) with the expected one; returns the elements that differ here.
int64_t count_wrong(const Bench& b, size_t count, const PageBuffer& in, const PageBuffer& out) {
  const std::string& c = b.a.collective;
  const Args& a = b.a;
  const int rank = b.rank, n = b.n;
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = 0, got = 0;
    if (c == "all_reduce" || (c == "reduce" && rank == a.root)) {
      for (int r = 0; r < n; ++r) want += value(r, i);
      got = load_element(a.dtype, in.data(), i);
    } else if (c == "ping_pong") {
      if (rank > 1) break;
      want = value(0, i);  // rank 1 got rank 0's data; rank 0 got it back
      got = load_element(a.dtype, out.data(), i);
    } else if (c == "broadcast" || c == "reduce") {
      want = value(c == "broadcast" ? a.root : rank, i);
      got = load_element(a.dtype, in.data(), i);
    } else if (c == "all_gather") {
      size_t per = count / n;
      want = value(static_cast<int>(i / per), i % per);
      got = load_element(a.dtype, out.data(), i);
    } else if (c == "reduce_scatter") {
      if (i >= count / n) break;
      for (int r = 0; r < n; ++r) want += value(r, rank * (count / n) + i);
      got = load_element(a.dtype, out.data(), i);
    } else {
      size_t per = count / n;
      want = value(static_cast<int>(i / per), rank * per + i % per);
      got = load_element(a.dtype, out.data(), i);
    }
    if (got != want) ++wrong;
  }
  return wrong;
}

void print_header(const Args& a, int n) {
  if (a.json) {
    std::printf("[");
    return;
  }
  std::printf("# cohort-bench %s, %d ranks, %d iterations after %d warm-up\n", a.collective.c_str(), n,
              a.iters, a.warmup);
  std::printf("%12s %12s %8s %6s %5s %10s %10s %10s %7s\n", "size", "count", "type", "redop", "root",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

// print_row prints one size's results; `first` says whether a JSON row
// needs no comma before it.
void print_row(const Args& a, bool first, size_t count, double us, double algbw, double busbw,
               int64_t wrong) {
  const std::string& c = a.collective;
  const size_t es = dtype_size(a.dtype);
  std::string op_name =
      (c == "all_reduce" || c == "reduce" || c == "reduce_scatter") ? reduce_op_name(a.op) : "none";
  int root = (c == "broadcast" || c == "reduce") ? a.root : -1;
  if (a.json) {
    std::printf(
        "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"time_us\":%.3f,"
        "\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld}",
        first ? "" : ",", count * es, count, dtype_name(a.dtype), op_name.c_str(), root, us, algbw, busbw,
        static_cast<long long>(wrong));
  } else {
    std::printf("%12zu %12zu %8s %6s %5d %10.3f %10.3f %10.3f %7lld\n", count * es, count,
                dtype_name(a.dtype), op_name.c_str(), root, us, algbw, busbw, static_cast<long long>(wrong));
  }
  std::fflush(stdout);
}

void print_footer(const Args& a, double busbw_sum, int sizes) {
  if (a.json)
    std::printf("]\n");
  else
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", sizes ? busbw_sum / sizes : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.spawn > 0) return spawn(a.spawn, a.bind, argv);
  const std::string& c = a.collective;
  const Which which = which_collective(c);
  // A barrier moves no data: one row, of size 0.
  const bool barrier = which == Which::kBarrier;
  try {
    InitOptions init;
    init.backend = a.backend;
    init_process_group(init);
    auto g = default_group();
    const int rank = g->rank(), n = g->size();
    const size_t es = dtype_size(a.dtype);
    if (which == Which::kPingPong && n < 2) usage("ping_pong needs 2 ranks or more");
    const Bench bench{a, which, *g, rank, n};
    if (rank == 0) print_header(a, n);
    double busbw_sum = 0;
    int sizes = 0;
    int64_t total_wrong = 0;
    for (size_t bytes = std::max(a.min_bytes, es); bytes <= a.max_bytes;
         bytes =
             std::max(bytes + es, static_cast<size_t>(std::llround(static_cast<double>(bytes) * a.factor)))) {
      // count: elements of the per-rank input (nccl-tests' convention: the
      // size is the largest buffer; for all_gather the output).
      size_t count = barrier ? 0 : bytes / es;
      if (c == "all_gather" || c == "reduce_scatter" || c == "all_to_all")
        count = std::max<size_t>(1, count / n) * n;
      ProcessGroup* shared_by = a.symmetric ? g.get() : nullptr;
      PageBuffer in(count * es + 1, shared_by), out(count * es + 1, shared_by);
      refill(bench, count, in);
      const double us = time_collective(bench, count, in, out);
      // Check one more run from fresh inputs against the expected result.
      int64_t wrong = 0;
      if (a.check && a.op.kind == ReduceOp::SUM && !barrier) {
        refill(bench, count, in);
        run_collective(bench, count, in, out);
        wrong = count_wrong(bench, count, in, out);
        g->all_reduce(Buffer::of(&wrong, 1));
      }
      total_wrong += wrong;
      double algbw = static_cast<double>(count * es) / us / 1e3;
      double busbw = algbw * bus_factor(c, n);
      busbw_sum += busbw;
      ++sizes;
      if (barrier) a.max_bytes = 0;  // ends the sweep after this row
      if (rank == 0) print_row(a, sizes == 1, count, us, algbw, busbw, wrong);
    }
    if (rank == 0) print_footer(a, busbw_sum, sizes);
    destroy_process_group();
    if (total_wrong > 0) {
      std::fprintf(stderr, "cohort-bench: %lld wrong elements\n", static_cast<long long>(total_wrong));
      return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "cohort-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
