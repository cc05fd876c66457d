// train_mnist: the PyTorch distributed tutorial's synchronous SGD
// (../shared/seeds/001_245d9d806684fc9b.txt) on libtorch with cohort:
// its Net, DistributedDataParallel instead of hand-averaged gradients,
// DistributedSampler instead of the partitioner, a progress line on rank 0,
// a checkpoint every epoch and --resume.
//
//   cohortrun --standalone --nproc-per-node 2 build/examples/train_mnist --epochs 3
//
// Without --data it trains on generated MNIST-like digits (data.h), so it
// needs no download; with --data DIR it reads MNIST's IDX files from DIR.
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cohort/checkpoint.h"
#include "cohort/data.h"
#include "cohort/ddp.h"
#include "cohort/distributed.h"
#include "cohort/elastic.h"
#include "cohort/tensor.h"

namespace {

// Net is the tutorial's: two convolutions, two linear layers.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        conv2_drop(register_module("conv2_drop", torch::nn::Dropout2d())),
        fc1(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2(register_module("fc2", torch::nn::Linear(50, 10))) {}

  at::Tensor forward(at::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop(conv2(x)), 2));
    x = torch::relu(fc1(x.view({-1, 320})));
    x = torch::dropout(x, 0.5, is_training());
    return torch::log_softmax(fc2(x), 1);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

struct Args {
  std::string data;
  int epochs = 3;
  int batch_size = 64;  // per rank: the tutorial's 128 over 2 ranks
  double lr = 0.03;
  double momentum = 0.5;
  int64_t train_samples = 60000;
  int64_t test_samples = 10000;
  std::string checkpoint = "train_mnist.ckpt";
  bool resume = false;
  uint64_t seed = 1234;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// accuracy: the fraction of the test set the model classifies right,
// each rank scoring every world_size-th sample.
double accuracy(Net& model, const cohort::Dataset& test) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t rank = cohort::get_rank(), world = cohort::get_world_size();
  at::Tensor mine = torch::arange(rank, test.size(), world);
  at::Tensor counts = torch::zeros({2}, torch::kInt64);
  for (int64_t start = 0; start < mine.size(0); start += 1000) {
    at::Tensor idx = mine.slice(0, start, std::min(start + 1000, mine.size(0)));
    at::Tensor predicted = model->forward(test.images.index_select(0, idx)).argmax(1);
    counts[0] += predicted.eq(test.labels.index_select(0, idx)).sum();
    counts[1] += idx.size(0);
  }
  cohort::all_reduce(counts);
  model->train();
  return counts[0].item<double>() / counts[1].item<double>();
}

void progress(int epoch, int epochs, int64_t done, int64_t total, double loss, double acc,
              double samples_per_s, double comm_s, double exposed_s, bool final_line) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::printf(
      "epoch %d/%d [%s] %3d%%  loss %.4f  acc %5.1f%%  %6.0f samples/s  comm %.2f s (exposed %.2f s)%s\n",
      epoch, epochs, bar.c_str(), static_cast<int>(100 * done / std::max<int64_t>(total, 1)), loss, 100 * acc,
      samples_per_s, comm_s, exposed_s, final_line ? "" : " ...");
  std::fflush(stdout);
}

}  // namespace

int train(int argc, char** argv) {
  Args a;
  CLI::App app{"Distributed synchronous SGD on MNIST (the PyTorch tutorial's), with cohort's DDP"};
  app.add_option("--data", a.data, "directory with MNIST's IDX files (default: generated digits)");
  app.add_option("--epochs", a.epochs, "epochs to train")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", a.batch_size, "samples per rank per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", a.lr, "SGD learning rate");
  app.add_option("--momentum", a.momentum, "SGD momentum");
  app.add_option("--train-samples", a.train_samples, "generated training samples")
      ->check(CLI::PositiveNumber);
  app.add_option("--test-samples", a.test_samples, "generated test samples")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint", a.checkpoint, "checkpoint file, written every epoch");
  app.add_flag("--resume", a.resume, "continue from --checkpoint if it exists");
  app.add_option("--seed", a.seed, "seed of the model and the sampler");
  CLI11_PARSE(app, argc, argv);

  if (!std::getenv("OMP_NUM_THREADS")) at::set_num_threads(1);
  cohort::init_process_group();
  const int rank = cohort::get_rank(), world = cohort::get_world_size();

  const auto t_data = std::chrono::steady_clock::now();
  cohort::Dataset train =
      a.data.empty() ? cohort::synthetic_mnist(a.train_samples, a.seed) : cohort::read_mnist(a.data, true);
  cohort::Dataset test = a.data.empty() ? cohort::synthetic_mnist(a.test_samples, a.seed + 1)
                                        : cohort::read_mnist(a.data, false);
  if (rank == 0) {
    std::printf("%d ranks; %s data: %lld training and %lld test images (%.1f s)\n", world,
                a.data.empty() ? "generated" : a.data.c_str(), static_cast<long long>(train.size()),
                static_cast<long long>(test.size()), seconds_since(t_data));
  }

  torch::manual_seed(a.seed + static_cast<uint64_t>(rank));  // DDP makes every rank start from rank 0's
  Net model;
  cohort::DistributedDataParallel<Net> ddp(model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(a.lr).momentum(a.momentum));
  int start_epoch = 0;
  if (a.resume && ::access(a.checkpoint.c_str(), R_OK) == 0) {
    start_epoch = static_cast<int>(cohort::load_checkpoint(a.checkpoint, *model, optimizer));
    if (rank == 0) std::printf("resumed from %s after epoch %d\n", a.checkpoint.c_str(), start_epoch);
  }

  cohort::DistributedSampler sampler(train.size(), world, rank, /*shuffle=*/true, a.seed);
  const int64_t steps = (sampler.size() + a.batch_size - 1) / a.batch_size;
  const auto t_train = std::chrono::steady_clock::now();
  for (int epoch = start_epoch; epoch < a.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const at::Tensor order = torch::tensor(sampler.indices(), torch::kInt64);
    const auto t_epoch = std::chrono::steady_clock::now();
    const cohort::DDPStats before = ddp.stats();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    for (int64_t step = 0; step < steps; ++step) {
      at::Tensor idx =
          order.slice(0, step * a.batch_size, std::min((step + 1) * a.batch_size, order.size(0)));
      at::Tensor data = train.images.index_select(0, idx), target = train.labels.index_select(0, idx);
      optimizer.zero_grad();
      at::Tensor output = ddp.forward(data);
      at::Tensor loss = torch::nll_loss(output, target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += idx.size(0);
      const bool last = step + 1 == steps;
      if (rank == 0 && (last || (step + 1) % std::max<int64_t>(steps / 4, 1) == 0)) {
        const cohort::DDPStats now = ddp.stats();
        progress(epoch + 1, a.epochs, step + 1, steps, loss_sum / static_cast<double>(step + 1),
                 static_cast<double>(correct) / static_cast<double>(seen),
                 static_cast<double>(seen * world) / seconds_since(t_epoch),
                 now.comm_seconds - before.comm_seconds, now.exposed_seconds - before.exposed_seconds, last);
      }
    }
    cohort::save_checkpoint(a.checkpoint, *model, optimizer, epoch + 1);
    const double acc = accuracy(model, test);
    if (rank == 0) {
      std::printf("epoch %d/%d done in %.1f s: test accuracy %.2f%%, checkpoint %s\n", epoch + 1, a.epochs,
                  seconds_since(t_epoch), 100 * acc, a.checkpoint.c_str());
    }
  }
  const double final_accuracy = accuracy(model, test);
  if (rank == 0) {
    std::printf("trained %d epochs on %d ranks in %.1f s; test accuracy: %.2f%%\n", a.epochs - start_epoch,
                world, seconds_since(t_train), 100 * final_accuracy);
  }
  cohort::destroy_process_group();
  return 0;
}

// An exception that ends the run is written to the launcher's error file,
// so that cohortrun's summary names it as the root cause.
int main(int argc, char** argv) {
  return cohort::record_errors([&] { return train(argc, argv); });
}
