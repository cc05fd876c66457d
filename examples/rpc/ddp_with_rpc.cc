// ddp_with_rpc: PyTorch's "combining DistributedDataParallel with the
// distributed RPC framework" tutorial in C++ (cohort/ddp.h, cohort/rpc.h,
// cohort/dist_autograd.h). Three processes: "ps" (rank 0) holds a large
// embedding table, the sparse part; two trainers (ranks 1 and 2) each look
// their bags up on ps by RPC and run the dense part, a Linear wrapped in
// DistributedDataParallel over a group of the two trainers. Backward is
// distributed autograd: the embedding's gradient goes back to ps, the dense
// part's is averaged by DDP between the trainers on its way into the
// context; a DistributedOptimizer over RRefs to both parts steps them.
//
//   cohortrun --standalone --nproc-per-node 3 build/examples/ddp_with_rpc [--steps N]
//
// Each trainer checks, and exits 1 if any fails: at the first step, the
// dense gradient in its context is the average of the two trainers' own
// gradients (computed apart with plain autograd); at the end, both
// trainers hold the same dense parameters, .grad was never written, and
// the loss halved (the last ten steps' mean against the first). The data: bags of one to three items out of 100, whose
// class is the first item's remainder by 8.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/ddp.h"
#include "cohort/dist_autograd.h"
#include "cohort/distributed.h"
#include "cohort/prefix_store.h"
#include "cohort/rpc.h"
#include "cohort/tcp_store.h"
#include "cohort/tensor.h"

using namespace cohort::rpc;
namespace dist_autograd = cohort::dist_autograd;

namespace {

constexpr int64_t kItems = 100, kWidth = 16, kClasses = 8, kBags = 16;

torch::nn::EmbeddingBag& table() {
  static torch::nn::EmbeddingBag bag = [] {
    torch::manual_seed(1);
    return torch::nn::EmbeddingBag(torch::nn::EmbeddingBagOptions(kItems, kWidth).mode(torch::kMean));
  }();
  return bag;
}

void register_functions() {
  register_function("lookup", [](const std::vector<IValue>& a) {
    return IValue(table()->forward(a[0].toTensor(), a[1].toTensor()));
  });
  register_function("table_weight", [](const std::vector<IValue>&) { return IValue(table()->weight); });
}

// A batch of bags for `trainer` at `step`: indices, offsets, classes.
struct Batch {
  at::Tensor indices, offsets, classes;
};
Batch batch(int trainer, int step) {
  torch::manual_seed(1000 * step + trainer);
  const at::Tensor lengths = torch::randint(1, 4, {kBags}, torch::kLong);
  Batch b;
  b.offsets = torch::cat({torch::zeros({1}, torch::kLong), lengths.cumsum(0).slice(0, 0, kBags - 1)});
  b.indices = torch::randint(0, kItems, {lengths.sum().item<int64_t>()}, torch::kLong);
  b.classes = b.indices.index_select(0, b.offsets).remainder(kClasses);
  return b;
}

bool same(const at::Tensor& a, const at::Tensor& b, double tolerance) {
  return a.sizes() == b.sizes() && (a - b).abs().max().item<double>() <= tolerance;
}

int train(int rank, int steps, const std::shared_ptr<cohort::ProcessGroup>& trainers) {
  torch::manual_seed(2);  // both trainers start from the same dense part
  torch::nn::Linear dense(kWidth, kClasses);
  cohort::DDPOptions ddp_options;
  ddp_options.process_group = trainers;
  cohort::DistributedDataParallel model(dense, ddp_options);

  std::vector<RRef> parameters{remote("ps", "table_weight")};
  for (const auto& p : dense->parameters()) parameters.push_back(RRef::local(p));
  DistributedOptimizer::Options options;
  options.lr = 0.05;
  DistributedOptimizer optimizer(DistributedOptimizer::Kind::kAdam, parameters, options);

  int failures = 0;
  double first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    const Batch b = batch(rank, step);
    dist_autograd::Context context;
    const at::Tensor embedded = rpc_sync("ps", "lookup", {b.indices, b.offsets}).toTensor();
    const at::Tensor loss = torch::cross_entropy_loss(model.forward(embedded), b.classes);
    dist_autograd::backward(context.id(), {loss});
    if (step == 1) {
      // This trainer's own gradient, apart from DDP and the context, and the
      // other's: their average is what DDP must have left in the context.
      at::Tensor own = torch::autograd::grad(
          {torch::cross_entropy_loss(torch::nn::functional::linear(embedded.detach(), dense->weight, dense->bias),
                                     b.classes)},
          {dense->weight})[0];
      at::Tensor average = own.clone();
      cohort::AllReduceOptions avg;
      avg.op = cohort::ReduceOp::AVG;
      trainers->all_reduce(cohort::to_buffer(average), avg)->wait();
      const at::Tensor in_context = dist_autograd::get_gradients(context.id()).at(dense->weight);
      const bool ok = same(in_context, average, 1e-6) && !same(own, average, 1e-6);
      if (!ok) {
        std::printf("trainer %d: |context - average| %g, |context - own| %g, |own - average| %g\n", rank,
                    (in_context - average).abs().max().item<double>(), (in_context - own).abs().max().item<double>(),
                    (own - average).abs().max().item<double>());
      }
      std::printf("trainer %d: the context's dense gradient is the trainers' average: %s\n", rank,
                  ok ? "yes" : "NO");
      failures += ok ? 0 : 1;
    }
    optimizer.step(context.id());
    const double now = loss.item<double>();
    if (step == 1) first = now;
    // "last": the mean of the last ten steps' losses (one batch is noisy).
    if (step > steps - 10) last += now / std::min(steps, 10);
    if (step == 1 || step % 20 == 0 || step == steps) {
      std::printf("trainer %d step %d/%d: loss %.5f\n", rank, step, steps, now);
      std::fflush(stdout);
    }
  }
  // Both trainers hold the same dense part: gather the other's and compare.
  at::Tensor mine = torch::cat({dense->weight.detach().reshape({-1}), dense->bias.detach()});
  at::Tensor theirs = mine.clone();
  trainers->broadcast(cohort::to_buffer(theirs))->wait();  // from trainer 1
  const bool in_sync = torch::equal(mine, theirs);
  const bool grad_untouched = !dense->weight.grad().defined() && !dense->bias.grad().defined();
  std::printf("trainer %d: dense parts equal: %s, .grad untouched: %s\n", rank, in_sync ? "yes" : "NO",
              grad_untouched ? "yes" : "NO");
  std::printf("trainer %d: loss %.5f -> %.5f\n", rank, first, last);
  failures += (in_sync ? 0 : 1) + (grad_untouched ? 0 : 1) + (last < first / 2 ? 0 : 1);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  register_functions();
  const int rank = std::atoi(std::getenv("RANK"));
  const int world = std::atoi(std::getenv("WORLD_SIZE"));
  // One store for both: rank 0 hosts it; the process group and RPC each
  // keep to their own prefix of it.
  cohort::TcpStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT")));
  store_options.is_server = rank == 0;
  store_options.server_owner = "rank 0";
  auto store = std::make_shared<cohort::TcpStore>(std::getenv("MASTER_ADDR"), store_options);
  cohort::InitOptions init;
  init.store = std::make_shared<cohort::PrefixStore>("pg", store);
  init.rank = rank;
  init.world_size = world;
  cohort::init_process_group(init);
  auto trainers = cohort::new_group({1, 2});  // ps takes no part in DDP
  RpcBackendOptions rpc_options;
  rpc_options.store = std::make_shared<cohort::PrefixStore>("rpc", store);
  init_rpc(rank == 0 ? "ps" : "trainer" + std::to_string(rank), rank, world, rpc_options);
  const int code = rank == 0 ? 0 : train(rank, steps, trainers);
  shutdown();
  cohort::destroy_process_group();
  return code;
}
