#include "tcp_store.h"

#include <c10/util/Exception.h>

#include "cohort/errors.h"

namespace cohort_torch {

namespace {

// call runs a cohort store call; its errors become torch's DistStoreError
// (what torch's own stores throw), keeping cohort's message.
template <class Op>
auto call(Op&& op) -> decltype(op()) {
  try {
    return op();
  } catch (const cohort::Error& e) {
    C10_THROW_ERROR(DistStoreError, e.what());
  }
}

}  // namespace

TorchTcpStore::TorchTcpStore(std::string host, const cohort::TcpStoreOptions& options)
    : c10d::Store(options.timeout), host_(std::move(host)), options_(options) {
  store_ = call([&] { return std::make_shared<cohort::TcpStore>(host_, options_); });
}

c10::intrusive_ptr<c10d::Store> TorchTcpStore::clone() {
  // A new client of the same server (torch clones a store per thread that
  // must not share a connection).
  cohort::TcpStoreOptions client = options_;
  client.is_server = false;
  client.port = store_->port();
  client.wait_for_workers = false;
  client.timeout = timeout_;
  return c10::make_intrusive<TorchTcpStore>(host_, client);
}

void TorchTcpStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  call([&] { store_->set(key, value); });
}

std::vector<uint8_t> TorchTcpStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                               const std::vector<uint8_t>& desired) {
  return call([&] { return store_->compare_set(key, expected, desired); });
}

std::vector<uint8_t> TorchTcpStore::get(const std::string& key) {
  return call([&] { return store_->get(key); });
}

int64_t TorchTcpStore::add(const std::string& key, int64_t value) {
  return call([&] { return store_->add(key, value); });
}

bool TorchTcpStore::deleteKey(const std::string& key) {
  return call([&] { return store_->delete_key(key); });
}

bool TorchTcpStore::check(const std::vector<std::string>& keys) {
  return call([&] { return store_->check(keys); });
}

int64_t TorchTcpStore::getNumKeys() {
  return call([&] { return store_->num_keys(); });
}

void TorchTcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void TorchTcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  call([&] { store_->wait(keys, timeout); });
}

void TorchTcpStore::setTimeout(const std::chrono::milliseconds& timeout) {
  c10d::Store::setTimeout(timeout);
  store_->set_timeout(timeout);
}

void TorchTcpStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  call([&] { store_->append(key, value); });
}

std::vector<std::vector<uint8_t>> TorchTcpStore::multiGet(const std::vector<std::string>& keys) {
  return call([&] { return store_->multi_get(keys); });
}

void TorchTcpStore::multiSet(const std::vector<std::string>& keys,
                             const std::vector<std::vector<uint8_t>>& values) {
  call([&] { store_->multi_set(keys, values); });
}

}  // namespace cohort_torch
