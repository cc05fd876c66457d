// dcp_worker: one rank of tests/torch/dcp_process_test.cc, joined by
// env://. Modes (argv[1], the checkpoint directory in argv[2]):
// - save: trains the FSDP network of fsdp_worker two steps, then saves
//   with async_save (its shards, scalars, a row-sharded DTensor, and every
//   parameter whole under "whole/<name>") and goes on training while it
//   writes; saves once more (save) into argv[2] + ".sync"; checks that each
//   checkpoint loads back as it was when saved.
// - load: at any world size, loads the checkpoint into a fresh FSDP network
//   (other values) and the DTensor laid out column-wise, and compares each
//   with the whole values saved beside them.
// - crash: rank 1 is killed (SIGKILL) while it saves; rank 0's save must
//   fail naming rank 1, and must leave the previous checkpoint as it was.
// Prints "rank R ok: ..." and exits 0, or says what was wrong and exits 1.
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cohort/distributed.h"
#include "cohort/distributed_checkpoint.h"
#include "cohort/errors.h"
#include "cohort/fsdp.h"
#include "torch/fsdp_net.h"
#include "torch/worker_checks.h"

using namespace cohort;
using cohort::testing::check;
using cohort::testing::Root;

namespace {

Root sharded_net(int seed) {
  FullyShardOptions options;
  options.mesh = init_device_mesh("cpu", {get_world_size()});
  return testing::sharded_net(options, seed).root;
}

void train_step(const Root& model, torch::optim::Optimizer& optimizer, int step) {
  const int world = get_world_size(), r = get_rank();
  torch::manual_seed(100 + step);
  const at::Tensor x = torch::randn({4 * world, 7}), y = torch::randn({4 * world, 3});
  optimizer.zero_grad();
  torch::mse_loss(model->forward(x.narrow(0, 4 * r, 4)), y.narrow(0, 4 * r, 4)).backward();
  optimizer.step();
}

const at::Tensor& known() {
  static const at::Tensor t = at::arange(60, at::kFloat).reshape({10, 6});
  return t;
}

// state_of is what a save writes and a load reads: the model's shards,
// every parameter whole, a DTensor of known() laid out as `placement`,
// and three scalars.
dcp::StateDict state_of(const Root& model, const DTensor& laid_out, int64_t step) {
  dcp::StateDict state = dcp::sharded_state_dict(*model);
  for (const auto& [name, value] : full_state_dict(*model))
    state["whole/" + name] = dcp::Entry::tensor(value);
  state["known"] = dcp::Entry::dtensor(laid_out);
  state["step"] = dcp::Entry::integer(step);
  state["lr"] = dcp::Entry::number(0.125);
  state["name"] = dcp::Entry::text("seven to three");
  return state;
}

// loads_as_saved loads `dir` into a fresh network and checks it.
void loads_as_saved(const std::string& dir, int64_t step, const std::string& what) {
  Root model = sharded_net(7);  // other values than any saved
  const DeviceMesh mesh = init_device_mesh("cpu", {get_world_size()});
  DTensor columns = distribute_tensor(at::zeros({10, 6}), mesh, {Shard(1)});
  dcp::StateDict state = dcp::sharded_state_dict(*model);
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, value] : full_state_dict(*model)) {
    whole[name] = at::zeros_like(value);
    state["whole/" + name] = dcp::Entry::piece(whole[name], value.sizes().vec(),
                                               std::vector<int64_t>(static_cast<size_t>(value.dim()), 0));
  }
  state["known"] = dcp::Entry::dtensor(columns);
  state["step"] = dcp::Entry::integer(-1);
  state["lr"] = dcp::Entry::number(0);
  state["name"] = dcp::Entry::text("");
  dcp::load(state, dir);
  for (const auto& [name, value] : full_state_dict(*model)) {
    check(at::equal(value, whole[name]),
          what + ": " + name + " loaded into the shards is not the saved whole");
  }
  check(at::equal(columns.full_tensor(), known()), what + ": the row-sharded DTensor loaded column-wise");
  check(state["step"].integer_value == step, what + ": step " + std::to_string(state["step"].integer_value));
  check(state["lr"].number_value == 0.125 && state["name"].text_value == "seven to three",
        what + ": scalars");
}

void save_mode(const std::string& dir) {
  Root model = sharded_net(0);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  train_step(model, optimizer, 0);
  train_step(model, optimizer, 1);
  const DeviceMesh mesh = init_device_mesh("cpu", {get_world_size()});
  const DTensor rows = distribute_tensor(known(), mesh, {Shard(0)});
  // async_save copies the pieces: the step taken while it writes must not
  // reach the checkpoint.
  std::future<void> writing = dcp::async_save(state_of(model, rows, 2), dir);
  train_step(model, optimizer, 2);
  writing.get();
  barrier()->wait();
  loads_as_saved(dir, 2, "async_save");
  dcp::save(state_of(model, rows, 3), dir + ".sync");
  loads_as_saved(dir + ".sync", 3, "save");
}

void crash_mode(const std::string& dir) {
  dcp::StateDict state{{"step", dcp::Entry::integer(99)}, {"known", dcp::Entry::tensor(known() * 2)}};
  if (get_rank() == 1) {
    // kill -9 while saving: it takes part in the save (the id), its
    // writer thread starts on 32 MiB, and the process is killed at once.
    state["bulk"] = dcp::Entry::piece(at::ones({8 << 20}), {8 << 20}, {0});
    std::printf("rank 1 ok: saving, and killed\n");
    std::fflush(stdout);
    std::future<void> writing = dcp::async_save(state, dir);
    ::raise(SIGKILL);
  }
  std::string error;
  try {
    dcp::async_save(state, dir).get();
  } catch (const Error& e) {
    error = e.what();
  }
  check(error.find("rank 1's part") != std::string::npos &&
            error.find("the previous checkpoint in " + dir + " is untouched") != std::string::npos,
        "a save that a rank left: '" + error + "'");
  dcp::StateDict step{{"step", dcp::Entry::integer(-1)}};
  dcp::load(step, dir);
  check(step["step"].integer_value == 2, "after the failed save the checkpoint still says step " +
                                             std::to_string(step["step"].integer_value) + ", not 2");
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  if (argc < 3) {
    std::fprintf(stderr, "usage: dcp_worker save|load|crash DIR\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  try {
    init_process_group();
    cohort::testing::worker_checks().rank = get_rank();
    if (mode == "save") save_mode(dir);
    if (mode == "load") loads_as_saved(dir, 2, "load at " + std::to_string(get_world_size()) + " ranks");
    if (mode == "crash") crash_mode(dir);
    if (mode != "crash") destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d wrong: %s\n", cohort::testing::worker_checks().rank, e.what());
    return 1;
  }
  if (cohort::testing::worker_checks().failures) return 1;
  std::printf("rank %d ok: %s as saved\n", cohort::testing::worker_checks().rank, mode.c_str());
  std::fflush(stdout);
  if (mode == "crash") ::_exit(0);  // rank 1 is gone: no final barrier
  return 0;
}
