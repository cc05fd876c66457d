// data_parallel.h: torch.nn.DataParallel for libtorch modules: one
// process, several devices. Each forward copies the module's parameters
// and buffers into its replicas, cuts the batch along `dim` (as
// torch.chunk: fewer pieces than devices when the batch is small), runs
// the replicas at once, one thread each, and joins their outputs along
// `dim`; backward sums the replicas' gradients into the module's own, so
// an optimizer of the module steps as if one replica had seen the whole
// batch.
//
//   torch::nn::Sequential net(...);
//   cohort::DataParallel<torch::nn::Sequential> dp(net, cohort::cpu_devices(3));
//   auto loss = torch::mse_loss(dp.forward(batch), target);
//   loss.backward();   // net's .grad: the whole batch's gradient
//   optimizer.step();  // an optimizer over net->parameters()
//
// CPU "devices" are threads (cpu_devices(n): n of them), so the data-
// parallel path is exercised on a machine without a GPU. With CUDA
// devices the module must be on the first; replica i lives on device i,
// its piece of the batch is copied there and its output back to the
// first device, its gradients to the module's (the same code: on CPU the
// copies are no-ops; on CUDA it is untested here, as no GPU is). Where
// this process sees fewer CUDA devices than asked for, the constructor
// raises InvalidArgument naming them. The module must be Cloneable (every
// torch::nn module; user modules derive from torch::nn::Cloneable<T>).
// Replica 0 is the module itself; the others are its clones. Buffers the
// replicas change in forward (batch norm's running statistics) are kept
// from replica 0 only, as torch's DataParallel keeps those of device 0.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

namespace cohort {

// cpu_devices is `count` CPU devices, each a thread of DataParallel.
std::vector<torch::Device> cpu_devices(int count);

// DataParallelCore is what DataParallel does that does not depend on the
// module's type.
class DataParallelCore {
 public:
  // replicas[i] is on devices[i + 1]; the module on devices[0].
  DataParallelCore(std::shared_ptr<torch::nn::Module> module,
                   std::vector<std::shared_ptr<torch::nn::Module>> replicas, std::vector<torch::Device> devices,
                   int64_t dim);
  ~DataParallelCore();
  // run cuts `input`, calls forward(replica index, piece) for each piece
  // at once (replica 0 on this thread), and joins the outputs.
  at::Tensor run(const at::Tensor& input, const std::function<at::Tensor(size_t, const at::Tensor&)>& forward);

 private:
  void refresh_replicas();
  std::shared_ptr<torch::nn::Module> module_;
  std::vector<std::shared_ptr<torch::nn::Module>> replicas_;  // 1..n-1
  std::vector<torch::Device> devices_;
  int64_t dim_;
};

// check_devices raises InvalidArgument for an empty list, a mix of kinds,
// or CUDA devices this process does not have.
void check_devices(const std::vector<torch::Device>& devices);

template <class Holder>
class DataParallel {
 public:
  using Impl = typename Holder::ContainedType;

  DataParallel(Holder module, std::vector<torch::Device> devices, int64_t dim = 0)
      : module_(std::move(module)) {
    check_devices(devices);
    std::vector<std::shared_ptr<torch::nn::Module>> replicas;
    for (size_t i = 1; i < devices.size(); ++i) {
      auto replica = std::dynamic_pointer_cast<Impl>(module_->clone(devices[i]));
      replicas_.push_back(replica);
      replicas.push_back(replica);
    }
    core_ = std::make_unique<DataParallelCore>(module_.ptr(), std::move(replicas), std::move(devices), dim);
  }

  at::Tensor forward(const at::Tensor& input) {
    return core_->run(input, [this](size_t i, const at::Tensor& piece) {
      return i == 0 ? module_->forward(piece) : replicas_[i - 1]->forward(piece);
    });
  }

  // module is the wrapped module: its parameters are the ones to optimise.
  Holder& module() { return module_; }
  size_t replica_count() const { return replicas_.size() + 1; }

 private:
  Holder module_;
  std::vector<std::shared_ptr<Impl>> replicas_;
  std::unique_ptr<DataParallelCore> core_;
};

}  // namespace cohort
