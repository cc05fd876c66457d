// prefix_store.h: a namespace inside another Store.
//
// PrefixStore turns every key into "<prefix>/<key>" before handing it to the
// store it wraps, so that sub-groups and libraries can share one store
// without colliding. Its timeout is the wrapped store's (as torch's).
#pragma once

#include <memory>

#include "cohort/store.h"

namespace cohort {

// PrefixStore forwards to `store` with every key prefixed by "<prefix>/".
class PrefixStore : public Store {
 public:
  // Throws InvalidArgument when `store` is null.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  // num_keys counts the wrapped store's keys, all prefixes together (torch).
  int64_t num_keys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;

  std::shared_ptr<Store> root() override;

  // underlying returns the wrapped store.
  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  std::string prefixed(const std::string& key) const;
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace cohort
