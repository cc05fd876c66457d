#include "cohort/device_mesh.h"

#include <algorithm>
#include <functional>
#include <set>

#include "cohort/errors.h"
#include "cohort/process_group.h"

namespace cohort {

struct DeviceMesh::State {
  std::string device_type;
  std::vector<int> shape;
  std::vector<int> ranks;    // row-major
  std::vector<int> strides;  // of each dimension in the root mesh's layout (torch prints them)
  std::vector<std::string> names;
  int me = -1;                                 // this process's global rank
  std::optional<std::vector<int>> coordinate;  // this rank's, if in the mesh
  std::vector<GroupPtr> groups;                // this rank's slice along each dim
};

namespace {

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

// strides of a row-major array of `shape`.
std::vector<int> strides_of(const std::vector<int>& shape) {
  std::vector<int> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

// slice_along is the ranks of the row through `start` (a flat index with
// coordinate 0 along `dim`) along `dim`.
std::vector<int> slice_along(const std::vector<int>& ranks, const std::vector<int>& shape,
                             const std::vector<int>& strides, int dim, int start) {
  std::vector<int> out;
  for (int i = 0; i < shape[dim]; ++i) out.push_back(ranks[static_cast<size_t>(start + i * strides[dim])]);
  return out;
}

}  // namespace

DeviceMesh::DeviceMesh(std::shared_ptr<const State> state) : state_(std::move(state)) {}

DeviceMesh::DeviceMesh(std::string device_type, std::vector<int> shape, std::vector<int> ranks,
                       std::vector<std::string> dim_names) {
  const std::string what = "DeviceMesh(" + device_type + ", shape " + list_text(shape) + ")";
  if (device_type != "cpu" && device_type != "cuda") {
    throw InvalidArgument(what + ": device_type is '" + device_type + "'; expected cpu or cuda");
  }
  if (shape.empty()) throw InvalidArgument(what + ": the shape has no dimensions");
  int64_t product = 1;
  for (int n : shape) {
    if (n <= 0) throw InvalidArgument(what + ": every dimension needs at least one rank");
    product *= n;
  }
  if (product != static_cast<int64_t>(ranks.size())) {
    throw InvalidArgument(what + ": the shape holds " + std::to_string(product) + " ranks, but " +
                          std::to_string(ranks.size()) + " were given");
  }
  const int world = get_world_size();
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= world) {
      throw InvalidArgument(what + ": rank " + std::to_string(r) + " is not in the job (world size " +
                            std::to_string(world) + ")");
    }
    if (!seen.insert(r).second)
      throw InvalidArgument(what + ": rank " + std::to_string(r) + " is given twice");
  }
  if (!dim_names.empty()) {
    if (dim_names.size() != shape.size()) {
      throw InvalidArgument(what + ": " + std::to_string(dim_names.size()) + " dimension names for " +
                            std::to_string(shape.size()) + " dimensions");
    }
    std::set<std::string> distinct(dim_names.begin(), dim_names.end());
    if (distinct.size() != dim_names.size() || distinct.count("")) {
      throw InvalidArgument(what + ": the dimension names " + names_text(dim_names) +
                            " must be distinct and not empty");
    }
  }
  auto s = std::make_shared<State>();
  s->device_type = std::move(device_type);
  s->shape = std::move(shape);
  s->ranks = std::move(ranks);
  s->names = std::move(dim_names);
  s->me = cohort::get_rank();  // the free function, not this mesh's
  const std::vector<int> strides = strides_of(s->shape);
  s->strides = strides;
  const auto at = std::find(s->ranks.begin(), s->ranks.end(), s->me);
  if (at != s->ranks.end()) {
    int flat = static_cast<int>(at - s->ranks.begin());
    std::vector<int> coordinate;
    for (size_t d = 0; d < s->shape.size(); ++d) {
      coordinate.push_back(flat / strides[d]);
      flat %= strides[d];
    }
    s->coordinate = coordinate;
  }
  // Every slice of every dimension, in the order every rank makes their
  // groups: dimension by dimension, slices by their first rank's index.
  const int ndim = static_cast<int>(s->shape.size());
  std::vector<std::vector<std::vector<int>>> slices(static_cast<size_t>(ndim));
  for (int d = 0; d < ndim; ++d) {
    for (int flat = 0; flat < static_cast<int>(s->ranks.size()); ++flat) {
      if ((flat / strides[d]) % s->shape[d] != 0) continue;  // not the start of a slice along d
      std::vector<int> slice = slice_along(s->ranks, s->shape, strides, d, flat);
      if (!std::is_sorted(slice.begin(), slice.end())) {
        // Groups number their ranks in increasing order (new_group, as
        // torch's): a slice in another order would put a rank's mesh
        // index and its group rank apart.
        throw InvalidArgument(what + ": the ranks along dimension " + std::to_string(d) +
                              " must increase, but one slice is " + list_text(slice));
      }
      slices[static_cast<size_t>(d)].push_back(std::move(slice));
    }
  }
  for (const auto& of_dim : slices) {
    GroupPtr mine;
    for (const std::vector<int>& slice : of_dim) {
      GroupPtr group = new_group(slice);
      const bool member = std::find(slice.begin(), slice.end(), s->me) != slice.end();
      if (member || !mine) mine = group;
    }
    s->groups.push_back(mine);
  }
  state_ = std::move(s);
}

const std::string& DeviceMesh::device_type() const {
  return state_->device_type;
}
int DeviceMesh::ndim() const {
  return static_cast<int>(state_->shape.size());
}
const std::vector<int>& DeviceMesh::shape() const {
  return state_->shape;
}
const std::vector<std::string>& DeviceMesh::mesh_dim_names() const {
  return state_->names;
}
const std::vector<int>& DeviceMesh::ranks() const {
  return state_->ranks;
}
int DeviceMesh::size() const {
  return static_cast<int>(state_->ranks.size());
}
int DeviceMesh::size(int dim) const {
  return state_->shape[static_cast<size_t>(checked_dim(dim, "size"))];
}
int DeviceMesh::size(const std::string& dim) const {
  return size(dim_index(dim, "size"));
}

int DeviceMesh::checked_dim(int dim, const char* what) const {
  if (dim < 0 || dim >= ndim()) {
    throw InvalidArgument(std::string("DeviceMesh::") + what + ": dimension " + std::to_string(dim) +
                          " is not one of the mesh's " + std::to_string(ndim()));
  }
  return dim;
}

int DeviceMesh::only_dim(const char* what) const {
  if (ndim() != 1) {
    throw InvalidArgument(std::string("DeviceMesh::") + what + ": the mesh has " + std::to_string(ndim()) +
                          " dimensions; name the one you mean");
  }
  return 0;
}

int DeviceMesh::dim_index(const std::string& name, const char* what) const {
  const auto& names = state_->names;
  if (names.empty()) {
    throw InvalidArgument(std::string("DeviceMesh::") + what + ": the mesh has no dimension names (so no '" +
                          name + "'); give mesh_dim_names when making it");
  }
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    throw InvalidArgument(std::string("DeviceMesh::") + what + ": no dimension '" + name +
                          "'; the mesh's are " + names_text(names));
  }
  return static_cast<int>(it - names.begin());
}

GroupPtr DeviceMesh::get_group(int dim) const {
  return state_->groups[static_cast<size_t>(checked_dim(dim, "get_group"))];
}
GroupPtr DeviceMesh::get_group(const std::string& dim) const {
  return get_group(dim_index(dim, "get_group"));
}
GroupPtr DeviceMesh::get_group() const {
  return get_group(only_dim("get_group"));
}
std::vector<GroupPtr> DeviceMesh::get_all_groups() const {
  return state_->groups;
}

int DeviceMesh::get_local_rank(int dim) const {
  checked_dim(dim, "get_local_rank");
  return state_->coordinate ? (*state_->coordinate)[static_cast<size_t>(dim)] : -1;
}
int DeviceMesh::get_local_rank(const std::string& dim) const {
  return get_local_rank(dim_index(dim, "get_local_rank"));
}
int DeviceMesh::get_local_rank() const {
  return get_local_rank(only_dim("get_local_rank"));
}
std::optional<std::vector<int>> DeviceMesh::get_coordinate() const {
  return state_->coordinate;
}
int DeviceMesh::get_rank() const {
  return state_->me;
}

DeviceMesh DeviceMesh::operator[](const std::string& dim) const {
  return (*this)[std::vector<std::string>{dim}];
}

DeviceMesh DeviceMesh::operator[](const std::vector<std::string>& dims) const {
  if (dims.empty()) throw InvalidArgument("DeviceMesh[]: no dimension named");
  std::vector<int> chosen;
  for (const std::string& name : dims) {
    const int d = dim_index(name, "operator[]");
    if (!chosen.empty() && d <= chosen.back()) {
      throw InvalidArgument("DeviceMesh[]: the dimensions " + names_text(dims) +
                            " must be distinct and in the mesh's order " + names_text(state_->names));
    }
    chosen.push_back(d);
  }
  if (!state_->coordinate) {
    throw InvalidArgument("DeviceMesh[]: rank " + std::to_string(state_->me) +
                          " is not in the mesh, so it has no sub-mesh");
  }
  auto s = std::make_shared<State>();
  s->device_type = state_->device_type;
  s->me = state_->me;
  std::vector<int> coordinate;
  for (int d : chosen) {
    s->shape.push_back(state_->shape[static_cast<size_t>(d)]);
    s->names.push_back(state_->names[static_cast<size_t>(d)]);
    s->groups.push_back(state_->groups[static_cast<size_t>(d)]);
    s->strides.push_back(state_->strides[static_cast<size_t>(d)]);
    coordinate.push_back((*state_->coordinate)[static_cast<size_t>(d)]);
  }
  s->coordinate = coordinate;
  // The sub-mesh's ranks, row-major over the chosen dimensions, this
  // rank's coordinate kept along the others.
  const std::vector<int> strides = strides_of(state_->shape);
  std::vector<int> at = *state_->coordinate;
  const std::function<void(size_t)> walk = [&](size_t k) {
    if (k == chosen.size()) {
      int flat = 0;
      for (size_t d = 0; d < at.size(); ++d) flat += at[d] * strides[d];
      s->ranks.push_back(state_->ranks[static_cast<size_t>(flat)]);
      return;
    }
    const size_t d = static_cast<size_t>(chosen[k]);
    for (int i = 0; i < state_->shape[d]; ++i) {
      at[d] = i;
      walk(k + 1);
    }
    at[d] = (*state_->coordinate)[d];
  };
  walk(0);
  return DeviceMesh(std::move(s));
}

std::string DeviceMesh::to_string() const {
  // torch 2.13's repr: DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1)); a
  // dimension of one rank has stride "()", a 1-tuple a trailing comma.
  const State& s = *state_;
  const bool one = s.shape.size() == 1;
  std::string shape = "(", stride = "(";
  for (size_t d = 0; d < s.shape.size(); ++d) {
    const std::string sep = d ? ", " : "";
    shape += sep + (s.names.empty() ? "" : s.names[d] + "=") + std::to_string(s.shape[d]);
    stride += sep + (s.shape[d] == 1 ? std::string("()") : std::to_string(s.strides[d]));
  }
  shape += one && s.names.empty() ? ",)" : ")";
  stride += one ? ",)" : ")";
  return "DeviceMesh(" + shape + ", '" + s.device_type + "', stride=" + stride + ")";
}

DeviceMesh init_device_mesh(const std::string& device_type, const std::vector<int>& mesh_shape,
                            const std::vector<std::string>& mesh_dim_names) {
  if (!is_initialized()) {
    throw InvalidArgument(
        "init_device_mesh: call init_process_group first (the mesh's groups are made "
        "from the default group)");
  }
  const int world = get_world_size();
  int64_t product = 1;
  for (int n : mesh_shape) product *= n;
  if (product != world) {
    throw InvalidArgument("init_device_mesh: the shape " + list_text(mesh_shape) + " holds " +
                          std::to_string(product) + " ranks, but the job has " + std::to_string(world));
  }
  std::vector<int> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) ranks[static_cast<size_t>(r)] = r;
  return DeviceMesh(device_type, mesh_shape, std::move(ranks), mesh_dim_names);
}

}  // namespace cohort
