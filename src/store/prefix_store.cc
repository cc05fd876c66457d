#include "cohort/prefix_store.h"

#include "cohort/errors.h"

namespace cohort {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  if (!store_) throw InvalidArgument("PrefixStore(\"" + prefix_ + "\"): the wrapped store is null");
}

std::string PrefixStore::prefixed(const std::string& key) const {
  return prefix_ + "/" + key;
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  store_->set(prefixed(key), value);
}
Bytes PrefixStore::get(const std::string& key) {
  return store_->get(prefixed(key));
}
int64_t PrefixStore::add(const std::string& key, int64_t amount) {
  return store_->add(prefixed(key), amount);
}
Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return store_->compare_set(prefixed(key), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  return store_->check(prefixed(keys));
}
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}
bool PrefixStore::delete_key(const std::string& key) {
  return store_->delete_key(prefixed(key));
}
int64_t PrefixStore::num_keys() {
  return store_->num_keys();
}
void PrefixStore::append(const std::string& key, const Bytes& value) {
  store_->append(prefixed(key), value);
}
std::vector<Bytes> PrefixStore::multi_get(const std::vector<std::string>& keys) {
  return store_->multi_get(prefixed(keys));
}
void PrefixStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  store_->multi_set(prefixed(keys), values);
}
std::chrono::milliseconds PrefixStore::timeout() const {
  return store_->timeout();
}
void PrefixStore::set_timeout(std::chrono::milliseconds timeout) {
  store_->set_timeout(timeout);
}

std::shared_ptr<Store> PrefixStore::root() {
  std::shared_ptr<Store> below = store_->root();
  return below ? below : store_;
}

}  // namespace cohort
