#include "store/store_harness.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "cohort/file_store.h"
#include "cohort/hash_store.h"
#include "cohort/prefix_store.h"
#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"

namespace cohort::testing {
namespace {

class HashHarness : public StoreHarness {
 public:
  std::shared_ptr<Store> client() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = std::make_shared<HashStore>();
};

class FileHarness : public StoreHarness {
 public:
  FileHarness() : path_(temp_path("filestore")) {}
  ~FileHarness() override { std::filesystem::remove(path_); }
  std::shared_ptr<Store> client() override { return std::make_shared<FileStore>(path_); }

 private:
  std::string path_;
};

class PrefixHarness : public StoreHarness {
 public:
  std::shared_ptr<Store> client() override { return std::make_shared<PrefixStore>("group7", base_); }

 private:
  std::shared_ptr<Store> base_ = std::make_shared<HashStore>();
};

class TcpHarness : public StoreHarness {
 public:
  explicit TcpHarness(std::string token) : token_(std::move(token)) {
    TcpStoreServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.token = token_;
    server_ = std::make_unique<TcpStoreServer>(so);
  }
  std::shared_ptr<Store> client() override {
    TcpStoreOptions o;
    o.port = server_->port();
    o.token = token_;
    o.timeout = std::chrono::seconds(30);
    return std::make_shared<TcpStore>("127.0.0.1", o);
  }

 private:
  std::string token_;
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace

std::vector<StoreKind> all_store_kinds() {
  return {
      {"HashStore", [] { return std::make_unique<HashHarness>(); }},
      {"FileStore", [] { return std::make_unique<FileHarness>(); }},
      {"PrefixStore", [] { return std::make_unique<PrefixHarness>(); }},
      {"TcpStore", [] { return std::make_unique<TcpHarness>(""); }},
      {"TcpStoreWithToken", [] { return std::make_unique<TcpHarness>("s3cret-token"); }},
  };
}

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/cohort-test-" + std::to_string(getpid()) + "-" + stem + "-" +
         std::to_string(counter++);
}

}  // namespace cohort::testing
