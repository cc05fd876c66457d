#include "store_adapter.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "cohort/errors.h"

namespace cohort_torch {

namespace {

// forward runs `op` on torch's store and turns torch's errors into
// cohort's, naming the operation and the key. torch has no exception
// class of its own for a store's timeout (DistStoreError covers every
// store failure), so its message tells.
template <class Op>
auto forward(const char* what, const std::string& key, Op&& op) -> decltype(op()) {
  try {
    return op();
  } catch (const c10::Error& e) {
    const std::string text = e.what_without_backtrace();
    const std::string message = std::string("torch store ") + what + "(" + key + "): " + text;
    if (text.find("imeout") != std::string::npos || text.find("imed out") != std::string::npos) {
      throw cohort::TimeoutError(message);
    }
    throw cohort::StoreError(message);
  }
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& k : keys) text += (text.empty() ? "" : ", ") + k;
  return text;
}

}  // namespace

StoreAdapter::StoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {
  if (!store_) throw cohort::InvalidArgument("cohort_torch: the store torch handed the backend is null");
}

void StoreAdapter::set(const std::string& key, const cohort::Bytes& value) {
  forward("set", key, [&] { store_->set(key, value); });
}

cohort::Bytes StoreAdapter::get(const std::string& key) {
  return forward("get", key, [&] { return store_->get(key); });
}

int64_t StoreAdapter::add(const std::string& key, int64_t amount) {
  return forward("add", key, [&] { return store_->add(key, amount); });
}

cohort::Bytes StoreAdapter::compare_set(const std::string& key, const cohort::Bytes& expected,
                                        const cohort::Bytes& desired) {
  return forward("compare_set", key, [&] { return store_->compareSet(key, expected, desired); });
}

bool StoreAdapter::check(const std::vector<std::string>& keys) {
  return forward("check", key_list(keys), [&] { return store_->check(keys); });
}

void StoreAdapter::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  forward("wait", key_list(keys), [&] { store_->wait(keys, timeout); });
}

bool StoreAdapter::delete_key(const std::string& key) {
  return forward("delete_key", key, [&] { return store_->deleteKey(key); });
}

int64_t StoreAdapter::num_keys() {
  return forward("num_keys", "", [&] { return store_->getNumKeys(); });
}

void StoreAdapter::append(const std::string& key, const cohort::Bytes& value) {
  forward("append", key, [&] { store_->append(key, value); });
}

std::vector<cohort::Bytes> StoreAdapter::multi_get(const std::vector<std::string>& keys) {
  return forward("multi_get", key_list(keys), [&] { return store_->multiGet(keys); });
}

void StoreAdapter::multi_set(const std::vector<std::string>& keys, const std::vector<cohort::Bytes>& values) {
  forward("multi_set", key_list(keys), [&] { store_->multiSet(keys, values); });
}

std::chrono::milliseconds StoreAdapter::timeout() const {
  return store_->getTimeout();
}

void StoreAdapter::set_timeout(std::chrono::milliseconds timeout) {
  store_->setTimeout(timeout);
}

std::shared_ptr<cohort::Store> StoreAdapter::root() {
  auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store_.get());
  if (!prefixed) return nullptr;
  return std::make_shared<StoreAdapter>(prefixed->getUnderlyingNonPrefixStore());
}

std::string master_host_of(const c10::intrusive_ptr<c10d::Store>& store) {
  c10::intrusive_ptr<c10d::Store> s = store;
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(s.get())) s = prefix->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(s.get())) return tcp->getHost();
  return "";
}

}  // namespace cohort_torch
