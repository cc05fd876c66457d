#include "launcher/worker_group.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "cohort/errors.h"
#include "launcher/json_text.h"

extern char** environ;

namespace cohort::launcher {

struct WorkerGroup::Worker {
  int local_rank = 0;
  std::string error_file;
  std::unique_ptr<WorkerProcess> process;
  std::unique_ptr<OutputSink> out, err;
  bool recorded = false;
};

namespace {

void make_dirs(const std::string& path) {
  for (size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
    std::string part = path.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("cannot create log folder " + part + ": " + std::strerror(errno));
    if (at == std::string::npos) return;
  }
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d_%H:%M:%S", &tm);
  return buf;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string read_error_message(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  // torch writes {"message": {"message": ...}} or, from older versions,
  // {"message": "..."}; the first string field named message is the one.
  return json_string_field(doc, "message").value_or("");
}

std::vector<std::string> worker_environment(const LaunchConfig& config, const RoundAssignment& round,
                                            const std::string& run_id, int local_rank,
                                            const std::string& error_file, const std::string& straggler_dir) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const int rank = round.rank_offset + local_rank;
  auto set = [&](const std::string& k, const std::string& v) { vars[k] = v; };
  set("LOCAL_RANK", std::to_string(local_rank));
  set("RANK", std::to_string(rank));
  set("GROUP_RANK", std::to_string(round.group_rank));
  set("ROLE_RANK", std::to_string(rank));
  set("ROLE_NAME", config.role);
  set("LOCAL_WORLD_SIZE", std::to_string(config.nproc_per_node));
  set("WORLD_SIZE", std::to_string(round.world_size));
  set("GROUP_WORLD_SIZE", std::to_string(round.group_world_size));
  set("ROLE_WORLD_SIZE", std::to_string(round.world_size));
  set("MASTER_ADDR", round.master_addr);
  set("MASTER_PORT", std::to_string(round.master_port));
  for (const char* prefix : {"TORCHELASTIC_", "COHORT_"}) {
    std::string p = prefix;
    set(p + "RESTART_COUNT", std::to_string(round.restart_count));
    set(p + "MAX_RESTARTS", std::to_string(config.max_restarts));
    set(p + "RUN_ID", run_id);
    set(p + "ERROR_FILE", error_file);
  }
  // The workers host no agent store: rank 0 starts its own (cohort's and
  // torch's env:// both do when this is false).
  set("TORCHELASTIC_USE_AGENT_STORE", "False");
  // Where the world's rank 0 keeps its straggler summary, for the line the
  // agent prints when the attempt ends (unless the user chose a folder).
  if (!straggler_dir.empty() && !vars.count("COHORT_STRAGGLER_DIR"))
    set("COHORT_STRAGGLER_DIR", straggler_dir);
  // A Python worker finds this build's cohort_torch before any other.
  if (!config.python_path.empty()) {
    auto old = vars.find("PYTHONPATH");
    set("PYTHONPATH",
        config.python_path + (old != vars.end() && !old->second.empty() ? ":" + old->second : ""));
  }
  if (config.as_gloo) set("COHORT_AS_GLOO", "1");
  // The workers are bound here (--bind), or left unbound on purpose: a
  // worker's cohort must not bind itself again (COHORT_BIND).
  set("COHORT_BIND", "none");
  // As torchrun: one thread per worker unless the user chose otherwise.
  if (!vars.count("OMP_NUM_THREADS")) set("OMP_NUM_THREADS", "1");
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

WorkerGroup::WorkerGroup(const LaunchConfig& config, const std::string& path, const RoundAssignment& round,
                         const std::string& run_id, const std::string& attempt_dir, OrphanReaper& reaper)
    : config_(config), round_(round), reaper_(reaper) {
  for (int lr = 0; lr < config.nproc_per_node; ++lr) {
    auto w = std::make_unique<Worker>();
    w->local_rank = lr;
    std::string dir = attempt_dir + "/" + std::to_string(lr);
    make_dirs(dir);
    w->error_file = dir + "/error.json";
    ::unlink(w->error_file.c_str());
    const int rank = round.rank_offset + lr;
    const bool shown = !config.local_ranks_filter || config.local_ranks_filter->count(lr) > 0;
    const int redirect = config.redirects.for_rank(lr), tee = config.tee.for_rank(lr);
    const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
    // Files always keep everything; the console shows a stream unless it
    // is redirected (tee shows it too) or filtered out.
    auto console = [&](int bit, int fd) { return shown && (!(redirect & bit) || (tee & bit)) ? fd : -1; };
    w->out = std::make_unique<OutputSink>(prefix, console(kStdout, STDOUT_FILENO), dir + "/stdout.log");
    w->err = std::make_unique<OutputSink>(prefix, console(kStderr, STDERR_FILENO), dir + "/stderr.log");
    std::vector<std::string> argv = config.program;
    // torch.distributed.launch passes the local rank as the script's first
    // argument (after the interpreter's own ones in a Python command).
    if (config.pass_local_rank) {
      argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(config.script_index + 1),
                  "--local-rank=" + std::to_string(lr));
    }
    const std::vector<int> no_cpus;
    const auto& cpus = config.worker_cpus.empty() ? no_cpus : config.worker_cpus[static_cast<size_t>(lr)];
    w->process = std::make_unique<WorkerProcess>(
        path, argv, worker_environment(config, round, run_id, lr, w->error_file, attempt_dir), cpus);
    reaper_.watch(w->process->pid());  // the worker leads its own process group
    workers_.push_back(std::move(w));
  }
}

WorkerGroup::~WorkerGroup() {
  for (auto& w : workers_) {
    w->process->signal_group(SIGKILL);
    reaper_.release(w->process->pid());
  }
}

void WorkerGroup::pump(std::chrono::milliseconds timeout, int wake_fd) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, bool>> owners;  // (worker, is stderr)
  for (auto& w : workers_) {
    if (w->process->stdout_fd() >= 0) {
      fds.push_back({w->process->stdout_fd(), POLLIN, 0});
      owners.emplace_back(w.get(), false);
    }
    if (w->process->stderr_fd() >= 0) {
      fds.push_back({w->process->stderr_fd(), POLLIN, 0});
      owners.emplace_back(w.get(), true);
    }
  }
  if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
  int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n > 0) {
    char buf[65536];
    for (size_t i = 0; i < owners.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [w, is_err] = owners[i];
      OutputSink& sink = is_err ? *w->err : *w->out;
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        sink.feed(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        sink.finish();
        w->process->close_output(fds[i].fd);
      }
    }
  }
  reap();
}

void WorkerGroup::reap() {
  std::vector<Worker*> newly_failed;
  for (auto& w : workers_) {
    const ExitState& s = w->process->poll();
    // While stopping, a worker that exits non-zero failed on its own only
    // if it wrote an error file (its own exception, often caused by the
    // first failure); one that our signal ended is no failure.
    if (s.exited && !s.ok() && !w->recorded && (!stopping_ || file_exists(w->error_file)))
      newly_failed.push_back(w.get());
  }
  // Among failures seen at once, the error file written first is the root
  // cause (its peers usually fail because it did).
  for (Worker* w : newly_failed) {
    w->recorded = true;
    WorkerFailure f;
    f.rank = round_.rank_offset + w->local_rank;
    f.local_rank = w->local_rank;
    f.pid = w->process->pid();
    f.state = w->process->state();
    // torch prints <N/A> for a worker that wrote no error file; a file in
    // the launcher's temporary folder is gone once it exits.
    f.error_file = w->error_file;
    f.error_file_shown = !file_exists(w->error_file) ? "<N/A>"
                         : config_.log_dir.empty() ? w->error_file + " (removed at exit; --log-dir keeps it)"
                                                   : w->error_file;
    f.host = host_name();
    f.time = now_text();
    f.message = read_error_message(w->error_file);
    if (f.message.empty()) {
      f.message = f.state.signal
                      ? "Signal " + std::to_string(f.state.signal) + " (" + signal_name(f.state.signal) +
                            ") received by PID " + std::to_string(f.pid)
                      : "<N/A> (the worker wrote no error file; see its stderr)";
    }
    failures_.push_back(std::move(f));
  }
  std::stable_sort(failures_.end() - static_cast<long>(newly_failed.size()), failures_.end(),
                   [](const WorkerFailure& a, const WorkerFailure& b) {
                     struct stat sa, sb;
                     bool ha = ::stat(a.error_file.c_str(), &sa) == 0,
                          hb = ::stat(b.error_file.c_str(), &sb) == 0;
                     if (ha != hb) return ha;
                     if (ha && sa.st_mtim.tv_sec != sb.st_mtim.tv_sec)
                       return sa.st_mtim.tv_sec < sb.st_mtim.tv_sec;
                     if (ha && sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec)
                       return sa.st_mtim.tv_nsec < sb.st_mtim.tv_nsec;
                     return a.rank < b.rank;
                   });
}

GroupState WorkerGroup::state() {
  reap();
  if (!failures_.empty()) return GroupState::kFailed;
  for (auto& w : workers_)
    if (!w->process->state().exited) return GroupState::kRunning;
  return GroupState::kSucceeded;
}

void WorkerGroup::stop(int sig, std::chrono::milliseconds grace) {
  reap();
  stopping_ = true;
  for (auto& w : workers_)
    if (!w->process->state().exited) w->process->signal_group(sig);
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    bool all_exited = true;
    for (auto& w : workers_) all_exited = all_exited && w->process->poll().exited;
    if (all_exited || std::chrono::steady_clock::now() >= deadline) break;
    pump(std::chrono::milliseconds(20), -1);
  }
  for (auto& w : workers_) {
    w->process->signal_group(SIGKILL);  // also any child left in the group
  }
  for (auto& w : workers_) {
    while (!w->process->poll().exited) pump(std::chrono::milliseconds(10), -1);
  }
  drain(std::chrono::seconds(1));
}

void WorkerGroup::drain(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto open_pipes = [&] {
    for (auto& w : workers_) {
      if (w->process->stdout_fd() >= 0 || w->process->stderr_fd() >= 0) return true;
    }
    return false;
  };
  while (open_pipes() && std::chrono::steady_clock::now() < deadline) pump(std::chrono::milliseconds(10), -1);
}

std::vector<pid_t> WorkerGroup::worker_pids() const {
  std::vector<pid_t> pids;
  for (auto& w : workers_) pids.push_back(w->process->pid());
  return pids;
}

}  // namespace cohort::launcher
