// dist_autograd.cc (rpc): distributed autograd contexts, the recv
// function, backward across workers, and the distributed optimizer
// (cohort/dist_autograd.h).
//
// How backward crosses workers: a worker runs libtorch's engine from its
// roots with the graph's leaves (AccumulateGrad) and recv functions as the
// engine's outputs, so the engine hands back what reaches each of them
// instead of running them: the leaves' gradients go into the context, and
// each recv function's gradients go to the worker that sent its tensors
// (the builtin "__cohort_dist_backward"), which runs the same from the
// tensors it sent. Every worker's part is done when the calls return.
#include "torch/rpc/dist_autograd.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "cohort/dist_autograd.h"
#include "cohort/errors.h"

namespace cohort::dist_autograd {
namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

struct ContextState {
  std::mutex mu;
  std::unordered_map<int64_t, std::vector<at::Tensor>> sends;  // message -> the tensors sent
  std::vector<std::pair<at::Tensor, at::Tensor>> grads;        // leaf -> its gradient
  std::set<int> workers;                                       // reached from here, or from whom
};

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<int64_t, std::shared_ptr<ContextState>>& contexts() {
  static std::unordered_map<int64_t, std::shared_ptr<ContextState>> all;
  return all;
}

std::shared_ptr<ContextState> find(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto it = contexts().find(id);
  return it == contexts().end() ? nullptr : it->second;
}

std::shared_ptr<ContextState> find_or_make(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto& c = contexts()[id];
  if (!c) c = std::make_shared<ContextState>();
  return c;
}

std::shared_ptr<ContextState> known(int64_t id) {
  auto c = find(id);
  if (!c) {
    throw InvalidArgument("dist_autograd: no context " + std::to_string(id) + " on this worker (made with a "
                          "dist_autograd::Context, and not yet released)");
  }
  return c;
}

thread_local int64_t current = -1;
thread_local bool capturing = false;
std::atomic<int64_t> next_message{1};

void accumulate(ContextState& c, const at::Tensor& leaf, const at::Tensor& grad) {
  if (!grad.defined()) return;
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [t, g] : c.grads) {
    if (t.unsafeGetTensorImpl() == leaf.unsafeGetTensorImpl()) {
      g = g + grad;
      return;
    }
  }
  c.grads.emplace_back(leaf, grad.clone());
}

void send_grads(int to, int64_t context, int64_t message, const variable_list& grads, bool retain_graph);

// RecvRpcBackward: where tensors that came from worker `from` enter this
// worker's graph. backward() takes its gradients as engine outputs; a
// plain local backward through it runs apply, which sends them on too.
struct RecvRpcBackward : Node {
  RecvRpcBackward(int from_worker, AutogradTag from_tag) : from(from_worker), tag(from_tag) {}
  variable_list apply(variable_list&& grads) override {
    send_grads(from, tag.context, tag.message, grads, true);
    return {};
  }
  std::string name() const override { return "cohort::dist_autograd::RecvRpcBackward"; }
  const int from;
  const AutogradTag tag;
};

// propagate runs this worker's part from `roots` with `grads`.
void propagate(int64_t context, const std::shared_ptr<ContextState>& state, const torch::autograd::edge_list& roots,
               const variable_list& grads, bool retain_graph) {
  // Find the leaves and recv functions the roots reach.
  std::vector<c10::intrusive_ptr<Node>> stack, leaves, recvs;
  std::set<Node*> seen;
  for (const Edge& e : roots) {
    if (e.function && seen.insert(e.function.get()).second) stack.push_back(e.function);
  }
  while (!stack.empty()) {
    c10::intrusive_ptr<Node> n = stack.back();
    stack.pop_back();
    if (dynamic_cast<torch::autograd::AccumulateGrad*>(n.get())) {
      leaves.push_back(n);
    } else if (dynamic_cast<RecvRpcBackward*>(n.get())) {
      recvs.push_back(n);
    }
    for (const Edge& e : n->next_edges()) {
      if (e.function && seen.insert(e.function.get()).second) stack.push_back(e.function);
    }
  }
  torch::autograd::edge_list outputs;
  for (const auto& leaf : leaves) outputs.emplace_back(leaf, 0);
  for (const auto& recv : recvs) {
    for (uint32_t i = 0; i < recv->num_inputs(); ++i) outputs.emplace_back(recv, i);
  }
  if (outputs.empty()) return;
  // On CPU the engine runs this graph on this thread, hooks included.
  struct Capturing {
    bool before = capturing;
    Capturing() { capturing = true; }
    ~Capturing() { capturing = before; }
  };
  variable_list got;
  {
    Capturing scope;
    got = torch::autograd::Engine::get_default_engine().execute(
        roots, grads, /*keep_graph=*/retain_graph, /*create_graph=*/false, /*accumulate_grad=*/false, outputs);
  }
  size_t at = 0;
  for (const auto& leaf : leaves) {
    accumulate(*state, static_cast<torch::autograd::AccumulateGrad*>(leaf.get())->variable, got[at++]);
  }
  // Each recv's gradients back to its sender, all at once.
  std::vector<rpc::FuturePtr> pending;
  for (const auto& recv : recvs) {
    auto* r = static_cast<RecvRpcBackward*>(recv.get());
    c10::impl::GenericList list(c10::AnyType::get());
    for (uint32_t i = 0; i < r->num_inputs(); ++i) {
      at::Tensor g = got[at++];
      if (!g.defined()) g = r->input_metadata(i).zeros_like();
      list.push_back(g);
    }
    pending.push_back(rpc::rpc_async(r->from, "__cohort_dist_backward",
                                     {c10::IValue(context), c10::IValue(r->tag.message), c10::IValue(list),
                                      c10::IValue(retain_graph)},
                                     std::chrono::milliseconds(0)));
  }
  for (auto& f : pending) f->waitAndThrow();
}

void send_grads(int to, int64_t context, int64_t message, const variable_list& grads, bool retain_graph) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (const auto& g : grads) list.push_back(g);
  rpc::rpc_sync(to, "__cohort_dist_backward",
                {c10::IValue(context), c10::IValue(message), c10::IValue(list), c10::IValue(retain_graph)},
                std::chrono::milliseconds(0));
}

// The builtins' state on each worker: the optimizers it runs.
std::mutex& optimizers_mu() {
  static std::mutex mu;
  return mu;
}
std::map<int64_t, std::unique_ptr<torch::optim::Optimizer>>& optimizers() {
  static std::map<int64_t, std::unique_ptr<torch::optim::Optimizer>> all;
  return all;
}
std::atomic<int64_t> next_optimizer{1};

}  // namespace

int64_t current_context() { return current; }
bool capturing_leaf_gradients() { return capturing; }

ContextScope::ContextScope(int64_t id) : previous_(current) { current = id; }
ContextScope::~ContextScope() { current = previous_; }

AutogradTag record_send(int to, const std::vector<at::Tensor>& tensors, std::vector<uint8_t>* requires_grad,
                        bool force) {
  if (current < 0) return {};
  std::vector<at::Tensor> sent;
  requires_grad->assign(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].requires_grad()) {
      (*requires_grad)[i] = 1;
      sent.push_back(tensors[i]);
    }
  }
  if (sent.empty() && !force) return {};
  auto state = find_or_make(current);
  const int64_t message = next_message.fetch_add(1);
  std::lock_guard<std::mutex> lock(state->mu);
  state->sends[message] = std::move(sent);
  state->workers.insert(to);
  return AutogradTag{current, message};
}

void attach_recv(int from, AutogradTag tag, const std::vector<at::Tensor>& tensors,
                 const std::vector<uint8_t>& requires_grad) {
  auto state = find_or_make(tag.context);
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->workers.insert(from);
  }
  auto node = c10::make_intrusive<RecvRpcBackward>(from, tag);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (requires_grad[i]) torch::autograd::set_history(tensors[i], node);
  }
}

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    rpc::register_function("__cohort_dist_backward", [](const std::vector<c10::IValue>& a) {
      const int64_t context = a[0].toInt(), message = a[1].toInt();
      auto state = known(context);
      std::vector<at::Tensor> sent;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        auto it = state->sends.find(message);
        if (it == state->sends.end()) {
          throw InvalidArgument("dist_autograd: context " + std::to_string(context) + " has no send #" +
                                std::to_string(message));
        }
        sent = it->second;
      }
      auto list = a[2].toList();
      torch::autograd::edge_list roots;
      variable_list grads;
      for (size_t i = 0; i < sent.size(); ++i) {
        roots.push_back(torch::autograd::impl::gradient_edge(sent[i]));
        grads.push_back(list.get(i).toTensor());
      }
      propagate(context, state, roots, grads, a[3].toBool());
      return c10::IValue();
    });
    rpc::register_function("__cohort_dist_release", [](const std::vector<c10::IValue>& a) {
      std::lock_guard<std::mutex> lock(registry_mu());
      contexts().erase(a[0].toInt());
      return c10::IValue();
    });
    rpc::register_function("__cohort_dist_opt_new", [](const std::vector<c10::IValue>& a) {
      const auto kind = static_cast<rpc::DistributedOptimizer::Kind>(a[0].toInt());
      const auto o = a[1].toDoubleVector();
      std::vector<at::Tensor> params;
      for (const c10::IValue& r : a[2].toList()) params.push_back(rpc::RRef::from(r).local_value().toTensor());
      std::unique_ptr<torch::optim::Optimizer> opt;
      if (kind == rpc::DistributedOptimizer::Kind::kSgd) {
        opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(o[0]).momentum(o[1]).weight_decay(o[2]));
      } else {
        opt = std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(o[0]).betas({o[3], o[4]}).eps(o[5]).weight_decay(o[2]));
      }
      const int64_t id = next_optimizer.fetch_add(1);
      std::lock_guard<std::mutex> lock(optimizers_mu());
      optimizers()[id] = std::move(opt);
      return c10::IValue(id);
    });
    rpc::register_function("__cohort_dist_opt_step", [](const std::vector<c10::IValue>& a) {
      const int64_t id = a[0].toInt();
      auto state = known(a[1].toInt());
      std::lock_guard<std::mutex> lock(optimizers_mu());
      auto it = optimizers().find(id);
      if (it == optimizers().end()) throw InvalidArgument("dist_optim: no optimizer #" + std::to_string(id));
      // The context's gradients stand in for .grad during the step.
      std::vector<std::pair<at::Tensor, at::Tensor>> saved;
      {
        std::lock_guard<std::mutex> slock(state->mu);
        for (auto& group : it->second->param_groups()) {
          for (auto& p : group.params()) {
            saved.emplace_back(p, p.grad());
            at::Tensor g;
            for (auto& [t, grad] : state->grads) {
              if (t.unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) g = grad;
            }
            p.mutable_grad() = g.defined() ? g.clone() : at::Tensor();
          }
        }
      }
      it->second->step();
      for (auto& [p, g] : saved) p.mutable_grad() = g;
      return c10::IValue();
    });
    rpc::register_function("__cohort_dist_opt_free", [](const std::vector<c10::IValue>& a) {
      std::lock_guard<std::mutex> lock(optimizers_mu());
      optimizers().erase(a[0].toInt());
      return c10::IValue();
    });
  });
}

// ---- dist_autograd.h ----

Context::Context() : previous_(current) {
  static std::atomic<int64_t> counter{1};
  const int64_t worker = rpc::get_worker_info().id;
  id_ = (static_cast<int64_t>(worker) << 40) | counter.fetch_add(1);
  find_or_make(id_);
  current = id_;
}

Context::~Context() {
  current = previous_;
  std::shared_ptr<ContextState> state;
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    auto it = contexts().find(id_);
    if (it == contexts().end()) return;
    state = it->second;
    contexts().erase(it);
  }
  // The workers it reached release it too (those they reached were told
  // by them when they ran their part... or are told here if this worker
  // reached them): best effort, without waiting.
  if (!rpc::is_initialized()) return;
  for (int w : state->workers) {
    try {
      rpc::rpc_async(w, "__cohort_dist_release", {c10::IValue(id_)});
    } catch (const std::exception&) {
      // a worker that is gone has nothing to release
    }
  }
}

void backward(int64_t context_id, const std::vector<at::Tensor>& roots, bool retain_graph) {
  auto state = known(context_id);
  torch::autograd::edge_list edges;
  variable_list grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].requires_grad()) {
      throw InvalidArgument("dist_autograd::backward: root #" + std::to_string(i) + " does not require grad");
    }
    edges.push_back(torch::autograd::impl::gradient_edge(roots[i]));
    grads.push_back(at::ones_like(roots[i]));
  }
  ContextScope scope(context_id);
  propagate(context_id, state, edges, grads, retain_graph);
}

c10::Dict<at::Tensor, at::Tensor> get_gradients(int64_t context_id) {
  auto state = known(context_id);
  c10::Dict<at::Tensor, at::Tensor> out;
  std::lock_guard<std::mutex> lock(state->mu);
  for (const auto& [t, g] : state->grads) out.insert(t, g);
  return out;
}

}  // namespace cohort::dist_autograd

namespace cohort::rpc {

DistributedOptimizer::DistributedOptimizer(Kind kind, const std::vector<RRef>& parameters, Options o) {
  std::map<int, std::vector<RRef>> by_owner;
  for (const RRef& p : parameters) by_owner[p.owner().id].push_back(p);
  const std::vector<double> options{o.lr, o.momentum, o.weight_decay, o.beta1, o.beta2, o.eps};
  for (auto& [owner, refs] : by_owner) {
    c10::impl::GenericList list(c10::AnyType::get());
    for (const RRef& r : refs) list.push_back(IValue(r));
    const int64_t id = rpc_sync(owner, "__cohort_dist_opt_new",
                                {IValue(static_cast<int64_t>(kind)), IValue(options), IValue(list)})
                           .toInt();
    optimizers_.emplace_back(owner, id);
  }
}

DistributedOptimizer::~DistributedOptimizer() {
  if (!is_initialized()) return;
  for (auto& [owner, id] : optimizers_) {
    try {
      rpc_sync(owner, "__cohort_dist_opt_free", {IValue(id)});
    } catch (const std::exception&) {
      // its owner is gone, and the optimizer with it
    }
  }
}

void DistributedOptimizer::step(int64_t context_id) {
  std::vector<FuturePtr> steps;
  for (auto& [owner, id] : optimizers_) {
    steps.push_back(rpc_async(owner, "__cohort_dist_opt_step", {IValue(id), IValue(context_id)}));
  }
  for (auto& f : steps) f->waitAndThrow();
}

}  // namespace cohort::rpc
