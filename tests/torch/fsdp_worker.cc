// fsdp_worker: one rank of tests/torch/fsdp_process_test.cc, joined by
// env:// (2, 3 or 4 ranks). Trains a small network sharded with
// fully_shard (a unit per Linear, the root last) and, in the same process,
// the same network whole on the whole batch (the single-process
// reference), from the same seed; after every step each rank gathers the
// sharded parameters and compares them with the reference's. Cases:
// SGD and Adam, reshard_after_forward on and off, gradient accumulation
// with sync off for the first microbatch, bf16 parameters with fp32
// reduction, HSDP on a 2 x 2 mesh (4 ranks), full state dicts saved and
// loaded into a fresh model, the shapes the parameters keep between steps.
// Prints "rank R ok: ..." and exits 0, or says what was wrong and exits 1.
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <string>

#include "cohort/distributed.h"
#include "cohort/dtensor.h"
#include "cohort/errors.h"
#include "cohort/fsdp.h"
#include "cohort/tensor_parallel.h"
#include "torch/fsdp_net.h"
#include "torch/worker_checks.h"

using namespace cohort;
using namespace cohort::testing;

namespace {

// reference_net is fsdp_net.h's network whole, from the same seed.
torch::nn::Sequential reference_net() {
  torch::manual_seed(0);
  // One statement each: the order in which a call's arguments are built
  // is the compiler's, and each draws from the generator.
  torch::nn::Linear first(7, 10);
  torch::nn::Linear second(10, 3);
  return torch::nn::Sequential(first, torch::nn::ReLU(), second);
}

// The reference's name of a sharded parameter: the units' "module."
// levels taken out.
std::string plain_name(std::string name) {
  for (size_t at; (at = name.find("module.")) != std::string::npos;) name.erase(at, 7);
  return name;
}

// same_as_reference gathers every sharded parameter and compares it.
void same_as_reference(const Sharded& s, torch::nn::Sequential& ref, double tolerance,
                       const std::string& what) {
  auto whole = full_state_dict(*s.root);
  auto mine = ref->named_parameters();
  check(whole.size() == mine.size(),
        what + ": " + std::to_string(whole.size()) + " parameters, reference " + std::to_string(mine.size()));
  for (const auto& [name, value] : whole) {
    const at::Tensor* want = mine.find(plain_name(name));
    if (!want) {
      check(false, what + ": no reference parameter for " + name);
      continue;
    }
    const bool close = value.sizes() == want->sizes() &&
                       at::allclose(value.to(at::kFloat), want->to(at::kFloat), tolerance, tolerance);
    check(close, what + ": " + name + " differs from the reference by " +
                     std::to_string((value.to(at::kFloat) - want->to(at::kFloat)).abs().max().item<float>()));
  }
  // Each parameter as torch holds it, a Shard(0) DTensor (Replicate() first
  // for HSDP) over the parameter itself, gathers to the same whole.
  for (const auto& named : s.root->named_parameters()) {
    const FSDPUnit* unit = fsdp_unit_of(named.value());
    if (!unit) continue;
    const DTensor sharded = unit->sharded_parameter(named.value());
    const std::string expected = unit->mesh().ndim() == 2 ? "(Replicate(), Shard(dim=0))" : "(Shard(dim=0),)";
    // As Python prints a tuple: "(a,)", "(a, b)".
    std::string placements;
    for (const Placement& p : sharded.placements()) placements += (placements.empty() ? "" : ", ") + p.to_string();
    placements = "(" + placements + (sharded.placements().size() == 1 ? ",)" : ")");
    check(placements == expected, what + ": " + named.key() + " is laid out as " + placements + ", not " + expected);
    check(sharded.to_local().is_same(named.value()), what + ": " + named.key() + "'s DTensor holds another tensor");
    check(sharded.shape() == unit->full_shape(named.value()),
          what + ": " + named.key() + "'s DTensor has another shape than the parameter's");
    check(at::equal(sharded.full_tensor(), whole.at(named.key())),
          what + ": " + named.key() + "'s DTensor gathers to another whole than full_state_dict's");
  }
}

// batch is step `step`'s global batch: 4 rows per rank.
std::pair<at::Tensor, at::Tensor> batch(int step, int world) {
  torch::manual_seed(1000 + step);
  return {torch::randn({4 * world, 7}), torch::randn({4 * world, 3})};
}

at::Tensor mine(const at::Tensor& global, int index, int count) {
  const int64_t rows = global.size(0) / count;
  return global.narrow(0, rows * index, rows);
}

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

// train runs `steps` steps on both networks and compares after each.
// `data_index`/`data_count`: which part of the batch this rank takes (the
// data-parallel ranks: every rank, or for HSDP every rank too).
void train(const std::string& what, const FullyShardOptions& options, const MakeOptimizer& make, int steps,
           int microbatches, double tolerance) {
  const int world = get_world_size();
  auto ref = reference_net();
  Sharded s = sharded_net(options);
  auto ref_opt = make(ref->parameters());
  auto opt = make(s.root->parameters());
  same_as_reference(s, ref, 0, what + " before training");
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch(step, world);
    ref_opt->zero_grad();
    opt->zero_grad();
    for (int m = 0; m < microbatches; ++m) {
      const at::Tensor mx = mine(x, m, microbatches), my = mine(y, m, microbatches);
      torch::mse_loss(ref->forward(mx), my).backward();
      const bool last = m == microbatches - 1;
      set_requires_gradient_sync(*s.root, last);  // every unit under the root
      const at::Tensor lx = mine(mx, get_rank(), world), ly = mine(my, get_rank(), world);
      torch::mse_loss(s.root->forward(lx), ly).backward();
    }
    ref_opt->step();
    opt->step();
    same_as_reference(s, ref, tolerance, what + " after step " + std::to_string(step + 1));
  }
  // Between steps every unit is resharded: its module holds this rank's rows.
  const auto [start, rows] = shard_range(10, options.mesh->size(options.mesh->ndim() - 1),
                                         options.mesh->get_local_rank(options.mesh->ndim() - 1));
  (void)start;
  check(s.first->module()->weight.size(0) == rows && !s.first->unit().is_unsharded(),
        what + ": the first layer's weight holds " + std::to_string(s.first->module()->weight.size(0)) +
            " rows between steps, not this rank's " + std::to_string(rows));
  // From the second step on, each layer's gather was started early by the
  // unit before it (forward) or after it (backward).
  if (steps > 1) {
    check(s.first->unit().prefetches() > 0 && s.second->unit().prefetches() > 0,
          what + ": no gather was prefetched (" + std::to_string(s.first->unit().prefetches()) + ", " +
              std::to_string(s.second->unit().prefetches()) + ")");
  }
}

MakeOptimizer sgd() {
  return [](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.1));
  };
}
MakeOptimizer adam() {
  return [](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(0.01));
  };
}

void state_dicts(const FullyShardOptions& options) {
  const int world = get_world_size();
  Sharded trained = sharded_net(options);
  auto opt = sgd()(trained.root->parameters());
  auto [x, y] = batch(0, world);
  torch::mse_loss(trained.root->forward(mine(x, get_rank(), world)), mine(y, get_rank(), world)).backward();
  opt->step();
  const auto saved = full_state_dict(*trained.root);
  torch::manual_seed(7);  // other values than the trained ones
  FullyShardOptions fresh_options = options;
  Sharded fresh{fully_shard(torch::nn::Linear(7, 10), fresh_options),
                fully_shard(torch::nn::Linear(10, 3), fresh_options), nullptr};
  fresh.root =
      fully_shard(torch::nn::Sequential(fresh.first, torch::nn::ReLU(), fresh.second), fresh_options);
  load_full_state_dict(*fresh.root, saved);
  const at::Tensor probe = torch::randn({5, 7});
  at::NoGradGuard no_grad;
  check(at::allclose(fresh.root->forward(probe), trained.root->forward(probe)),
        "a model loaded from a full state dict computes what the saved one did");
  auto bad = saved;
  bad.erase(bad.begin());
  std::string error;
  try {
    load_full_state_dict(*fresh.root, bad);
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  check(error.find("the state has no '" + saved.begin()->first + "'") != std::string::npos,
        "a state dict without a parameter is refused naming it: '" + error + "'");
}

// compare: what tests/python/fsdp_reference.py does with torch's
// fully_shard, printed the same way (rank 0).
void compare() {
  const int world = get_world_size();
  FullyShardOptions options;
  options.mesh = init_device_mesh("cpu", {world});
  Sharded s = sharded_net(options);
  torch::optim::SGD optimizer(s.root->parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = batch(step, world);
    optimizer.zero_grad();
    torch::mse_loss(s.root->forward(mine(x, get_rank(), world)), mine(y, get_rank(), world)).backward();
    optimizer.step();
  }
  for (const auto& [name, value] : full_state_dict(*s.root)) {
    if (get_rank() != 0) continue;
    std::string text = "param " + plain_name(name);
    const at::Tensor flat = value.flatten();
    char buf[32];
    for (int64_t i = 0; i < flat.numel(); ++i) {
      std::snprintf(buf, sizeof buf, " %.9g", flat[i].item<float>());
      text += buf;
    }
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
}

// sharded_parameter_refusals: a unit's DTensor of a parameter exists
// between steps only, and not for a scalar, each refused naming why.
void sharded_parameter_refusals(const FullyShardOptions& options) {
  auto refusal = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  Sharded s = sharded_net(options);
  FSDPUnit& unit = s.first->unit();
  unit.unshard();  // collective: every rank gathers
  const std::string gathered = refusal([&] { unit.sharded_parameter(s.first->module()->weight); });
  check(gathered.find("is gathered whole now") != std::string::npos,
        "sharded_parameter of a gathered parameter is refused: '" + gathered + "'");
  unit.reshard();
  check(unit.sharded_parameter(s.first->module()->weight).to_local().is_same(s.first->module()->weight),
        "sharded_parameter works again once resharded");
  struct Scaled : torch::nn::Module {
    Scaled() { scale = register_parameter("scale", torch::ones({})); }
    at::Tensor scale;
  };
  auto scaled = std::make_shared<Scaled>();
  FSDPUnit scalar_unit(*scaled, options);
  const std::string scalar = refusal([&] { scalar_unit.sharded_parameter(scaled->scale); });
  check(scalar.find("is a scalar") != std::string::npos, "sharded_parameter of a scalar is refused: '" + scalar + "'");
}

// fsdp_with_tp: a 2 x 2 mesh ("dp", "tp"): the MLP's Linears cut for
// tensor parallelism over "tp" (column- then row-wise), each cut Linear an
// FSDP unit over "dp", the root last; each dp group trains on its half of
// the batch (both its tp ranks on the same rows). Three SGD steps with
// momentum against the whole model on the whole batch in one process:
// every rank's shard (its tp piece, then its dp rows of that) equal.
void fsdp_with_tp() {
  const DeviceMesh mesh = init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
  const auto coordinate = *mesh.get_coordinate();
  const int dp = coordinate[0], tp = coordinate[1];
  auto whole = []() {
    torch::manual_seed(5);
    torch::nn::Linear first(8, 12);
    torch::nn::Linear second(12, 6);
    torch::nn::Sequential net(first, torch::nn::ReLU(), second);
    net->to(at::kDouble);
    return net;
  };
  torch::nn::Sequential reference = whole(), source = whole();
  torch::nn::Sequential cut =
      parallelize_module(source, mesh["tp"], {{"0", ColwiseParallel()}, {"2", RowwiseParallel()}});
  FullyShardOptions over_dp;
  over_dp.mesh = mesh["dp"];
  auto first = fully_shard(TensorParallelLinear(cut->ptr<TensorParallelLinearImpl>(0)), over_dp);
  auto second = fully_shard(TensorParallelLinear(cut->ptr<TensorParallelLinearImpl>(2)), over_dp);
  auto model = fully_shard(torch::nn::Sequential(first, torch::nn::ReLU(), second), over_dp);
  torch::optim::SGD on_shards(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD on_whole(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::manual_seed(6);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor x = torch::randn({8, 8}, at::kDouble), y = torch::randn({8, 6}, at::kDouble);
    on_shards.zero_grad();
    on_whole.zero_grad();
    torch::mse_loss(model->forward(x.slice(0, 4 * dp, 4 * dp + 4)), y.slice(0, 4 * dp, 4 * dp + 4)).backward();
    torch::mse_loss(reference->forward(x), y).backward();
    on_shards.step();
    on_whole.step();
  }
  auto piece = [](const at::Tensor& t, int dim, int index) {
    const auto [start, length] = shard_range(t.size(dim), 2, index);
    return t.narrow(dim, start, length);
  };
  auto l0 = reference->ptr<torch::nn::LinearImpl>(0);
  auto l2 = reference->ptr<torch::nn::LinearImpl>(2);
  struct Expect {
    const char* what;
    at::Tensor mine, whole;
    int tp_dim;  // -1: not cut by tp
  };
  const Expect expects[] = {{"first.weight", first->module()->weight, l0->weight, 0},
                            {"first.bias", first->module()->bias, l0->bias, 0},
                            {"second.weight", second->module()->weight, l2->weight, 1},
                            {"second.bias", second->module()->bias, l2->bias, -1}};
  for (const Expect& e : expects) {
    const at::Tensor tp_piece = e.tp_dim < 0 ? e.whole.detach() : piece(e.whole.detach(), e.tp_dim, tp);
    const at::Tensor want = piece(tp_piece, 0, dp);
    check(e.mine.sizes() == want.sizes() && at::allclose(e.mine, want, 1e-9, 1e-12),
          std::string("FSDP x TP: ") + e.what + " after three steps is the one-process model's, cut");
  }
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  try {
    init_process_group();
    worker_checks().rank = get_rank();
    if (argc > 1 && std::string(argv[1]) == "compare") {
      compare();
      destroy_process_group();
      return 0;
    }
    const int world = get_world_size();
    FullyShardOptions flat;
    flat.mesh = init_device_mesh("cpu", {world});
    train("SGD", flat, sgd(), 4, 1, 1e-5);
    train("Adam", flat, adam(), 4, 1, 1e-5);
    FullyShardOptions kept = flat;
    kept.reshard_after_forward = false;
    train("reshard_after_forward=false", kept, sgd(), 3, 1, 1e-5);
    train("two microbatches, sync off for the first", flat, sgd(), 3, 2, 1e-5);
    FullyShardOptions mixed = flat;
    mixed.mp_policy.param_dtype = at::kBFloat16;
    mixed.mp_policy.reduce_dtype = at::kFloat;
    mixed.mp_policy.output_dtype = at::kFloat;
    train("bf16 parameters, fp32 reduction", mixed, sgd(), 3, 1, 3e-2);
    if (world == 4) {
      FullyShardOptions hsdp;
      hsdp.mesh = init_device_mesh("cpu", {2, 2}, {"replicate", "shard"});
      train("HSDP on a 2 x 2 mesh", hsdp, sgd(), 3, 1, 1e-5);
      fsdp_with_tp();
    }
    state_dicts(flat);
    std::string error;
    try {
      FullyShardOptions cube;
      cube.mesh = init_device_mesh("cpu", {1, 1, world});
      fully_shard(torch::nn::Linear(2, 2), cube);
    } catch (const InvalidArgument& e) {
      error = e.what();
    }
    check(error.find("the mesh must be 1-D (shard) or 2-D (replicate, shard)") != std::string::npos,
          "a 3-D mesh is refused: '" + error + "'");
    sharded_parameter_refusals(flat);
    destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d wrong: %s\n", worker_checks().rank, e.what());
    return 1;
  }
  if (worker_checks().failures) return 1;
  std::printf("rank %d ok: every step as the single-process model's\n", worker_checks().rank);
  return 0;
}
