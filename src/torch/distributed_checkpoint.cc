// Distributed checkpoints (cohort/distributed_checkpoint.h).
//
// A save, on every rank: agree on a fresh id (rank 0 draws it, a
// broadcast), write this rank's pieces into "__<rank>_<id>.distcp" and
// their list into ".part_<rank>_<id>" (each through a temporary name);
// then rank 0 waits for every rank's part, merges them into
// ".metadata" (temporary name, then rename: the commit point), and
// removes the parts and any data file of another id. Nothing but the id
// is a collective, so async_save can write on a thread of its own while
// the group goes on.
#include "cohort/distributed_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cohort/distributed.h"
#include "cohort/errors.h"
#include "cohort/fsdp.h"
#include "cohort/tensor.h"

namespace cohort::dcp {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return c10::str(c10::IntArrayRef(shape));
}

std::string data_name(int rank, const std::string& id) {
  return "__" + std::to_string(rank) + "_" + id + ".distcp";
}

std::string part_name(int rank, const std::string& id) {
  return ".part_" + std::to_string(rank) + "_" + id;
}

// write_file writes `bytes` to `path` through a temporary name in the same
// directory, synced, then renamed: a reader sees all of it or nothing.
void write_file(const fs::path& path, const void* bytes, size_t n) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("dcp: cannot write " + tmp.string() + ": " + std::strerror(errno));
  const auto* p = static_cast<const uint8_t*>(bytes);
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      throw Error("dcp: writing " + tmp.string() + " failed: " + std::strerror(err));
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw Error("dcp: cannot sync " + tmp.string());
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("dcp: cannot rename " + tmp.string() + " to " + path.string() + ": " + std::strerror(errno));
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("dcp: cannot read " + path.string() + " (no checkpoint there?)");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

at::ScalarType dtype_named(const std::string& name, const std::string& where) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kByte, at::kChar,
                           at::kShort, at::kInt, at::kLong, at::kBool}) {
    if (name == c10::toString(t)) return t;
  }
  throw InvalidArgument("dcp: " + where + " has dtype '" + name + "', which this build cannot read");
}

// A Plan is what this rank writes: its data file's bytes and the list of
// its pieces (entry name, offsets, sizes, byte offset) plus, on rank 0,
// the scalars and every tensor's dtype and shape.
struct Plan {
  std::vector<at::Tensor> pieces;  // contiguous CPU copies, in file order
  json part = json::object();
  size_t bytes = 0;
};

Plan plan_of(const StateDict& state, int rank, bool copy) {
  Plan plan;
  plan.part["pieces"] = json::array();
  plan.part["entries"] = json::object();
  for (const auto& [name, e] : state) {
    json entry;
    switch (e.kind) {
      case Entry::Kind::kInteger:
        entry = {{"kind", "integer"}, {"value", e.integer_value}};
        break;
      case Entry::Kind::kNumber:
        entry = {{"kind", "number"}, {"value", e.number_value}};
        break;
      case Entry::Kind::kText:
        entry = {{"kind", "text"}, {"value", e.text_value}};
        break;
      case Entry::Kind::kTensor: {
        if (static_cast<int64_t>(e.offsets.size()) != e.local.dim() ||
            e.global_shape.size() != e.offsets.size()) {
          throw InvalidArgument("dcp::save: entry '" + name + "': a piece of " +
                                shape_text(e.local.sizes().vec()) + " at offsets " + shape_text(e.offsets) +
                                " of a tensor of " + shape_text(e.global_shape) +
                                " (one offset and size per dimension)");
        }
        entry = {{"kind", "tensor"},
                 {"dtype", std::string(c10::toString(e.local.scalar_type()))},
                 {"shape", e.global_shape}};
        if (e.write && e.local.numel() > 0) {
          at::Tensor piece = e.local.detach().to(at::kCPU).contiguous();
          if (copy && piece.data_ptr() == e.local.data_ptr()) piece = piece.clone();
          plan.part["pieces"].push_back(
              {{"entry", name}, {"offsets", e.offsets}, {"sizes", piece.sizes().vec()}, {"at", plan.bytes}});
          plan.bytes += piece.nbytes();
          plan.pieces.push_back(std::move(piece));
        }
        break;
      }
    }
    if (rank == 0 || e.kind == Entry::Kind::kTensor) plan.part["entries"][name] = entry;
  }
  return plan;
}

// write_rank writes this rank's data file and part; rank 0 then commits.
void write_rank(const Plan& plan, const fs::path& dir, int rank, int world, const std::string& id,
                std::chrono::milliseconds timeout) {
  std::vector<uint8_t> bytes(plan.bytes);
  size_t at_ = 0;
  for (const at::Tensor& piece : plan.pieces) {
    std::memcpy(bytes.data() + at_, piece.data_ptr(), piece.nbytes());
    at_ += piece.nbytes();
  }
  write_file(dir / data_name(rank, id), bytes.data(), bytes.size());
  json part = plan.part;
  part["file"] = data_name(rank, id);
  const std::string text = part.dump();
  write_file(dir / part_name(rank, id), text.data(), text.size());
  if (rank != 0) return;

  // The commit: every rank's part, merged into ".metadata".
  const auto until = std::chrono::steady_clock::now() + timeout;
  json metadata = {{"id", id}, {"world_size", world}, {"entries", json::object()}};
  for (int r = 0; r < world; ++r) {
    const fs::path path = dir / part_name(r, id);
    while (!fs::exists(path)) {
      if (std::chrono::steady_clock::now() > until) {
        throw TimeoutError("dcp::save: rank " + std::to_string(r) + "'s part " + path.string() +
                           " did not come in " + std::to_string(timeout.count()) +
                           " ms (the rank failed or died while saving); " + "the previous checkpoint in " +
                           dir.string() + " is untouched");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const json theirs = json::parse(read_text(path));
    for (const auto& [name, entry] : theirs["entries"].items()) {
      json& mine = metadata["entries"][name];
      if (mine.is_null()) {
        mine = entry;
        if (entry["kind"] == "tensor") mine["pieces"] = json::array();
      }
    }
    for (const json& piece : theirs["pieces"]) {
      json p = piece;
      p["file"] = theirs["file"];
      metadata["entries"][piece["entry"].get<std::string>()]["pieces"].push_back(p);
    }
  }
  const std::string text_meta = metadata.dump();
  write_file(dir / ".metadata", text_meta.data(), text_meta.size());
  // Committed: what belongs to other saves (or to this one's parts) goes.
  for (const auto& file : fs::directory_iterator(dir)) {
    const std::string name = file.path().filename().string();
    const bool ours = name.find("_" + id + ".distcp") != std::string::npos;
    const bool data = name.rfind("__", 0) == 0 && name.find(".distcp") != std::string::npos;
    const bool a_part = name.rfind(".part_", 0) == 0;
    std::error_code ignored;
    if ((data && !ours) || a_part) fs::remove(file.path(), ignored);
  }
}

std::string agree_on_id(const GroupPtr& g) {
  at::Tensor id = at::zeros({1}, at::kLong);
  if (g->rank() == 0) {
    std::random_device device;
    id[0] = static_cast<int64_t>((static_cast<uint64_t>(device()) << 31) ^ device()) & 0x7fffffffffffffffLL;
  }
  broadcast(id, g->global_ranks().front(), g);
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id[0].item<int64_t>()));
  return text;
}

}  // namespace

Entry Entry::tensor(const at::Tensor& whole) {
  Entry e;
  e.local = whole;
  e.global_shape = whole.sizes().vec();
  e.offsets.assign(static_cast<size_t>(whole.dim()), 0);
  e.write = get_rank() == 0;
  return e;
}

Entry Entry::dtensor(const DTensor& t) {
  Entry e;
  e.local = t.to_local();
  e.global_shape = t.shape();
  e.offsets.assign(t.shape().size(), 0);
  const DeviceMesh& mesh = t.device_mesh();
  for (int i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = t.placements()[static_cast<size_t>(i)];
    if (p.is_partial()) {
      throw InvalidArgument("dcp: a DTensor laid out as " + t.to_string() +
                            " holds partial values: redistribute it to Replicate or Shard before saving");
    }
    const int index = mesh.get_local_rank(i);
    if (p.is_shard()) {
      e.offsets[static_cast<size_t>(p.dim)] =
          shard_range(t.shape()[static_cast<size_t>(p.dim)], mesh.size(i), index).first;
    } else if (index != 0) {
      e.write = false;  // a replicated copy: the mesh's first along this dimension writes it
    }
  }
  return e;
}

Entry Entry::piece(const at::Tensor& local, std::vector<int64_t> global_shape, std::vector<int64_t> offsets,
                   bool write) {
  Entry e;
  e.local = local;
  e.global_shape = std::move(global_shape);
  e.offsets = std::move(offsets);
  e.write = write;
  return e;
}

Entry Entry::integer(int64_t value) {
  Entry e;
  e.kind = Kind::kInteger;
  e.integer_value = value;
  return e;
}

Entry Entry::number(double value) {
  Entry e;
  e.kind = Kind::kNumber;
  e.number_value = value;
  return e;
}

Entry Entry::text(std::string value) {
  Entry e;
  e.kind = Kind::kText;
  e.text_value = std::move(value);
  return e;
}

void save(const StateDict& state, const std::string& dir, const GroupPtr& group) {
  std::future<void> done = async_save(state, dir, group);
  done.get();
  barrier({}, group)->wait();  // every rank returns once the checkpoint is committed
}

std::future<void> async_save(const StateDict& state, const std::string& dir, const GroupPtr& group) {
  const GroupPtr g = group ? group : default_group();
  const int rank = g->rank(), world = g->size();
  const std::string id = agree_on_id(g);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("dcp::save: cannot make " + dir + ": " + error.message());
  // The pieces are copied now: training may change them while they are written.
  auto plan = std::make_shared<Plan>(plan_of(state, rank, /*copy=*/true));
  const auto timeout = g->timeout();
  return std::async(std::launch::async, [plan, dir, rank, world, id, timeout] {
    write_rank(*plan, dir, rank, world, id, timeout);
  });
}

void load(StateDict& state, const std::string& dir) {
  const fs::path root(dir);
  const json metadata = json::parse(read_text(root / ".metadata"));
  std::map<std::string, std::ifstream> files;
  at::NoGradGuard no_grad;
  for (auto& [name, e] : state) {
    const json& saved = metadata["entries"].contains(name) ? metadata["entries"][name] : json();
    if (saved.is_null())
      throw InvalidArgument("dcp::load: the checkpoint in " + dir + " has no entry '" + name + "'");
    const std::string kind = saved["kind"];
    if (e.kind == Entry::Kind::kInteger && kind == "integer") {
      e.integer_value = saved["value"];
      continue;
    }
    if (e.kind == Entry::Kind::kNumber && kind == "number") {
      e.number_value = saved["value"];
      continue;
    }
    if (e.kind == Entry::Kind::kText && kind == "text") {
      e.text_value = saved["value"];
      continue;
    }
    if (e.kind != Entry::Kind::kTensor || kind != "tensor") {
      throw InvalidArgument("dcp::load: entry '" + name + "' is a " + kind + " in the checkpoint in " + dir);
    }
    const std::vector<int64_t> shape = saved["shape"];
    if (shape != e.global_shape) {
      throw InvalidArgument("dcp::load: entry '" + name + "' has shape " + shape_text(shape) +
                            " in the checkpoint but " + shape_text(e.global_shape) + " here");
    }
    const at::ScalarType dtype = dtype_named(saved["dtype"], "entry '" + name + "'");
    const int64_t nd = static_cast<int64_t>(shape.size());
    int64_t covered = 0;
    for (const json& piece : saved["pieces"]) {
      const std::vector<int64_t> offsets = piece["offsets"], sizes = piece["sizes"];
      // The overlap of the saved piece and this rank's, dimension by dimension.
      std::vector<int64_t> lo(nd), hi(nd);
      bool empty = false;
      for (int64_t d = 0; d < nd; ++d) {
        lo[d] = std::max(offsets[d], e.offsets[d]);
        hi[d] = std::min(offsets[d] + sizes[d], e.offsets[d] + e.local.size(d));
        empty = empty || lo[d] >= hi[d];
      }
      if (empty) continue;
      const std::string file = piece["file"];
      auto it = files.find(file);
      if (it == files.end()) it = files.emplace(file, std::ifstream(root / file, std::ios::binary)).first;
      if (!it->second) throw InvalidArgument("dcp::load: cannot read " + (root / file).string());
      at::Tensor saved_piece = at::empty(sizes, at::TensorOptions().dtype(dtype));
      it->second.seekg(static_cast<std::streamoff>(piece["at"].get<int64_t>()));
      it->second.read(static_cast<char*>(saved_piece.data_ptr()),
                      static_cast<std::streamsize>(saved_piece.nbytes()));
      if (!it->second)
        throw InvalidArgument("dcp::load: " + (root / file).string() + " is shorter than its metadata says");
      at::Tensor from = saved_piece, to = e.local;
      int64_t count = 1;
      for (int64_t d = 0; d < nd; ++d) {
        from = from.narrow(d, lo[d] - offsets[d], hi[d] - lo[d]);
        to = to.narrow(d, lo[d] - e.offsets[d], hi[d] - lo[d]);
        count *= hi[d] - lo[d];
      }
      to.copy_(from);
      covered += count;
    }
    if (covered != e.local.numel()) {
      throw InvalidArgument("dcp::load: the checkpoint in " + dir + " covers " + std::to_string(covered) +
                            " of the " + std::to_string(e.local.numel()) + " elements of entry '" + name +
                            "' that this rank " + "reads (" + shape_text(e.local.sizes().vec()) + " at " +
                            shape_text(e.offsets) + ")");
    }
  }
}

StateDict sharded_state_dict(torch::nn::Module& module) {
  StateDict state;
  for (auto& named : module.named_parameters(true)) {
    const at::Tensor& p = named.value();
    if (FSDPUnit* unit = fsdp_unit_of(p)) {
      std::vector<int64_t> shape = unit->full_shape(p);
      if (shape.empty()) shape = {1};  // a scalar is sharded as one row
      std::vector<int64_t> offsets(shape.size(), 0);
      offsets[0] = unit->shard_offset(p);
      // Between steps the parameter holds this rank's rows (a replicated
      // copy under HSDP: the first along the replicate dimension writes).
      const bool first_replica = unit->mesh().ndim() == 1 || unit->mesh().get_local_rank(0) == 0;
      state[named.key()] = Entry::piece(p.reshape(p.dim() == 0 ? std::vector<int64_t>{1} : p.sizes().vec()),
                                        shape, offsets, first_replica);
    } else {
      state[named.key()] = Entry::tensor(p);
    }
  }
  for (auto& named : module.named_buffers(true)) state[named.key()] = Entry::tensor(named.value());
  return state;
}

}  // namespace cohort::dcp
