#include "diagnostics/trace_dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/json.h"
#include "common/size_text.h"

namespace cohort {
namespace {

constexpr int kFormatVersion = 1;

int64_t us_of(int64_t steady_ns, int64_t offset_ns) {
  return steady_ns == 0 ? 0 : (steady_ns + offset_ns) / 1000;
}

Json progress_json(const Progress& p) {
  Json j = Json::object();
  j.set("enqueued", p.enqueued);
  j.set("started", p.started);
  j.set("completed", p.completed);
  j.set("failed", p.failed);
  j.set("finished", p.finished);
  return j;
}

Progress progress_of(const Json& j) {
  Progress p;
  p.enqueued = static_cast<uint64_t>(j["enqueued"].as_int());
  p.started = static_cast<uint64_t>(j["started"].as_int());
  p.completed = static_cast<uint64_t>(j["completed"].as_int());
  p.failed = static_cast<uint64_t>(j["failed"].as_int());
  p.finished = static_cast<uint64_t>(j["finished"].as_int());
  return p;
}

Json record_json(const TraceRecord& r) {
  Json j = Json::object();
  j.set("id", r.id);
  j.set("kind", r.collective ? "collective" : "p2p");
  j.set("sequence", r.sequence);
  j.set("op", r.op);
  j.set("state", op_state_name(r.state));
  j.set("input_count", r.input_count);
  j.set("output_count", r.output_count);
  j.set("dtype", r.dtype.empty() ? Json() : Json(r.dtype));
  j.set(r.collective ? "root" : "peer", r.peer);
  if (!r.collective) j.set("tag", r.tag);
  j.set("enqueued_us", r.enqueued_us);
  j.set("started_us", r.started_us);
  j.set("ended_us", r.ended_us);
  if (!r.error.empty()) j.set("error", r.error);
  return j;
}

Result<OpState> state_of(const std::string& name) {
  for (OpState s : {OpState::kScheduled, OpState::kStarted, OpState::kCompleted, OpState::kFailed}) {
    if (name == op_state_name(s)) return s;
  }
  return Status(StatusCode::kInvalidArgument, "unknown state '" + name + "'");
}

Result<TraceRecord> record_of(const Json& j) {
  TraceRecord r;
  if (!j["sequence"].is_number() || j["op"].as_string().empty()) {
    return Status(StatusCode::kInvalidArgument, "an entry without a sequence number or op");
  }
  r.id = static_cast<uint64_t>(j["id"].as_int());
  r.collective = j["kind"].as_string() != "p2p";
  r.sequence = static_cast<uint64_t>(j["sequence"].as_int());
  r.op = j["op"].as_string();
  auto state = state_of(j["state"].as_string());
  if (!state.ok()) return state.status();
  r.state = state.value();
  r.input_count = static_cast<uint64_t>(j["input_count"].as_int());
  r.output_count = static_cast<uint64_t>(j["output_count"].as_int());
  r.dtype = j["dtype"].as_string();
  r.peer = static_cast<int>(j[r.collective ? "root" : "peer"].as_int(-1));
  r.tag = static_cast<int>(j["tag"].as_int());
  r.enqueued_us = j["enqueued_us"].as_int();
  r.started_us = j["started_us"].as_int();
  r.ended_us = j["ended_us"].as_int();
  r.error = j["error"].as_string();
  return r;
}

Json group_json(const GroupDump& g) {
  Json j = Json::object();
  j.set("name", g.name);
  j.set("rank", g.rank);
  j.set("size", g.size);
  Json ranks = Json::array();
  for (int r : g.global_ranks) ranks.push(r);
  j.set("global_ranks", std::move(ranks));
  j.set("backend", g.backend);
  j.set("capacity", g.capacity);
  j.set("collectives", progress_json(g.collectives));
  j.set("p2p", progress_json(g.p2p));
  Json entries = Json::array();
  for (const TraceRecord& r : g.entries) entries.push(record_json(r));
  j.set("entries", std::move(entries));
  if (!g.arrivals.is_null()) j.set("arrivals", g.arrivals);
  return j;
}

Result<GroupDump> group_of(const Json& j) {
  GroupDump g;
  g.name = j["name"].as_string();
  if (g.name.empty()) return Status(StatusCode::kInvalidArgument, "a group without a name");
  g.rank = static_cast<int>(j["rank"].as_int(-1));
  g.size = static_cast<int>(j["size"].as_int());
  for (const Json& r : j["global_ranks"].items()) g.global_ranks.push_back(static_cast<int>(r.as_int(-1)));
  if (g.size < 1 || g.rank < 0 || g.rank >= g.size || static_cast<int>(g.global_ranks.size()) != g.size) {
    return Status(StatusCode::kInvalidArgument,
                  "group " + g.name + ": its rank, size and global ranks disagree");
  }
  g.backend = j["backend"].as_string();
  g.capacity = static_cast<uint64_t>(j["capacity"].as_int());
  g.collectives = progress_of(j["collectives"]);
  g.p2p = progress_of(j["p2p"]);
  for (const Json& e : j["entries"].items()) {
    auto r = record_of(e);
    if (!r.ok()) return r.status().with_context("group " + g.name);
    g.entries.push_back(std::move(r.value()));
  }
  g.arrivals = j["arrivals"];
  return g;
}

}  // namespace

std::string record_size_text(const TraceRecord& r) {
  if (r.dtype.empty()) return "";
  size_t element = 0;
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                  DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kBool}) {
    if (r.dtype == dtype_name(d)) element = dtype_size(d);
  }
  return bytes_text(std::max(r.input_count, r.output_count) * element) + " " + r.dtype;
}

std::string record_text(const TraceRecord& r) {
  const std::string size = record_size_text(r);
  if (r.collective) return r.op + " #" + std::to_string(r.sequence) + (size.empty() ? "" : " (" + size + ")");
  const std::string peer = r.peer < 0 ? "any rank" : std::to_string(r.peer);
  return r.op + (r.op == "send" ? " to " : " from ") + peer + " tag " + std::to_string(r.tag) + " (p2p #" +
         std::to_string(r.sequence) + (size.empty() ? "" : ", " + size) + ")";
}

int64_t unix_offset_ns() {
  const int64_t unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  return unix_ns - trace_clock_ns();
}

TraceRecord trace_record_of(const TraceEntry& e, int64_t unix_offset) {
  TraceRecord r;
  r.id = e.id;
  r.op = e.op;
  r.collective = e.collective;
  r.sequence = e.sequence;
  r.state = e.state;
  r.input_count = e.shape.input_count;
  r.output_count = e.shape.output_count;
  r.dtype = e.shape.has_dtype ? dtype_name(e.shape.dtype) : "";
  r.peer = e.shape.peer;
  r.tag = e.shape.tag;
  r.enqueued_us = us_of(e.enqueued_ns, unix_offset);
  r.started_us = us_of(e.started_ns, unix_offset);
  r.ended_us = us_of(e.ended_ns, unix_offset);
  r.error = e.error;
  return r;
}

std::string rank_dump_json(const RankDump& d) {
  Json j = Json::object();
  j.set("format", "cohort-trace");
  j.set("version", kFormatVersion);
  j.set("global_rank", d.global_rank);
  j.set("pid", d.pid);
  j.set("host", d.host);
  j.set("reason", d.reason);
  j.set("dumped_us", d.dumped_us);
  Json groups = Json::array();
  for (const GroupDump& g : d.groups) groups.push(group_json(g));
  j.set("groups", std::move(groups));
  return j.dump(2) + "\n";
}

Result<RankDump> parse_rank_dump(const std::string& text) {
  auto parsed = Json::parse(text);
  if (!parsed.ok()) return parsed.status();
  const Json& j = parsed.value();
  if (j["format"].as_string() != "cohort-trace") {
    return Status(StatusCode::kInvalidArgument, "not a cohort-trace dump (no \"format\": \"cohort-trace\")");
  }
  if (j["version"].as_int() != kFormatVersion) {
    return Status(StatusCode::kInvalidArgument,
                  "dump format version " + std::to_string(j["version"].as_int()) +
                      "; this tool reads version " + std::to_string(kFormatVersion));
  }
  RankDump d;
  d.global_rank = static_cast<int>(j["global_rank"].as_int(-1));
  if (d.global_rank < 0) return Status(StatusCode::kInvalidArgument, "the dump names no global rank");
  d.pid = j["pid"].as_int();
  d.host = j["host"].as_string();
  d.reason = j["reason"].as_string();
  d.dumped_us = j["dumped_us"].as_int();
  for (const Json& g : j["groups"].items()) {
    auto group = group_of(g);
    if (!group.ok()) return group.status();
    d.groups.push_back(std::move(group.value()));
  }
  return d;
}

Status write_file_replacing(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status(StatusCode::kInvalidArgument, "cannot write " + temp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return Status(StatusCode::kInvalidArgument, "cannot write " + temp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  // The data reaches the disk before the name does: a crash leaves the old
  // file or the new one, never a truncated file under the final name.
  ::fsync(fd);
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    return Status(StatusCode::kInvalidArgument, "cannot rename " + temp + " to " + path + ": " + why);
  }
  return Status::ok_status();
}

Status write_rank_dump(const std::string& dir, const RankDump& dump) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status(StatusCode::kInvalidArgument,
                  "cannot create the trace directory " + dir + ": " + std::strerror(errno));
  }
  return write_file_replacing(dir + "/rank_" + std::to_string(dump.global_rank) + ".json",
                              rank_dump_json(dump));
}

Result<std::vector<RankDump>> read_rank_dumps(const std::string& dir, std::vector<std::string>* problems) {
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    return Status(StatusCode::kInvalidArgument, "cannot read directory " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("rank_", 0) == 0 && name.size() > 10 && name.compare(name.size() - 5, 5, ".json") == 0) {
      names.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<RankDump> dumps;
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    auto dump = parse_rank_dump(text.str());
    if (!dump.ok()) {
      problems->push_back(name + ": " + dump.status().message());
      continue;
    }
    dumps.push_back(std::move(dump.value()));
  }
  std::sort(dumps.begin(), dumps.end(),
            [](const RankDump& a, const RankDump& b) { return a.global_rank < b.global_rank; });
  return dumps;
}

}  // namespace cohort
