// ddp_test.cc: DistributedDataParallel against one process doing the same
// arithmetic: after K steps, P ranks with batch B each must hold the
// parameters one process computes from all P batches. Ranks are threads
// with real groups (torch_ranks.h).
#include <torch/torch.h>

#include <cstdio>
#include <mutex>

#include "cohort/checkpoint.h"
#include "cohort/comm_hooks.h"
#include "cohort/config.h"
#include "cohort/ddp.h"
#include "cohort/errors.h"
#include "cohort/join.h"
#include "torch/torch_ranks.h"

namespace cohort {
namespace {

using testing::run_torch_ranks;

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int hidden = 16, bool with_branch = false) {
    fc1 = register_module("fc1", torch::nn::Linear(8, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
    fc3 = register_module("fc3", torch::nn::Linear(hidden, 4));
    if (with_branch) branch = register_module("branch", torch::nn::Linear(hidden, 4));
    scale = register_buffer("scale", torch::ones({4}));
  }
  at::Tensor forward(at::Tensor x, bool use_branch) {
    x = torch::relu(fc2(torch::relu(fc1(x))));
    at::Tensor y = fc3(x);
    if (use_branch) y = y + branch(x);
    return y * scale;
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, branch{nullptr};
  at::Tensor scale;
};
TORCH_MODULE(Mlp);

// Scenario: what every rank and the single-process reference run.
struct Scenario {
  int world = 2;
  int steps = 4;
  int batch = 3;
  int micro = 1;  // micro-batches per step; all but the last under no_sync
  bool with_branch = false;
  std::function<bool(int step, int rank)> use_branch = [](int, int) { return false; };
  std::function<int(int rank)> steps_of;  // set: uneven inputs, in a Join
  std::function<CommHook()> hook;         // made per rank (hooks have state)
  DDPOptions options;
  double lr = 0.05, momentum = 0.9;
  // Drop the gradients each step (torch's zero_grad(set_to_none=True))
  // instead of zeroing them: DDP must take in new ones every time.
  bool fresh_gradients = false;
};

at::Tensor input_of(int step, int micro, int rank, int batch) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(1000 * step + 10 * micro + rank));
  return at::randn({batch, 8}, gen, at::kFloat);
}
at::Tensor target_of(int step, int micro, int rank, int batch) {
  auto gen =
      at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(7777 + 1000 * step + 10 * micro + rank));
  return at::randn({batch, 4}, gen, at::kFloat);
}

std::vector<at::Tensor> clone_all(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(t.detach().clone());
  return out;
}

struct Outcome {
  std::mutex mu;
  std::vector<at::Tensor> initial;              // rank 0's, after DDP's broadcast
  std::vector<std::vector<at::Tensor>> finals;  // per rank
  std::vector<DDPStats> stats;
};

void train_rank(const Scenario& s, const GroupPtr& group, Outcome& out) {
  const int rank = group->rank();
  torch::manual_seed(static_cast<uint64_t>(100 + rank));  // different on purpose: DDP broadcasts rank 0's
  Mlp model(16, s.with_branch);
  DDPOptions options = s.options;
  options.process_group = group;
  DistributedDataParallel<Mlp> ddp(model, options);
  if (s.hook) ddp.register_comm_hook(s.hook());
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(out.mu);
    out.initial = clone_all(model->parameters());
  }
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(s.lr).momentum(s.momentum));
  const int my_steps = s.steps_of ? s.steps_of(rank) : s.steps;
  auto run_steps = [&] {
    for (int step = 0; step < my_steps; ++step) {
      if (s.fresh_gradients) {
        for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
      } else {
        opt.zero_grad();
      }
      for (int m = 0; m < s.micro; ++m) {
        auto loss_of = [&] {
          at::Tensor y = ddp.forward(input_of(step, m, rank, s.batch), s.use_branch(step, rank));
          return torch::mse_loss(y, target_of(step, m, rank, s.batch));
        };
        if (m + 1 < s.micro) {
          auto guard = ddp.no_sync();
          loss_of().backward();
        } else {
          loss_of().backward();
        }
      }
      opt.step();
    }
  };
  if (s.steps_of) {
    Join join({&ddp});
    run_steps();
    join.finish();
  } else {
    run_steps();
  }
  std::lock_guard<std::mutex> lock(out.mu);
  out.finals[static_cast<size_t>(rank)] = clone_all(model->parameters());
  out.stats[static_cast<size_t>(rank)] = ddp.stats();
}

// reference: one process, the gradient of the mean over ranks of each
// rank's loss (ranks past their last step in a Join contribute nothing but
// still count in the mean, as torch's Join).
std::vector<at::Tensor> reference(const Scenario& s, const std::vector<at::Tensor>& initial) {
  Mlp model(16, s.with_branch);
  {
    torch::NoGradGuard no_grad;
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i]);
  }
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(s.lr).momentum(s.momentum));
  int max_steps = s.steps;
  if (s.steps_of) {
    max_steps = 0;
    for (int r = 0; r < s.world; ++r) max_steps = std::max(max_steps, s.steps_of(r));
  }
  for (int step = 0; step < max_steps; ++step) {
    opt.zero_grad();
    for (int m = 0; m < s.micro; ++m) {
      at::Tensor loss = torch::zeros({});
      for (int r = 0; r < s.world; ++r) {
        if (s.steps_of && step >= s.steps_of(r)) continue;
        at::Tensor y = model->forward(input_of(step, m, r, s.batch), s.use_branch(step, r));
        loss = loss + torch::mse_loss(y, target_of(step, m, r, s.batch)) / s.world;
      }
      loss.backward();
    }
    opt.step();
  }
  return clone_all(model->parameters());
}

void expect_equivalent(const Scenario& s, double rtol = 1e-5, double atol = 1e-6) {
  Outcome out;
  out.finals.resize(static_cast<size_t>(s.world));
  out.stats.resize(static_cast<size_t>(s.world));
  run_torch_ranks(s.world, [&](const GroupPtr& group) { train_rank(s, group, out); });
  ASSERT_FALSE(out.initial.empty());
  const auto expected = reference(s, out.initial);
  for (int r = 0; r < s.world; ++r) {
    const auto& got = out.finals[static_cast<size_t>(r)];
    ASSERT_EQ(got.size(), expected.size()) << "rank " << r;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::allclose(got[i], expected[i], rtol, atol))
          << "rank " << r << " parameter " << i << " differs by "
          << (got[i] - expected[i]).abs().max().item<double>();
    }
  }
  // The run must have moved the parameters, or equality proves nothing.
  EXPECT_FALSE(torch::allclose(expected[0], out.initial[0]));
}

TEST(DistributedDataParallel, MatchesOneProcessWithTheWholeBatch) {
  for (int world : {1, 2, 3}) {
    Scenario s;
    s.world = world;
    expect_equivalent(s);
  }
}

// Where the buckets are not shared (TCP here; also MPI, or another host),
// the default mode reduces the gradients where they are instead of taking
// them into the buckets.
TEST(DistributedDataParallel, MatchesOneProcessWhenBucketsAreNotShared) {
  set_config("COHORT_SHM", "off");
  Scenario s;
  s.world = 3;
  s.micro = 2;
  expect_equivalent(s);
  reset_config("COHORT_SHM");
}

// Gradients replaced by new tensors every step are taken into the shared
// buckets again each time.
TEST(DistributedDataParallel, GradientsDroppedEveryStepStillMatch) {
  Scenario s;
  s.fresh_gradients = true;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, ManySmallBucketsMatch) {
  Scenario s;
  s.options.bucket_cap_mb = 1e-4;  // one parameter per bucket
  s.options.first_bucket_cap_mb = 1e-4;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, NoSyncAccumulationMatches) {
  Scenario s;
  s.micro = 3;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, GradientAsBucketViewMatches) {
  Scenario s;
  s.options.gradient_as_bucket_view = true;
  s.options.bucket_cap_mb = 1e-3;
  s.micro = 2;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, FindUnusedParametersMatchesWithABranchUsedSometimes) {
  Scenario s;
  s.world = 3;
  s.steps = 6;
  s.with_branch = true;
  // Steps 0 and 1: no rank uses it; then only some ranks, some steps.
  s.use_branch = [](int step, int rank) { return step >= 2 && (step + rank) % 2 == 0; };
  s.options.find_unused_parameters = true;
  s.options.bucket_cap_mb = 1e-4;
  s.options.first_bucket_cap_mb = 1e-4;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, StaticGraphMatches) {
  Scenario s;
  s.with_branch = true;  // never used: static_graph learns that once
  s.options.static_graph = true;
  s.steps = 5;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, UnusedParameterWithoutFindUnusedIsAClearError) {
  run_torch_ranks(2, [](const GroupPtr& group) {
    Mlp model(16, /*with_branch=*/true);
    DDPOptions o;
    o.process_group = group;
    DistributedDataParallel<Mlp> ddp(model, o);
    at::Tensor y = ddp.forward(torch::randn({2, 8}), false);
    try {
      y.sum().backward();
      ADD_FAILURE() << "backward with an unused parameter did not throw";
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("branch.weight"), std::string::npos) << m;
      EXPECT_NE(m.find("find_unused_parameters=true"), std::string::npos) << m;
    }
  });
}

TEST(DistributedDataParallel, Fp16AndBf16CompressionHooksMatchLoosely) {
  for (auto make : {fp16_compress_hook, bf16_compress_hook}) {
    Scenario s;
    s.hook = make;
    expect_equivalent(s, 2e-2, 2e-3);
  }
}

TEST(DistributedDataParallel, AllreduceHookMatchesExactly) {
  Scenario s;
  s.hook = allreduce_hook;
  expect_equivalent(s);
}

TEST(DistributedDataParallel, JoinWithUnevenInputsMatches) {
  for (int world : {2, 3}) {
    Scenario s;
    s.world = world;
    s.steps_of = [](int rank) { return 3 + 2 * rank; };
    s.options.bucket_cap_mb = 1e-4;
    expect_equivalent(s);
  }
}

TEST(DistributedDataParallel, JoinWithUnevenInputsAndFindUnusedMatches) {
  Scenario s;
  s.world = 2;
  s.with_branch = true;
  s.use_branch = [](int step, int) { return step % 2 == 1; };
  s.options.find_unused_parameters = true;
  s.steps_of = [](int rank) { return rank == 0 ? 5 : 2; };
  expect_equivalent(s);
}

TEST(DistributedDataParallel, FirstBucketIsReducedWhileBackwardStillRuns) {
  Scenario s;
  s.steps = 2;
  s.options.bucket_cap_mb = 1e-4;
  s.options.first_bucket_cap_mb = 1e-4;
  Outcome out;
  out.finals.resize(2);
  out.stats.resize(2);
  run_torch_ranks(2, [&](const GroupPtr& group) { train_rank(s, group, out); });
  for (const auto& st : out.stats) {
    // The first bucket (the last layer's bias) was launched when most
    // gradients had not been computed yet.
    EXPECT_GT(st.pending_at_first_launch, 0u);
    EXPECT_GT(st.bucket_bytes.size(), 1u);
    EXPECT_TRUE(st.buckets_rebuilt);
    EXPECT_EQ(st.iterations, 2);
  }
}

TEST(DistributedDataParallel, DifferentModelsAcrossRanksAreNamedAtConstruction) {
  std::mutex mu;
  std::vector<std::string> messages(2);
  run_torch_ranks(2, [&](const GroupPtr& group) {
    Mlp model(group->rank() == 0 ? 16 : 12);
    DDPOptions o;
    o.process_group = group;
    try {
      DistributedDataParallel<Mlp> ddp(model, o);
    } catch (const InvalidArgument& e) {
      std::lock_guard<std::mutex> lock(mu);
      messages[static_cast<size_t>(group->rank())] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_NE(
        m.find("fc1.weight float32 [16, 8] on rank 0 but parameter fc1.weight float32 [12, 8] on rank 1"),
        std::string::npos)
        << m;
  }
}

TEST(DistributedDataParallel, PowerSGDConvergesOnALinearProblem) {
  run_torch_ranks(2, [](const GroupPtr& group) {
    torch::manual_seed(3);
    torch::nn::Linear model(torch::nn::LinearOptions(32, 32).bias(true));
    DDPOptions o;
    o.process_group = group;
    DistributedDataParallel<torch::nn::Linear> ddp(model, o);
    PowerSGDOptions p;
    p.start_powerSGD_iter = 2;
    p.matrix_approximation_rank = 2;
    ddp.register_comm_hook(powersgd_hook(p));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(42);
    const at::Tensor truth = at::randn({32, 32}, gen, at::kFloat) / 6;
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.2));
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      at::Tensor x = at::randn({16, 32}, gen, at::kFloat);
      opt.zero_grad();
      at::Tensor loss = torch::mse_loss(ddp.forward(x), torch::matmul(x, truth.t()));
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    EXPECT_LT(last, first * 0.02) << "PowerSGD did not converge: loss " << first << " -> " << last;
  });
}

TEST(DistributedDataParallel, ResumedRunEndsEqualToTheUninterruptedOne) {
  const std::string path = ::testing::TempDir() + "/cohort_ddp_checkpoint.pt";
  auto train = [&](const GroupPtr& group, int from, int to, bool save_at_end, bool resume) {
    torch::manual_seed(static_cast<uint64_t>(9 + group->rank() + from));
    Mlp model;
    DDPOptions o;
    o.process_group = group;
    DistributedDataParallel<Mlp> ddp(model, o);
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    if (resume) {
      EXPECT_EQ(load_checkpoint(path, *model, opt), from);
    }
    for (int step = from; step < to; ++step) {
      opt.zero_grad();
      torch::mse_loss(ddp.forward(input_of(step, 0, group->rank(), 4), false),
                      target_of(step, 0, group->rank(), 4))
          .backward();
      opt.step();
    }
    if (save_at_end) save_checkpoint(path, *model, opt, to, group);
    return clone_all(model->parameters());
  };
  std::vector<std::vector<at::Tensor>> straight(2), resumed(2);
  run_torch_ranks(2, [&](const GroupPtr& g) {
    // The same start for both runs: step 0 saved, then 6 steps.
    train(g, 0, 0, /*save=*/true, /*resume=*/false);
    straight[static_cast<size_t>(g->rank())] = train(g, 0, 6, false, /*resume=*/true);
    train(g, 0, 3, /*save=*/true, /*resume=*/true);
    resumed[static_cast<size_t>(g->rank())] = train(g, 3, 6, false, /*resume=*/true);
  });
  for (size_t i = 0; i < straight[0].size(); ++i) {
    EXPECT_TRUE(torch::equal(straight[0][i], straight[1][i])) << "the ranks drifted apart: parameter " << i;
  }
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(straight[r].size(), resumed[r].size());
    for (size_t i = 0; i < straight[r].size(); ++i) {
      EXPECT_TRUE(torch::equal(straight[r][i], resumed[r][i]))
          << "rank " << r << " parameter " << i << " differs by "
          << (straight[r][i] - resumed[r][i]).abs().max().item<double>();
    }
  }
  std::remove(path.c_str());
  EXPECT_THROW(
      {
        Mlp m;
        torch::optim::SGD opt(m->parameters(), 0.1);
        load_checkpoint(path, *m, opt);
      },
      InvalidArgument);
}

}  // namespace
}  // namespace cohort
