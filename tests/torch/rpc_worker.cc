// rpc_worker: one worker of tests/torch/rpc_process_test.cc, joined by
// env:// as worker "w<rank>". The argument names the scenario:
//   calls     (3 workers) every IValue kind both ways, remote errors,
//             unknown functions and workers, timeouts, rpc_async and then,
//             async functions, nested and self calls, a 16 MiB tensor
//   rrefs     (3 workers) remote, to_here, local_value, RRefs passed to
//             the owner and to a third worker, returned RRefs, remote
//             errors through to_here, and the owners' counts reaching
//             zero once every user is gone
//   kill      (3 workers) w1 kills itself while w0 waits on it: w0's
//             pending call fails naming w1 (not by timeout), w0 and w2
//             go on calling each other
//   shutdown  (2 workers) graceful shutdown with calls in flight: every
//             call completes before the workers leave
//   autograd  (3 workers) w0's input goes through w1's and w2's parameters
//             by rpc: distributed backward gives every worker the gradients
//             one process's autograd gives, in the context and not in
//             .grad; DistributedOptimizer's SGD and Adam steps equal local
//             ones
// Prints "rank R ok: <scenario>" and exits 0, or says what was wrong and
// exits 1.
#include <signal.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cohort/dist_autograd.h"
#include "cohort/errors.h"
#include "cohort/rpc.h"
#include "torch/worker_checks.h"

using namespace cohort;
using namespace cohort::rpc;
using cohort::testing::check;

namespace {

using Args = std::vector<IValue>;

template <class E, class F>
std::string raises(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("another exception: ") + e.what();
  }
  return "nothing raised";
}

c10::ArrayRef<IValue> fields_of(const IValue& tuple) { return tuple.toTupleRef().elements().asArrayRef(); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool same(const IValue& a, const IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const auto& x = a.toTensor();
    const auto& y = b.toTensor();
    return x.dtype() == y.dtype() && x.sizes() == y.sizes() && at::equal(x, y);
  }
  if (a.isList() && b.isList()) {
    auto x = a.toList(), y = b.toList();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!same(x.get(i), y.get(i))) return false;
    }
    return true;
  }
  if (a.isTuple() && b.isTuple()) {
    auto x = fields_of(a), y = fields_of(b);
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!same(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto x = a.toGenericDict(), y = b.toGenericDict();
    if (x.size() != y.size()) return false;
    for (const auto& e : x) {
      auto it = y.find(e.key());
      if (it == y.end() || !same(e.value(), it->value())) return false;
    }
    return true;
  }
  return a == b;
}

std::atomic<bool> told_to_leave{false};

// A future completed later, by another thread, when "release" is called.
std::mutex gate_mu;
std::vector<std::pair<FuturePtr, int64_t>> gated;

void register_functions() {
  register_function("echo", [](const Args& a) { return IValue(c10::ivalue::Tuple::create(a)); });
  register_function("add", [](const Args& a) { return IValue(a[0].toTensor() + a[1].toTensor()); });
  register_function("ones", [](const Args& a) { return IValue(torch::ones({a[0].toInt()})); });
  register_function("raise", [](const Args&) -> IValue { throw std::runtime_error("boom: a value out of range"); });
  register_function("slow", [](const Args& a) {
    std::this_thread::sleep_for(std::chrono::milliseconds(a[0].toInt()));
    return IValue(a[0].toInt());
  });
  register_function("whoami", [](const Args&) { return IValue(get_worker_info().name); });
  register_function("nested_add", [](const Args& a) {
    // Calls on: w1 asks w2.
    return rpc_sync(a[0].toStringRef(), "add", {a[1], a[2]});
  });
  register_async_function("gated", [](const Args& a) {
    auto f = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
    std::lock_guard<std::mutex> lock(gate_mu);
    gated.emplace_back(f, a[0].toInt());
    return f;
  });
  register_function("release", [](const Args&) {
    std::vector<std::pair<FuturePtr, int64_t>> now;
    {
      std::lock_guard<std::mutex> lock(gate_mu);
      now.swap(gated);
    }
    for (auto& [f, v] : now) f->markCompleted(IValue(v * 10));
    return IValue(static_cast<int64_t>(now.size()));
  });
  register_async_function("async_raise", [](const Args&) {
    auto f = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
    f->setError(std::make_exception_ptr(std::runtime_error("async boom")));
    return f;
  });
  register_function("rref_sum", [](const Args& a) { return IValue(RRef::from(a[0]).to_here().toTensor().sum()); });
  register_function("rref_owner", [](const Args& a) { return IValue(RRef::from(a[0]).owner().name); });
  register_function("rref_is_owner", [](const Args& a) { return IValue(RRef::from(a[0]).is_owner()); });
  register_function("make_rref", [](const Args& a) {
    // An RRef owned by another worker, made here and returned.
    return IValue(remote(a[0].toStringRef(), "ones", {a[1]}));
  });
  register_function("counts", [](const Args&) {
    RRefCounts c = rref_counts();
    return IValue(c10::ivalue::Tuple::create({IValue(static_cast<int64_t>(c.owned)),
                                              IValue(static_cast<int64_t>(c.users_known)),
                                              IValue(static_cast<int64_t>(c.live_users)),
                                              IValue(static_cast<int64_t>(c.pending_children)),
                                              IValue(static_cast<int64_t>(c.pending_deletes))}));
  });
  register_function("leave", [](const Args&) {
    told_to_leave.store(true);
    return IValue();
  });
  register_function("die", [](const Args&) -> IValue {
    ::raise(SIGKILL);
    return IValue();
  });
}

// This worker's parameter: w1's is 4 x 3, w2's 3 x 3, values known to w0.
at::Tensor param_values(int rank) {
  const int64_t rows = rank == 1 ? 4 : 3;
  return torch::linspace(-1, 1, rows * 3, torch::kDouble).reshape({rows, 3}) * (1.0 + rank);
}
at::Tensor& param() {
  static at::Tensor p = param_values(std::atoi(std::getenv("RANK"))).requires_grad_(true);
  return p;
}

void register_autograd_functions() {
  register_function("lin", [](const Args& a) { return IValue(torch::matmul(a[0].toTensor(), param())); });
  register_function("param_rref", [](const Args&) { return IValue(param()); });
  register_function("param_value", [](const Args&) { return IValue(param().detach().clone()); });
  register_function("param_grad", [](const Args& a) {
    auto grads = dist_autograd::get_gradients(a[0].toInt());
    auto it = grads.find(param());
    return it == grads.end() ? IValue() : IValue(it->value());
  });
  register_async_function("lin_later", [](const Args& a) {
    // An async function whose result is made on another thread.
    auto f = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get());
    at::Tensor x = a[0].toTensor();
    std::thread([f, x] { f->markCompleted(IValue(torch::matmul(x, param()))); }).detach();
    return f;
  });
  register_function("param_dot_grad_defined", [](const Args&) { return IValue(param().grad().defined()); });
}

bool near(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() && at::allclose(a, b, 1e-10, 1e-12);
}

void scenario_autograd(int rank) {
  if (rank != 0) return;
  torch::manual_seed(5);
  at::Tensor x = torch::randn({2, 4}, torch::kDouble).requires_grad_(true);
  at::Tensor w = torch::randn({2, 3}, torch::kDouble).requires_grad_(true);
  // The same computation in this one process.
  at::Tensor p1 = param_values(1).requires_grad_(true), p2 = param_values(2).requires_grad_(true);
  at::Tensor xr = x.detach().clone().requires_grad_(true), wr = w.detach().clone().requires_grad_(true);
  auto forward_here = [&] { return (torch::matmul(torch::matmul(xr, p1), p2).tanh() * wr).sum(); };
  forward_here().backward();

  RRef r1 = remote("w1", "param_rref"), r2 = remote("w2", "param_rref");
  {
    dist_autograd::Context context;
    at::Tensor h1 = rpc_sync("w1", "lin", {x}).toTensor();
    check(h1.requires_grad(), "a result computed from a tensor that requires grad requires grad");
    at::Tensor h2 = rpc_sync("w2", "lin", {h1}).toTensor();
    at::Tensor loss = (h2.tanh() * w).sum();
    dist_autograd::backward(context.id(), {loss});
    auto grads = dist_autograd::get_gradients(context.id());
    check(grads.size() == 2, "w0's context holds its two leaves' gradients (" + std::to_string(grads.size()) + ")");
    check(grads.contains(x) && near(grads.at(x), xr.grad()), "w0's input gradient equals one process's");
    check(grads.contains(w) && near(grads.at(w), wr.grad()), "w0's weight gradient equals one process's");
    check(!x.grad().defined() && !w.grad().defined(), "distributed backward leaves .grad alone");
    IValue g1 = rpc_sync("w1", "param_grad", {IValue(context.id())});
    IValue g2 = rpc_sync("w2", "param_grad", {IValue(context.id())});
    check(g1.isTensor() && near(g1.toTensor(), p1.grad()), "w1's parameter gradient equals one process's");
    check(g2.isTensor() && near(g2.toTensor(), p2.grad()), "w2's parameter gradient equals one process's");
    check(!rpc_sync("w1", "param_dot_grad_defined").toBool(), "w1's .grad untouched");
    // One SGD step on the owners.
    DistributedOptimizer::Options half;
    half.lr = 0.5;
    DistributedOptimizer sgd(DistributedOptimizer::Kind::kSgd, {r1, r2}, half);
    sgd.step(context.id());
    torch::NoGradGuard no_grad;
    p1 -= 0.5 * p1.grad();
    p2 -= 0.5 * p2.grad();
  }
  check(near(rpc_sync("w1", "param_value").toTensor(), p1), "w1's parameter after a distributed SGD step");
  check(near(rpc_sync("w2", "param_value").toTensor(), p2), "w2's parameter after a distributed SGD step");
  // Two Adam steps against a local Adam on the same values.
  DistributedOptimizer::Options tenth;
  tenth.lr = 0.1;
  DistributedOptimizer adam(DistributedOptimizer::Kind::kAdam, {r1, r2}, tenth);
  for (auto* g : {&p1, &p2, &xr, &wr}) g->mutable_grad() = at::Tensor();
  torch::optim::Adam local({p1, p2}, torch::optim::AdamOptions(0.1));
  for (int step = 0; step < 2; ++step) {
    dist_autograd::Context context;
    at::Tensor loss = (rpc_sync("w2", "lin", {rpc_sync("w1", "lin", {x})}).toTensor().tanh() * w).sum();
    dist_autograd::backward(context.id(), {loss});
    adam.step(context.id());
    local.zero_grad();
    forward_here().backward();
    local.step();
  }
  check(near(rpc_sync("w1", "param_value").toTensor(), p1), "w1's parameter after two distributed Adam steps");
  check(near(rpc_sync("w2", "param_value").toTensor(), p2), "w2's parameter after two distributed Adam steps");
  std::string e = raises<InvalidArgument>([] { dist_autograd::get_gradients(12345); });
  check(has(e, "no context 12345 on this worker"), "an unknown context: " + e);
  {
    // An async function's result, made on another thread, is part of the graph.
    dist_autograd::Context context;
    at::Tensor h = rpc_sync("w1", "lin_later", {x}).toTensor();
    dist_autograd::backward(context.id(), {h.sum()});
    at::Tensor p1_now = rpc_sync("w1", "param_value").toTensor().requires_grad_(true);
    at::Tensor xr2 = x.detach().clone().requires_grad_(true);
    torch::matmul(xr2, p1_now).sum().backward();
    IValue g1 = rpc_sync("w1", "param_grad", {IValue(context.id())});
    check(g1.isTensor() && near(g1.toTensor(), p1_now.grad()), "an async function's parameter gradient");
    check(near(dist_autograd::get_gradients(context.id()).at(x), xr2.grad()), "the input gradient through it");
  }
}

IValue sample_values() {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("weight", torch::arange(6, torch::kFloat).reshape({2, 3}));
  dict.insert("bias", torch::zeros({3}, torch::kDouble));
  c10::impl::GenericList mixed(c10::AnyType::get());
  mixed.push_back(IValue(int64_t{1}));
  mixed.push_back(IValue("two"));
  mixed.push_back(IValue(torch::tensor({3.5})));
  return c10::ivalue::Tuple::create(
      {IValue(int64_t{-7}), IValue(2.5), IValue(true), IValue("a string"), IValue(),
       IValue(torch::randn({4, 5})), IValue(torch::arange(10, torch::kLong)), IValue(torch::tensor(true)),
       IValue(torch::tensor(3.0)), IValue(torch::empty({0, 3})),
       IValue(torch::arange(12, torch::kFloat).reshape({3, 4}).t()),  // not contiguous
       IValue(std::vector<int64_t>{1, 2, 3}), IValue(std::vector<at::Tensor>{torch::ones({2}), torch::zeros({1})}),
       IValue(dict), IValue(mixed), IValue(c10::ivalue::Tuple::create({IValue(int64_t{1}), IValue("nested")}))});
}

void scenario_calls(int rank) {
  if (rank != 0) return;
  // Every IValue kind, there and back.
  IValue values = sample_values();
  IValue back = rpc_sync("w1", "echo", fields_of(values).vec());
  check(same(values, back), "echo of every IValue kind came back different: " + c10::str(back));
  // To this worker itself.
  check(rpc_sync("w0", "whoami").toStringRef() == "w0", "a call to this worker itself");
  check(rpc_sync(get_worker_info("w2"), "whoami").toStringRef() == "w2", "a call by WorkerInfo");
  check(rpc_sync(1, "whoami").toStringRef() == "w1", "a call by rank");
  // A 16 MiB tensor.
  at::Tensor big = torch::randn({4 << 20});
  IValue big_back = rpc_sync("w2", "add", {big, big});
  check(at::equal(big_back.toTensor(), big + big), "a 16 MiB tensor added on w2");
  // Remote errors name the function, the worker and the message.
  std::string e = raises<RemoteError>([] { rpc_sync("w1", "raise"); });
  check(has(e, "'raise' on worker 'w1' (rank 1) raised: boom: a value out of range"), "remote error: " + e);
  e = raises<RemoteError>([] {
    auto f = rpc_async("w2", "async_raise");
    f->waitAndThrow();
  });
  check(has(e, "'async_raise' on worker 'w2' (rank 2) raised: async boom"), "async remote error: " + e);
  e = raises<InvalidArgument>([] { rpc_sync("w1", "no_such_function"); });
  check(has(e, "no function 'no_such_function' is registered on worker 'w1' (rank 1)"), "unknown function: " + e);
  e = raises<InvalidArgument>([] { rpc_sync("w9", "echo"); });
  check(has(e, "no worker is named 'w9' (the workers are 'w0', 'w1', 'w2')"), "unknown worker: " + e);
  e = raises<InvalidArgument>([] { rpc_sync(7, "echo"); });
  check(has(e, "no worker of rank 7 (there are 3)"), "unknown rank: " + e);
  // A call past its timeout; the worker goes on answering others.
  e = raises<TimeoutError>([] { rpc_sync("w1", "slow", {IValue(int64_t{1500})}, std::chrono::milliseconds(200)); });
  check(has(e, "rpc_sync of 'slow' on worker 'w1' (rank 1) timed out after 200 ms"), "timeout: " + e);
  check(rpc_sync("w1", "whoami").toStringRef() == "w1", "a call after a timeout");
  // Many rpc_async at once, and then().
  std::vector<FuturePtr> futures;
  for (int i = 0; i < 200; ++i) {
    futures.push_back(rpc_async(1 + i % 2, "add", {torch::full({3}, i), torch::ones({3})}));
  }
  for (int i = 0; i < 200; ++i) {
    futures[i]->wait();
    check(!futures[i]->hasError() && at::equal(futures[i]->value().toTensor(), torch::full({3}, i + 1.0)),
          "rpc_async #" + std::to_string(i));
  }
  auto chained = rpc_async("w2", "add", {torch::ones({2}), torch::ones({2})})
                     ->then([](c10::ivalue::Future& f) { return IValue(f.value().toTensor() * 5); },
                            c10::AnyType::get());
  chained->wait();
  check(at::equal(chained->value().toTensor(), torch::full({2}, 10.0)), "then() on an rpc_async future");
  // Async functions hold no worker thread (w1 runs one): the gated calls
  // are answered only by "release", which needs that thread.
  std::vector<FuturePtr> gates;
  for (int64_t i = 1; i <= 3; ++i) gates.push_back(rpc_async("w1", "gated", {IValue(i)}));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let them reach w1 first
  check(rpc_sync("w1", "release").toInt() == 3, "release found the three gated calls");
  for (int64_t i = 1; i <= 3; ++i) {
    auto& f = gates[static_cast<size_t>(i - 1)];
    f->wait();
    check(f->value().toInt() == i * 10, "gated call " + std::to_string(i));
  }
  // A call that makes another call.
  IValue nested = rpc_sync("w1", "nested_add", {IValue("w2"), torch::ones({2}), torch::ones({2})});
  check(at::equal(nested.toTensor(), torch::full({2}, 2.0)), "w1 calling w2 inside a call");
  // A tensor on another device, or sparse, cannot travel: said at once.
  e = raises<InvalidArgument>([] { rpc_sync("w1", "echo", {torch::eye(3).to_sparse()}); });
  check(has(e, "rpc carries dense tensors only"), "a sparse tensor: " + e);
}

std::vector<int64_t> counts_of(const std::string& worker) {
  auto t = rpc_sync(worker, "counts");
  std::vector<int64_t> out;
  for (const IValue& v : fields_of(t)) out.push_back(v.toInt());
  return out;
}

// wait_owned waits until `worker` owns no value and knows no user.
bool wait_owned_none(const std::string& worker) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    auto c = counts_of(worker);
    if (c[0] == 0 && c[1] == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void scenario_rrefs(int rank) {
  if (rank != 0) return;
  {
    RRef r = remote("w1", "ones", {IValue(int64_t{4})});
    check(!r.is_owner() && r.owner().name == "w1" && r.owner().id == 1, "a user RRef names its owner");
    check(at::equal(r.to_here().toTensor(), torch::ones({4})), "to_here of a remote value");
    check(r.confirmed_by_owner(), "confirmed once the owner answered");
    std::string e = raises<InvalidArgument>([&] { r.local_value(); });
    check(has(e, "local_value() of an RRef owned by worker 'w1'"), "local_value on a user: " + e);
    // Passed to its owner: the owner gets its value itself.
    check(rpc_sync("w1", "rref_is_owner", {r}).toBool(), "the owner receives its own RRef");
    check(rpc_sync("w1", "rref_sum", {r}).toTensor().item<float>() == 4, "the owner sums its own value");
    // Passed to a third worker: a new user there, recorded by the owner.
    check(rpc_sync("w2", "rref_sum", {r}).toTensor().item<float>() == 4, "w2 fetches w1's value");
    check(rpc_sync("w2", "rref_owner", {r}).toStringRef() == "w1", "w2's RRef names w1");
    auto c = counts_of("w1");
    check(c[0] == 1, "w1 owns the value while w0 holds its RRef (owned " + std::to_string(c[0]) + ")");
  }
  check(wait_owned_none("w1"), "w1 deleted the value once every user was gone: " + c10::str(counts_of("w1")));
  {
    // An RRef made on w1, owned by w2, returned to w0.
    RRef r = RRef::from(rpc_sync("w1", "make_rref", {IValue("w2"), IValue(int64_t{3})}));
    check(r.owner().name == "w2", "a returned RRef names its owner");
    check(at::equal(r.to_here().toTensor(), torch::ones({3})), "to_here of a returned RRef");
    // Owned here.
    RRef mine = remote("w0", "ones", {IValue(int64_t{2})});
    check(mine.is_owner() && at::equal(mine.local_value().toTensor(), torch::ones({2})), "remote to this worker");
    check(rpc_sync("w2", "rref_sum", {mine}).toTensor().item<float>() == 2, "w2 fetches w0's value");
    check(rpc_sync("w0", "rref_is_owner", {mine}).toBool(), "an owned RRef sent to this worker itself");
    // Made of a local value (torch's RRef(value)).
    RRef here = RRef::local(IValue(torch::full({3}, 2.0)));
    check(here.is_owner() && here.owner().name == "w0", "RRef::local is owned here");
    check(rpc_sync("w1", "rref_sum", {here}).toTensor().item<float>() == 6, "w1 fetches a local RRef's value");
    // A remote that raises: to_here raises it.
    RRef bad = remote("w2", "raise");
    std::string e = raises<RemoteError>([&] { bad.to_here(); });
    check(has(e, "'raise' on worker 'w2' (rank 2) raised: boom"), "to_here of a failed remote: " + e);
  }
  check(wait_owned_none("w2"), "w2 deleted its values: " + c10::str(counts_of("w2")));
  check(wait_owned_none("w0"), "w0 deleted its value: " + c10::str(counts_of("w0")));
  RRefCounts mine = rref_counts();
  check(mine.live_users == 0 && mine.pending_children == 0, "w0 holds no user and no pending child");
}

void scenario_kill(int rank) {
  if (rank == 0) {
    FuturePtr hang = rpc_async("w1", "slow", {IValue(int64_t{30000})}, std::chrono::milliseconds(60000));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto killed = std::chrono::steady_clock::now();
    rpc_async("w1", "die");
    hang->wait();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    std::string e = raises<NetworkError>([&] { hang->value(); });
    check(has(e, "rpc_async of 'slow' on worker 'w1' (rank 1) failed: worker 'w1' (rank 1) is gone"),
          "the pending call names the dead worker: " + e);
    std::printf("rank 0: the pending call failed %.3f s after w1 was killed\n", seconds);
    e = raises<NetworkError>([] { rpc_sync("w1", "whoami"); });
    check(has(e, "worker 'w1' (rank 1) is gone"), "a new call to the dead worker: " + e);
    check(rpc_sync("w2", "whoami").toStringRef() == "w2", "w0 and w2 go on");
    rpc_sync("w2", "leave");
    return;
  }
  // w1 waits to be killed; w2 until w0 lets it go (not on w1).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!told_to_leave.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check(rank == 2 && told_to_leave.load(), "still here: w1 should have been killed, w2 let go");
}

void scenario_shutdown(int rank) {
  if (rank != 0) return;
  std::vector<FuturePtr> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(rpc_async("w1", "slow", {IValue(int64_t{20})}));
  shutdown(true);  // waits for every call above
  for (auto& f : futures) check(f->completed() && !f->hasError(), "a call in flight completed before shutdown");
  std::string e = raises<InvalidArgument>([] { rpc_sync("w1", "whoami"); });
  check(has(e, "not initialized"), "a call after shutdown: " + e);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int rank = std::atoi(std::getenv("RANK"));
  cohort::testing::worker_checks().rank = rank;
  register_functions();
  register_autograd_functions();
  RpcBackendOptions options;
  // In "calls", w1 runs one thread: async functions must not hold it.
  options.num_worker_threads = rank == 1 && scenario == "calls" ? 1 : 4;
  try {
    init_rpc("w" + std::to_string(rank), -1, -1, options);
    if (scenario == "calls") {
      scenario_calls(rank);
    } else if (scenario == "rrefs") {
      scenario_rrefs(rank);
    } else if (scenario == "kill") {
      scenario_kill(rank);
      shutdown(false);  // a graceful one would wait for w1 forever
    } else if (scenario == "shutdown") {
      scenario_shutdown(rank);
    } else if (scenario == "autograd") {
      scenario_autograd(rank);
    } else {
      std::printf("unknown scenario '%s'\n", scenario.c_str());
      return 2;
    }
    if (scenario != "kill" && is_initialized()) shutdown(true);
  } catch (const std::exception& e) {
    check(false, std::string("raised: ") + e.what());
  }
  if (cohort::testing::worker_checks().failures) return 1;
  std::printf("rank %d ok: %s\n", rank, scenario.c_str());
  return 0;
}
