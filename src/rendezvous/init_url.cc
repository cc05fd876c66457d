#include "rendezvous/init_url.h"

#include <cerrno>
#include <cstdlib>

#include "cohort/errors.h"
#include "cohort/file_store.h"
#include "cohort/tcp_store.h"

namespace cohort {
namespace {

int64_t parse_number(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    throw InvalidArgument(what + " is '" + text + "', expected an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  }
  return v;
}

std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw InvalidArgument(std::string("env:// rendezvous: environment variable ") + name + " is not set");
  return v;
}

// launcher_env reads `name`, or when it is unset the same value as mpirun
// (OMPI_COMM_WORLD_*) or Slurm's srun (SLURM_*) publish it, so that a
// program started by either finds its rank through env://.
std::string launcher_env(const char* name) {
  const char* v = std::getenv(name);
  if (v && *v) return v;
  const std::string n = name;
  const char* fallbacks[2] = {nullptr, nullptr};
  if (n == "RANK") fallbacks[0] = "OMPI_COMM_WORLD_RANK", fallbacks[1] = "SLURM_PROCID";
  if (n == "WORLD_SIZE") fallbacks[0] = "OMPI_COMM_WORLD_SIZE", fallbacks[1] = "SLURM_NTASKS";
  for (const char* f : fallbacks) {
    const char* fv = f ? std::getenv(f) : nullptr;
    if (fv && *fv) return fv;
  }
  if (fallbacks[0]) {
    throw InvalidArgument(std::string("env:// rendezvous: environment variable ") + name +
                          " is not set (nor " + fallbacks[0] + " of mpirun, nor " + fallbacks[1] +
                          " of srun)");
  }
  return require_env(name);
}

// pick resolves rank or world size: the argument, else the URL, else env.
int pick(int given, const InitUrl& url, const char* param, const char* env_name, bool from_env, int64_t hi) {
  if (given >= 0) return given;
  auto it = url.query.find(param);
  if (it != url.query.end())
    return static_cast<int>(parse_number(it->second, std::string("init URL parameter ") + param, 0, hi));
  if (from_env)
    return static_cast<int>(
        parse_number(launcher_env(env_name), std::string("environment variable ") + env_name, 0, hi));
  throw InvalidArgument(std::string("init URL needs '") + param + "': pass it to the call or as ?" + param +
                        "=N");
}

}  // namespace

InitUrl parse_init_url(const std::string& url) {
  InitUrl out;
  auto sep = url.find("://");
  if (sep == std::string::npos)
    throw InvalidArgument("init URL '" + url + "' has no scheme (env://, tcp:// or file://)");
  out.scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  auto q = rest.find('?');
  if (q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    size_t start = 0;
    while (start <= query.size()) {
      size_t amp = query.find('&', start);
      std::string item = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
      if (!item.empty()) {
        auto eq = item.find('=');
        if (eq == std::string::npos)
          throw InvalidArgument("init URL '" + url + "': query item '" + item + "' has no '='");
        out.query[item.substr(0, eq)] = item.substr(eq + 1);
      }
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  if (out.scheme == "env") return out;
  if (out.scheme == "file") {
    if (rest.empty()) throw InvalidArgument("init URL '" + url + "' names no file");
    out.path = rest;
    return out;
  }
  if (out.scheme != "tcp") {
    throw InvalidArgument("init URL '" + url + "': unknown scheme '" + out.scheme +
                          "' (env://, tcp:// or file://)");
  }
  std::string port_text;
  if (!rest.empty() && rest[0] == '[') {  // [v6]:port
    auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      throw InvalidArgument("init URL '" + url + "': expected tcp://[v6addr]:port");
    }
    out.host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string::npos)
      throw InvalidArgument("init URL '" + url + "' has no port (tcp://host:port)");
    out.host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  }
  if (out.host.empty()) throw InvalidArgument("init URL '" + url + "' has no host");
  out.port = static_cast<uint16_t>(parse_number(port_text, "port of init URL '" + url + "'", 1, 65535));
  return out;
}

Rendezvous rendezvous(const std::string& url_text, int rank, int world_size,
                      std::chrono::milliseconds timeout, std::string* master_host) {
  InitUrl url = parse_init_url(url_text);
  const bool from_env = url.scheme == "env";
  Rendezvous r;
  r.world_size = pick(world_size, url, "world_size", "WORLD_SIZE", from_env, 1 << 24);
  r.rank = pick(rank, url, "rank", "RANK", from_env, 1 << 24);
  if (r.world_size < 1) throw InvalidArgument("world_size is 0; expected at least 1");
  if (r.rank >= r.world_size) {
    throw InvalidArgument("rank " + std::to_string(r.rank) + " is out of range for world_size " +
                          std::to_string(r.world_size));
  }
  if (master_host) *master_host = "";
  if (url.scheme == "file") {
    r.store = std::make_shared<FileStore>(url.path, r.world_size);
    r.store->set_timeout(timeout);
    return r;
  }
  if (from_env) {
    url.host = require_env("MASTER_ADDR");
    url.port = static_cast<uint16_t>(
        parse_number(require_env("MASTER_PORT"), "environment variable MASTER_PORT", 1, 65535));
  }
  if (master_host) *master_host = url.host;
  TcpStoreOptions options;
  options.port = url.port;
  // A launcher that hosts the job's store itself (torchrun's agent,
  // cohort-bench --spawn) says so, as torch's env:// and tcp:// read it:
  // then every rank is its client, rank 0 too. Bound before any rank
  // starts, its port is never free between being picked and being bound.
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool launcher_hosts = agent_store && std::string(agent_store) == "True";
  options.is_server = r.rank == 0 && !launcher_hosts;
  options.server_owner = launcher_hosts ? "the launcher (TORCHELASTIC_USE_AGENT_STORE=True)" : "rank 0";
  options.num_workers = r.world_size;
  // Joining is awaited by the process group, which can name the ranks that
  // never arrived; the store would only count them.
  options.wait_for_workers = false;
  options.timeout = timeout;
  auto token = url.query.find("token");
  if (token != url.query.end()) options.token = token->second;
  r.store = std::make_shared<TcpStore>(url.host, options);
  return r;
}

}  // namespace cohort
