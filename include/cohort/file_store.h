// file_store.h: a Store that processes on one host share through a file.
//
// FileStore keeps an append-only log of records in one file. Each operation
// takes an fcntl lock on the file (open-file-description locks, so that two
// FileStores in one process do not release each other's lock), reads what
// other processes appended since, and appends its own change. A record left
// half-written by a crashed process is cut off by the next writer. A log
// grown long and mostly dead (COHORT_FILESTORE_COMPACT_BYTES) is rewritten
// to a new file renamed over the old one; every user follows it. The file
// is removed when the last FileStore using it is destroyed (torch's rule:
// when `num_workers` have left, or, with num_workers < 1, when as many have
// left as ever joined).
#pragma once

#include <memory>

#include "cohort/store.h"

namespace cohort {

// FileStore is a Store backed by the file at `path`, created if absent.
class FileStore : public Store {
 public:
  // Throws StoreError naming the path when the file cannot be opened.
  explicit FileStore(std::string path, int num_workers = -1);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;

  // path returns the file's path.
  const std::string& path() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cohort
