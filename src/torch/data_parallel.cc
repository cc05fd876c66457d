// data_parallel.cc: DataParallel's replicas, threads and gradients
// (cohort/data_parallel.h).
#include "cohort/data_parallel.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "cohort/errors.h"

namespace cohort {
namespace {

// GradInto adds a replica parameter's gradient, once autograd has
// accumulated it, into the module's parameter, and clears the replica's:
// the module's .grad is then the sum over replicas, and the replica starts
// the next backward from nothing.
struct GradInto : torch::autograd::PostAccumulateGradHook {
  GradInto(at::Tensor into, std::shared_ptr<std::mutex> mu) : into_(std::move(into)), mu_(std::move(mu)) {}
  void operator()(const torch::autograd::Variable& replica) override {
    std::lock_guard<std::mutex> lock(*mu_);
    at::Tensor& grad = into_.mutable_grad();
    if (grad.defined()) {
      grad.add_(replica.grad().to(grad.device()));
    } else {
      grad = replica.grad().detach().to(into_.device(), /*non_blocking=*/false, /*copy=*/true);
    }
    const_cast<torch::autograd::Variable&>(replica).mutable_grad().reset();
  }
  at::Tensor into_;
  std::shared_ptr<std::mutex> mu_;
};

}  // namespace

std::vector<torch::Device> cpu_devices(int count) {
  if (count < 1) throw InvalidArgument("cpu_devices: count is " + std::to_string(count) + "; it must be at least 1");
  return std::vector<torch::Device>(static_cast<size_t>(count), torch::Device(torch::kCPU));
}

void check_devices(const std::vector<torch::Device>& devices) {
  if (devices.empty()) throw InvalidArgument("DataParallel: no devices given");
  const bool cuda = devices.front().is_cuda();
  for (const torch::Device& d : devices) {
    if (d.is_cuda() != cuda || (!d.is_cuda() && !d.is_cpu())) {
      throw InvalidArgument("DataParallel: devices must be all CPU or all CUDA; got " + devices.front().str() +
                            " and " + d.str());
    }
    if (d.is_cuda() && d.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw InvalidArgument("DataParallel: device " + d.str() + " was given, but this process sees " +
                            std::to_string(torch::cuda::device_count()) + " CUDA devices");
    }
  }
}

DataParallelCore::DataParallelCore(std::shared_ptr<torch::nn::Module> module,
                                   std::vector<std::shared_ptr<torch::nn::Module>> replicas,
                                   std::vector<torch::Device> devices, int64_t dim)
    : module_(std::move(module)), replicas_(std::move(replicas)), devices_(std::move(devices)), dim_(dim) {
  const auto own = module_->parameters();
  auto mu = std::make_shared<std::mutex>();
  for (const auto& replica : replicas_) {
    const auto theirs = replica->parameters();
    for (size_t i = 0; i < theirs.size(); ++i) {
      if (!theirs[i].requires_grad()) continue;
      torch::autograd::impl::set_post_acc_grad_hooks(theirs[i], std::make_unique<GradInto>(own[i], mu));
    }
  }
}

DataParallelCore::~DataParallelCore() {
  for (const auto& replica : replicas_) {
    for (const auto& p : replica->parameters()) {
      if (p.requires_grad()) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    }
  }
}

void DataParallelCore::refresh_replicas() {
  torch::NoGradGuard no_grad;
  const auto params = module_->parameters();
  const auto buffers = module_->buffers();
  for (const auto& replica : replicas_) {
    auto theirs = replica->parameters();
    for (size_t i = 0; i < params.size(); ++i) theirs[i].copy_(params[i]);
    auto their_buffers = replica->buffers();
    for (size_t i = 0; i < buffers.size(); ++i) their_buffers[i].copy_(buffers[i]);
  }
}

at::Tensor DataParallelCore::run(const at::Tensor& input,
                                 const std::function<at::Tensor(size_t, const at::Tensor&)>& forward) {
  const int64_t d = dim_ < 0 ? dim_ + input.dim() : dim_;
  if (input.dim() == 0 || d < 0 || d >= input.dim()) {
    throw InvalidArgument("DataParallel: cannot cut an input of shape " + std::string(c10::str(input.sizes())) +
                          " along dimension " + std::to_string(dim_));
  }
  refresh_replicas();
  const std::vector<at::Tensor> pieces = input.chunk(static_cast<int64_t>(replicas_.size() + 1), d);
  std::vector<at::Tensor> outputs(pieces.size());
  std::vector<std::exception_ptr> errors(pieces.size());
  // Grad mode is per thread: the replicas' threads take the caller's.
  const bool grad = at::GradMode::is_enabled();
  auto run_one = [&](size_t i) {
    try {
      at::AutoGradMode mode(grad);
      // To the replica's device and back (no-ops on CPU): both copies are
      // in the autograd graph, so gradients take the way back.
      outputs[i] = forward(i, pieces[i].to(devices_[i])).to(devices_[0]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < pieces.size(); ++i) threads.emplace_back(run_one, i);
  run_one(0);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      throw Error("DataParallel: replica " + std::to_string(i) + " of " + std::to_string(pieces.size()) +
                  " failed in forward: " + e.what());
    }
  }
  return at::cat(outputs, d);
}

}  // namespace cohort
