// dist_autograd.h: distributed autograd and the distributed optimizer,
// after torch.distributed.autograd and torch.distributed.optim, for
// libtorch programs that call each other through cohort/rpc.h.
//
//   cohort::dist_autograd::Context context;              // torch's `with dist_autograd.context()`
//   auto hidden = cohort::rpc::rpc_sync("ps", "forward", {x}).toTensor();
//   auto loss = (hidden * w).sum();
//   cohort::dist_autograd::backward(context.id(), {loss});
//   auto grads = cohort::dist_autograd::get_gradients(context.id());  // this worker's leaves
//   optimizer.step(context.id());                         // a DistributedOptimizer
//
// Inside a context, an RPC whose arguments (or result) hold tensors that
// require grad records a "send" on the sender, and on the receiver the
// tensors it makes come out of a "recv" function: the receiver's
// computation on them is part of one graph across workers. backward runs
// it (torch's FAST mode): the local part on this worker, then the
// gradients that reach each recv go back to its sender, which runs its
// part, and so on; backward returns when every worker's part is done.
// Gradients accumulate in the context on each worker (get_gradients),
// never in .grad.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "cohort/rpc.h"

namespace cohort::dist_autograd {

// Context makes a distributed autograd context current on this thread for
// its lifetime; its id names it on every worker. On destruction it is
// released here and on the workers it reached.
class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  int64_t id() const { return id_; }

 private:
  int64_t id_;
  int64_t previous_;
};

// backward runs the graph from `roots` (their gradient: ones) across every
// worker the context reached. InvalidArgument for an unknown context or a
// root that does not require grad; what a worker raises on the way is
// raised here.
void backward(int64_t context_id, const std::vector<at::Tensor>& roots, bool retain_graph = false);

// get_gradients: the gradients accumulated on this worker in the context,
// by leaf tensor.
c10::Dict<at::Tensor, at::Tensor> get_gradients(int64_t context_id);

}  // namespace cohort::dist_autograd

namespace cohort::rpc {

// DistributedOptimizer runs a local optimizer on each owner of the
// parameters given (RRefs to leaf tensors that require grad), over the
// gradients a distributed autograd context left there; step() steps every
// owner at once and returns when all are done.
class DistributedOptimizer {
 public:
  enum class Kind { kSgd, kAdam };
  struct Options {
    double lr = 0.01;
    double momentum = 0;      // SGD
    double weight_decay = 0;  // both
    double beta1 = 0.9;       // Adam
    double beta2 = 0.999;     // Adam
    double eps = 1e-8;        // Adam
  };
  DistributedOptimizer(Kind kind, const std::vector<RRef>& parameters, Options options);
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  void step(int64_t context_id);

 private:
  std::vector<std::pair<int, int64_t>> optimizers_;  // owner, its optimizer's id there
};

}  // namespace cohort::rpc
