// groups_worker: one rank of the tests of groups as torch has them
// (groups_process_test.cc), at 4 ranks joined by env://.
//
//   groups_worker MODE
//
// Modes:
//   semantics   new_group({3, 1}): sorted ranks; ranks 0 and 2 get a handle
//               that is not a member, whose calls do nothing and whose
//               rank queries say -1 or throw naming the rank; members sum;
//               backend queries; destroy_process_group(group) of one group
//   global-sync new_group with torch's default synchronisation: no rank
//               returns before rank 3, which comes late, has called it
//   local-sync  new_group({0, 1}) with use_local_synchronization: ranks 0, 1
//               and 2 return without rank 3, which calls it only after they
//               did (else the job would time out)
//   absent      rank 3 never calls new_group: the others get TimeoutError
//               saying how many ranks called it
//   join        init_process_group and a barrier, any world size (for the
//               tests of ranks given twice and of world sizes that differ)
//   join-hold   join; rank 0 then hosts the store until a stranger was
//               refused there
//   mesh        init_device_mesh: a 2 x 2 mesh's coordinates, local ranks,
//               groups (all_reduce along each dimension), sub-meshes that
//               share its groups, a 1-D and a 1 x 2 x 2 mesh, and the
//               errors of bad shapes and names
//   mesh-print  three meshes as tests/python/mesh_reference.py prints
//               torch's, a line each
// Prints "rank R ok: ..." and exits 0 when the rank saw what it should,
// else prints what was wrong and exits 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cohort/device_mesh.h"
#include "cohort/distributed.h"
#include "cohort/errors.h"

using namespace cohort;

namespace {

int fail(int rank, const std::string& what) {
  std::printf("rank %d wrong: %s\n", rank, what.c_str());
  std::fflush(stdout);
  return 1;
}

// throws_invalid runs `call` and returns the InvalidArgument's message, or
// "" when it did not throw one.
template <class Call>
std::string throws_invalid(Call call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

// sum_over adds every member's `value` over `group`.
int sum_over(const GroupPtr& group, int value) {
  int32_t x = value;
  all_reduce(Buffer::of(&x, 1), {}, group);
  return x;
}

std::string text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

int mesh(int rank) {
  // [[0, 1], [2, 3]]: rank r is at (r / 2, r % 2).
  DeviceMesh m = init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
  const int row = rank / 2, col = rank % 2;
  if (m.ndim() != 2 || m.size() != 4 || m.size("tp") != 2) return fail(rank, "shape");
  if (m.get_coordinate() != std::vector<int>{row, col}) return fail(rank, "coordinate");
  if (m.get_local_rank("dp") != row || m.get_local_rank(1) != col) return fail(rank, "local ranks");
  if (m.get_group("tp")->global_ranks() != std::vector<int>{2 * row, 2 * row + 1})
    return fail(rank, "tp group " + text(m.get_group("tp")->global_ranks()));
  if (m.get_group("dp")->global_ranks() != std::vector<int>{col, col + 2})
    return fail(rank, "dp group " + text(m.get_group("dp")->global_ranks()));
  // Along tp the ranks of a row sum; along dp those of a column.
  if (sum_over(m.get_group("tp"), rank) != 4 * row + 1) return fail(rank, "sum over tp");
  if (sum_over(m.get_group("dp"), rank) != 2 * col + 2) return fail(rank, "sum over dp");
  if (m.to_string() != "DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1))")
    return fail(rank, "printed as " + m.to_string());

  // A sub-mesh is this rank's row (or column), with the parent's group.
  DeviceMesh tp = m["tp"];
  if (tp.ndim() != 1 || tp.ranks() != std::vector<int>{2 * row, 2 * row + 1}) return fail(rank, "m[tp]");
  if (tp.get_group() != m.get_group("tp") || tp.get_local_rank() != col) return fail(rank, "m[tp]'s group");
  if (m["dp"].ranks() != std::vector<int>{col, col + 2}) return fail(rank, "m[dp] " + text(m["dp"].ranks()));
  if (m[std::vector<std::string>{"dp", "tp"}].ranks() != std::vector<int>{0, 1, 2, 3})
    return fail(rank, "m[dp, tp]");

  // 1-D, and 1 x 2 x 2 (a replicate dimension of one).
  DeviceMesh flat = init_device_mesh("cpu", {4});
  if (sum_over(flat.get_group(), 1) != 4 || flat.get_local_rank() != rank) return fail(rank, "1-D mesh");
  DeviceMesh hsdp = init_device_mesh("cpu", {1, 2, 2}, {"rep", "dp", "tp"});
  if (hsdp.get_group("rep")->size() != 1 || sum_over(hsdp.get_group("tp"), 1) != 2)
    return fail(rank, "3-D mesh");
  if (hsdp[std::vector<std::string>{"dp", "tp"}].ranks() != std::vector<int>{0, 1, 2, 3})
    return fail(rank, "3-D sub-mesh");

  // Mistakes are named.
  const std::string shape = throws_invalid([] { init_device_mesh("cpu", {3, 2}); });
  if (shape.find("holds 6 ranks, but the job has 4") == std::string::npos)
    return fail(rank, "shape: " + shape);
  const std::string name = throws_invalid([&] { m.get_group("pp"); });
  if (name.find("no dimension 'pp'; the mesh's are ('dp', 'tp')") == std::string::npos)
    return fail(rank, "name: " + name);
  const std::string order = throws_invalid([&] { m[std::vector<std::string>{"tp", "dp"}]; });
  if (order.find("in the mesh's order") == std::string::npos) return fail(rank, "order: " + order);
  const std::string twice = throws_invalid([] { init_device_mesh("cpu", {2, 2}, {"a", "a"}); });
  if (twice.find("must be distinct") == std::string::npos) return fail(rank, "names: " + twice);
  const std::string device = throws_invalid([] { init_device_mesh("tpu", {4}); });
  if (device.find("expected cpu or cuda") == std::string::npos) return fail(rank, "device: " + device);
  const std::string unnamed = throws_invalid([&] { flat.get_local_rank("dp"); });
  if (unnamed.find("has no dimension names") == std::string::npos) return fail(rank, "unnamed: " + unnamed);
  const std::string descending = throws_invalid([] { DeviceMesh("cpu", {2, 2}, {1, 0, 3, 2}); });
  if (descending.find("the ranks along dimension 1 must increase, but one slice is [1, 0]") ==
      std::string::npos)
    return fail(rank, "descending slice: " + descending);
  const std::string nd = throws_invalid([&] { m.get_group(); });
  if (nd.find("the mesh has 2 dimensions; name the one you mean") == std::string::npos)
    return fail(rank, "2-D get_group(): " + nd);
  std::printf("rank %d ok: mesh %s, at (%d, %d)\n", rank, m.to_string().c_str(), row, col);
  return 0;
}

std::string py_list(const std::vector<int>& v) {
  return "[" + [&] {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return s;
  }() + "]";
}

// mesh_line is mesh_reference.py's line() for a cohort mesh.
std::string mesh_line(const std::string& name, const DeviceMesh& m, const std::vector<DeviceMesh>& subs) {
  std::vector<int> local;
  std::string groups = "[";
  for (int d = 0; d < m.ndim(); ++d) {
    local.push_back(m.get_local_rank(d));
    groups += (d ? ", " : "") + py_list(m.get_group(d)->global_ranks());
  }
  std::string sub_text;
  for (const DeviceMesh& s : subs)
    sub_text += (sub_text.empty() ? "" : " ") + s.to_string() + "=" + py_list(s.ranks());
  return name + ": " + m.to_string() + " coordinate=" + py_list(*m.get_coordinate()) +
         " local=" + py_list(local) + " groups=" + groups + "] subs: " + sub_text;
}

int mesh_print(int rank) {
  // 2 x 2 at 4 ranks, 2 x 3 at 6.
  const int cols = get_world_size() / 2;
  DeviceMesh square = init_device_mesh("cpu", {2, cols}, {"dp", "tp"});
  DeviceMesh flat = init_device_mesh("cpu", {get_world_size()});
  DeviceMesh hsdp = init_device_mesh("cpu", {1, 2, cols}, {"rep", "dp", "tp"});
  std::printf("rank %d %s\n", rank, mesh_line("square", square, {square["tp"], square["dp"]}).c_str());
  std::printf("rank %d %s\n", rank, mesh_line("flat", flat, {}).c_str());
  std::printf(
      "rank %d %s\n", rank,
      mesh_line("hsdp", hsdp,
                {hsdp[std::vector<std::string>{"rep", "tp"}], hsdp[std::vector<std::string>{"dp", "tp"}]})
          .c_str());
  std::printf("rank %d ok: printed\n", rank);
  return 0;
}

int semantics(int rank) {
  auto group = new_group({3, 1});
  const bool member = rank == 1 || rank == 3;
  if (!group || group->is_member() != member) return fail(rank, "membership");
  if (get_process_group_ranks(group) != std::vector<int>{1, 3}) return fail(rank, "ranks not sorted");
  int32_t x = rank + 1;
  std::vector<float> p2p(3, float(rank));
  auto work = all_reduce(Buffer::of(&x, 1), {}, group);
  if (!work->is_completed() || !work->is_success()) return fail(rank, "all_reduce's Work");
  if (!member) {
    if (x != rank + 1) return fail(rank, "a non-member's all_reduce changed its buffer");
    if (get_rank(group) != -1 || get_world_size(group) != -1) return fail(rank, "rank and size not -1");
    // Point-to-point and the rest do nothing either, whatever the peer.
    if (!isend(Buffer::of(p2p), 3, 0, group)->is_completed()) return fail(rank, "isend");
    recv(Buffer::of(p2p), 1, {}, group);
    barrier({}, group);
    broadcast(Buffer::of(p2p), {}, group);
    if (p2p[0] != float(rank)) return fail(rank, "a non-member's recv or broadcast wrote");
    const std::string rank_error = throws_invalid([&] { get_group_rank(group, 1); });
    if (rank_error.find("global rank " + std::to_string(rank)) == std::string::npos ||
        rank_error.find("group_1") == std::string::npos)
      return fail(rank, "get_group_rank said '" + rank_error + "'");
    if (throws_invalid([&] { get_backend(group); }).empty()) return fail(rank, "get_backend of a non-member");
    if (throws_invalid([&] { group->alloc_symmetric(64); }).empty()) return fail(rank, "alloc_symmetric");
  } else {
    if (x != 2 + 4) return fail(rank, "sum " + std::to_string(x));
    if (group->rank() != (rank == 1 ? 0 : 1)) return fail(rank, "group rank");
    if (get_backend(group) != BackendName::kCohort) return fail(rank, "get_backend " + get_backend(group));
  }
  if (get_backend() != "cohort" || !is_available()) return fail(rank, "default group's backend");
  // A second group, destroyed alone: its calls fail, the default group and
  // the first group work on.
  auto doomed = new_group({0, 1, 2, 3});
  destroy_process_group(doomed);
  bool refused = false;
  try {
    int32_t y = 1;
    all_reduce(Buffer::of(&y, 1), {}, doomed);
  } catch (const Error&) {
    refused = true;
  }
  if (!refused) return fail(rank, "a destroyed group ran an all_reduce");
  if (throws_invalid([&] { destroy_process_group(doomed); }).empty()) return fail(rank, "destroyed twice");
  int32_t z = 1;
  all_reduce(Buffer::of(&z, 1));
  if (z != 4) return fail(rank, "the default group after destroying another");
  // A group with a backend of its own, in torch's per-device spelling.
  NewGroupOptions per_device;
  per_device.backend = "cpu:cohort";
  auto pairs = new_group({0, 2}, per_device);
  int32_t w = rank;
  all_reduce(Buffer::of(&w, 1), {}, pairs);
  if (w != (rank % 2 == 0 ? 2 : rank)) return fail(rank, "the cpu:cohort group's sum " + std::to_string(w));
  if (rank % 2 == 0 && get_backend(pairs) != "cohort") return fail(rank, "get_backend " + get_backend(pairs));
  // A backend name torch does not know is refused on every rank alike.
  NewGroupOptions odd;
  odd.backend = "carrier-pigeon";
  if (throws_invalid([&] { new_group({0, 1}, odd); }).find("carrier-pigeon") == std::string::npos)
    return fail(rank, "an unknown backend");
  std::printf("rank %d ok: member %d mpi %d nccl %d elastic %d\n", rank, int(member), int(is_mpi_available()),
              int(is_nccl_available()), int(is_torchelastic_launched()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  InitOptions init;
  init.timeout = std::chrono::seconds(60);
  try {
    init_process_group(init);
    const int rank = get_rank();
    if (mode == "join" || mode == "join-hold") {
      barrier();
      // join-hold: rank 0 hosts the store until a stranger was refused
      // there, so that the stranger meets this job, not a closed port.
      if (mode == "join-hold" && rank == 0)
        default_group()->store()->wait({"seat/refused"}, std::chrono::seconds(60));
      destroy_process_group();
      std::printf("rank %d ok: joined\n", rank);
      return 0;
    }
    if (mode == "mesh-print") {
      const int code = mesh_print(rank);
      destroy_process_group();
      return code;
    }
    if (mode == "mesh") {
      const int code = mesh(rank);
      destroy_process_group();
      return code;
    }
    if (mode == "semantics") {
      const int code = semantics(rank);
      destroy_process_group();
      return code;
    }
    // The default group's store orders the ranks below: a key set there
    // by one rank is seen by every other.
    Store& store = *default_group()->store();
    if (mode == "global-sync") {
      if (rank == 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        store.set("late rank called", to_bytes("yes"));
      }
      auto group = new_group({0, 1});
      if (!store.check({"late rank called"})) return fail(rank, "new_group returned before rank 3 called it");
    } else if (mode == "local-sync") {
      NewGroupOptions local;
      local.use_local_synchronization = true;
      if (rank == 3) store.wait({"others returned"}, std::chrono::seconds(30));
      auto group = new_group({0, 1}, local);
      if (rank == 2) store.set("others returned", to_bytes("yes"));
      int32_t x = 1;
      all_reduce(Buffer::of(&x, 1), {}, group);
      if (x != (rank < 2 ? 2 : 1)) return fail(rank, "sum " + std::to_string(x));
    } else if (mode == "absent") {
      if (rank != 3) {
        NewGroupOptions o;
        o.timeout = std::chrono::seconds(2);
        try {
          new_group({0, 1}, o);
          return fail(rank, "new_group returned without rank 3");
        } catch (const TimeoutError& e) {
          if (std::string(e.what()).find("3 of 4 ranks called new_group") == std::string::npos)
            return fail(rank, e.what());
        }
      }
      // Rank 0 hosts the store: it leaves last, so that nobody's wait
      // above ends in a StoreError instead of the TimeoutError.
      if (store.add("finished", 1) == 4) store.set("all finished", to_bytes("yes"));
      if (rank == 0) store.wait({"all finished"}, std::chrono::seconds(30));
      std::printf("rank %d ok: absent\n", rank);
      std::fflush(stdout);
      _Exit(0);  // no final barrier: the others' group_1 is half made
    } else {
      return 2;
    }
    barrier();
    destroy_process_group();
    std::printf("rank %d ok: %s\n", rank, mode.c_str());
    return 0;
  } catch (const Error& e) {
    std::printf("rank %s wrong: %s\n", std::getenv("RANK"), e.what());
    return 1;
  }
}
