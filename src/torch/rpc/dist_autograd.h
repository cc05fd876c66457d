// dist_autograd.h (rpc, internal): what the agent's messages do for
// distributed autograd (cohort/dist_autograd.h): tag what leaves a worker
// inside a context, and graft what arrives into the graph.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace cohort::dist_autograd {

// AutogradTag rides in a message: the context and the send it belongs to.
struct AutogradTag {
  int64_t context = -1;
  int64_t message = -1;
};

// current_context: this thread's (-1: none).
int64_t current_context();

// ContextScope makes `id` current on this thread for its lifetime (a call
// that arrived inside a context runs in it, so its own calls and its
// result are recorded in it too).
class ContextScope {
 public:
  explicit ContextScope(int64_t id);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  int64_t previous_;
};

// record_send: a message to worker `to` carries `tensors`; when a context
// is current and some require grad (or `force`), they are recorded as a
// send of it and *requires_grad marks them; returns the tag (context -1:
// none).
AutogradTag record_send(int to, const std::vector<at::Tensor>& tensors, std::vector<uint8_t>* requires_grad,
                        bool force = false);

// attach_recv makes the marked `tensors` of a message from `from` come out
// of a recv function of the tagged send.
void attach_recv(int from, AutogradTag tag, const std::vector<at::Tensor>& tensors,
                 const std::vector<uint8_t>& requires_grad);

// capturing_leaf_gradients: this thread is running the engine for a
// distributed backward, whose leaf gradients go to the context and never to
// .grad (the engine hands them back instead of running the accumulators).
// DDP's Reducer asks, from the tensor pre-hook the engine runs on each
// leaf's accumulator either way, to reduce the gradient on its way there.
bool capturing_leaf_gradients();

// register_builtins registers the functions the workers call each other
// for backward and the distributed optimizer (once per process).
void register_builtins();

}  // namespace cohort::dist_autograd
