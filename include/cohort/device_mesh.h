// device_mesh.h: torch's DeviceMesh, an N-dimensional array of the job's
// ranks whose every dimension has its process groups, for programs that
// shard along one dimension and replicate along another (FSDP over "dp",
// tensor parallelism over "tp").
//
//   // 4 ranks: [[0, 1], [2, 3]]; rank 2 is at (1, 0).
//   auto mesh = cohort::init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
//   auto tp = mesh.get_group("tp");      // ranks {2, 3} on rank 2
//   int dp_rank = mesh.get_local_rank("dp");  // 1 on rank 2
//   cohort::DeviceMesh row = mesh["tp"];  // the 1-D mesh [2, 3]
//
// As torch's (torch.distributed.device_mesh, 2.13): ranks are laid out in
// row-major order; the groups of every dimension are made once, when the
// mesh is (every rank calls new_group for every slice, in the same order,
// so the ranks agree without talking); slicing a mesh by names reuses its
// groups. init_device_mesh and the DeviceMesh constructor are collective:
// every rank of the job calls them with the same arguments.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cohort/distributed.h"

namespace cohort {

class DeviceMesh {
 public:
  // DeviceMesh lays the global `ranks` (row-major, each once) out in
  // `shape`, naming the dimensions `dim_names` (empty, or one distinct name
  // per dimension), and makes every dimension's groups. `device_type` is
  // "cpu" or "cuda". Throws InvalidArgument naming what is wrong: a shape
  // whose product is not the number of ranks, a rank out of the job or
  // given twice, names that repeat or do not match the dimensions.
  DeviceMesh(std::string device_type, std::vector<int> shape, std::vector<int> ranks,
             std::vector<std::string> dim_names = {});

  const std::string& device_type() const;
  int ndim() const;
  const std::vector<int>& shape() const;
  const std::vector<std::string>& mesh_dim_names() const;
  // ranks is the mesh's global ranks, row-major.
  const std::vector<int>& ranks() const;
  // size is the number of ranks, or the length of one dimension.
  int size() const;
  int size(int dim) const;
  int size(const std::string& dim) const;

  // get_group is the group of this rank's slice along `dim` (a non-member
  // handle on a rank outside the mesh); without a dimension, a 1-D mesh's
  // only one.
  GroupPtr get_group(int dim) const;
  GroupPtr get_group(const std::string& dim) const;
  GroupPtr get_group() const;
  std::vector<GroupPtr> get_all_groups() const;

  // get_local_rank is this rank's index along `dim`: its rank in
  // get_group(dim). -1 on a rank outside the mesh.
  int get_local_rank(int dim) const;
  int get_local_rank(const std::string& dim) const;
  int get_local_rank() const;
  // get_coordinate is this rank's index along every dimension, nullopt
  // outside the mesh.
  std::optional<std::vector<int>> get_coordinate() const;
  // get_rank is this process's global rank.
  int get_rank() const;

  // operator[] is the sub-mesh of this rank along the named dimensions
  // (given in the mesh's order), keeping this rank's place along the
  // others; it shares this mesh's groups.
  DeviceMesh operator[](const std::string& dim) const;
  DeviceMesh operator[](const std::vector<std::string>& dims) const;

  // to_string is "DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1))", as
  // torch 2.13 prints one.
  std::string to_string() const;

 private:
  struct State;
  explicit DeviceMesh(std::shared_ptr<const State> state);
  int dim_index(const std::string& name, const char* what) const;
  int checked_dim(int dim, const char* what) const;
  int only_dim(const char* what) const;  // a 1-D mesh's dimension, for calls that name none
  std::shared_ptr<const State> state_;
};

// init_device_mesh makes a mesh of every rank of the job in `mesh_shape`
// (torch's init_device_mesh): the product of the shape must be the world
// size.
DeviceMesh init_device_mesh(const std::string& device_type, const std::vector<int>& mesh_shape,
                            const std::vector<std::string>& mesh_dim_names = {});

}  // namespace cohort
