// FileStore: an append-only log of records in one shared file.
//
// Record: u8 kind (1 set, 2 delete), key (u32 length + bytes), value (u32
// length + bytes; empty for delete). Every operation locks the file, first
// applies the records other processes appended since it last looked, then
// appends its own. Waiting polls the file with a growing pause (1 to 20 ms):
// there is no cheap cross-process notification on a plain file.
#include "cohort/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "cohort/errors.h"
#include "common/byte_codec.h"
#include "common/config_registry.h"
#include "common/deadline.h"
#include "common/logging.h"
#include "store/key_value_map.h"

namespace cohort {
namespace {

constexpr uint8_t kRecordSet = 1;
constexpr uint8_t kRecordDelete = 2;
constexpr size_t kUnbounded = ~size_t{0};
const char kJoinedKey[] = "cohort/filestore/joined";
const char kLeftKey[] = "cohort/filestore/left";

// FileLock holds an open-file-description lock on the whole file. OFD locks
// belong to the descriptor, so two FileStores in one process exclude each
// other and closing one does not drop the other's lock.
class FileLock {
 public:
  FileLock(int fd, bool exclusive, const std::string& path) : fd_(fd) {
    struct flock fl {};
    fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    while (fcntl(fd_, F_OFD_SETLKW, &fl) != 0) {
      if (errno != EINTR) throw StoreError("FileStore " + path + ": cannot lock: " + std::strerror(errno));
    }
  }
  ~FileLock() {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    fcntl(fd_, F_OFD_SETLK, &fl);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

struct FileStore::State {
  std::string path;
  int num_workers = -1;
  int fd = -1;
  std::atomic<int64_t> timeout_ms{kDefaultStoreTimeout.count()};

  std::mutex mu;    // guards everything below, and serialises this process's threads
  KeyValueMap map;  // the file's content as of `pos`
  off_t pos = 0;    // bytes of the file already applied to `map`

  [[noreturn]] void fail(const std::string& what) const {
    throw StoreError("FileStore " + path + ": " + what + ": " + std::strerror(errno));
  }

  // catch_up applies records appended since `pos`. Holding the exclusive
  // lock, a half-written record at the end can only be a crashed writer's,
  // so it is cut off; under a shared lock it is left for a writer to judge.
  void catch_up(bool exclusive) {
    struct stat st;
    if (fstat(fd, &st) != 0) fail("fstat");
    if (st.st_size < pos) {  // truncated behind our back: start over
      map.clear();
      pos = 0;
    }
    if (st.st_size == pos) return;
    std::vector<uint8_t> buf(static_cast<size_t>(st.st_size - pos));
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t r = pread(fd, buf.data() + got, buf.size() - got, pos + static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail("read");
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    ByteReader reader(buf.data(), got);
    size_t consumed = 0;
    for (;;) {
      uint8_t kind;
      std::string key;
      Bytes value;
      if (!reader.u8(&kind) || !reader.str(&key, kUnbounded) || !reader.bytes(&value, kUnbounded)) break;
      if (kind == kRecordSet) {
        map.set(key, std::move(value));
      } else if (kind == kRecordDelete) {
        map.erase(key);
      } else {
        break;  // garbage: treat like a torn tail
      }
      consumed = got - reader.remaining();
    }
    pos += static_cast<off_t>(consumed);
    if (exclusive && consumed < got) {
      COHORT_LOG(kWarning) << "FileStore " << path << ": cutting " << (got - consumed)
                           << " bytes of an incomplete record at offset " << pos
                           << " (a process died while writing it)";
      if (ftruncate(fd, pos) != 0) fail("ftruncate");
    }
  }

  // write_record appends one record; the exclusive lock is held and
  // catch_up ran, so the end of the file is `pos`.
  void write_record(uint8_t kind, const std::string& key, const Bytes& value) {
    std::vector<uint8_t> rec;
    rec.reserve(9 + key.size() + value.size());
    ByteWriter w(&rec);
    w.u8(kind);
    w.str(key);
    w.bytes(value);
    size_t done = 0;
    while (done < rec.size()) {
      ssize_t n = pwrite(fd, rec.data() + done, rec.size() - done, pos + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write");
      done += static_cast<size_t>(n);
    }
    pos += static_cast<off_t>(rec.size());
  }

  // locked runs `f` on an up-to-date map under the file lock. If a
  // compaction replaced the file since we opened it, it follows the path to
  // the new file first (and locks that one instead).
  template <class F>
  auto locked(bool exclusive, F f) {
    std::lock_guard<std::mutex> guard(mu);
    for (;;) {
      std::optional<FileLock> lock;
      lock.emplace(fd, exclusive, path);
      if (follow_replacement()) continue;
      catch_up(exclusive);
      auto result = f();
      const int compacted = exclusive ? maybe_compact() : -1;
      if (compacted >= 0) {
        // Switch to the compacted file once the old one is unlocked; anyone
        // who then locks the old one sees that the path moved on.
        lock.reset();
        ::close(fd);
        fd = compacted;
      }
      return result;
    }
  }

  template <class F>
  auto read_op(F f) {
    return locked(false, f);
  }

  template <class F>
  auto write_op(F f) {
    return locked(true, f);
  }

  // follow_replacement reopens `path` when it names another file than ours;
  // returns true when it did (the caller locks again).
  bool follow_replacement() {
    struct stat ours, named;
    if (fstat(fd, &ours) != 0 || ::stat(path.c_str(), &named) != 0) return false;  // removed: keep ours
    if (ours.st_ino == named.st_ino && ours.st_dev == named.st_dev) return false;
    int fresh = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fresh < 0) return false;
    ::close(fd);
    fd = fresh;
    map.clear();
    pos = 0;
    return true;
  }

  // maybe_compact rewrites the log with one record per live key, to a new
  // file renamed over the old, when the log has grown long and mostly dead
  // (every add appends a record). The exclusive lock on the old file is held
  // throughout, so nobody appends to it meanwhile; others notice the new
  // file at their next operation (follow_replacement).
  // Returns the descriptor of the new file, or -1 when it did not compact.
  int maybe_compact() {
    const int64_t threshold = config_int(knobs::kFileStoreCompactBytes);
    if (threshold <= 0 || pos < threshold) return -1;
    size_t live = 0;
    map.for_each([&](const std::string& k, const Bytes& v) { live += 9 + k.size() + v.size(); });
    if (static_cast<size_t>(pos) <= 4 * live) return -1;
    std::vector<uint8_t> log;
    log.reserve(live);
    ByteWriter w(&log);
    map.for_each([&](const std::string& k, const Bytes& v) {
      w.u8(kRecordSet);
      w.str(k);
      w.bytes(v);
    });
    const std::string tmp = path + ".compact." + std::to_string(getpid());
    int out = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return -1;  // not fatal: the log stays long
    size_t done = 0;
    while (done < log.size()) {
      ssize_t n = ::write(out, log.data() + done, log.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (done != log.size() || fdatasync(out) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
      ::close(out);
      ::unlink(tmp.c_str());
      return -1;
    }
    COHORT_LOG(kDebug) << "FileStore " << path << ": compacted " << pos << " bytes of log to " << log.size();
    pos = static_cast<off_t>(log.size());
    return out;
  }

  // set_locked records and applies a set; write_op must be active.
  void set_locked(const std::string& key, const Bytes& value) {
    write_record(kRecordSet, key, value);
    map.set(key, value);
  }

  int64_t add_locked(const std::string& key, int64_t amount) {
    int64_t next = std::move(map.add(key, amount)).value_or_throw();
    write_record(kRecordSet, key, *map.find(key));
    return next;
  }

  // wait_then polls until every key exists, then returns `f()` computed
  // under the same lock (so a key deleted meanwhile cannot slip between the
  // check and the read). Throws TimeoutError after `timeout`.
  template <class F>
  auto wait_then(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const char* op,
                 F f) {
    Deadline deadline = Deadline::after(timeout);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      std::optional<decltype(f())> result;
      std::vector<std::string> missing = read_op([&] {
        auto m = map.missing(keys);
        if (m.empty()) result = f();
        return m;
      });
      if (result) return std::move(*result);
      if (deadline.expired()) throw_status(wait_timeout("FileStore " + path, op, missing, timeout));
      std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }
};

FileStore::FileStore(std::string path, int num_workers) : state_(std::make_unique<State>()) {
  state_->path = std::move(path);
  state_->num_workers = num_workers;
  state_->fd = ::open(state_->path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (state_->fd < 0) state_->fail("cannot open");
  state_->write_op([&] { return state_->add_locked(kJoinedKey, 1); });
}

FileStore::~FileStore() {
  try {
    state_->write_op([&] {
      int64_t left = state_->add_locked(kLeftKey, 1);
      const Bytes* joined_text = state_->map.find(kJoinedKey);
      int64_t joined = joined_text ? std::atoll(to_string(*joined_text).c_str()) : 0;
      bool last = state_->num_workers > 0 ? left >= state_->num_workers : left >= joined;
      if (last) ::unlink(state_->path.c_str());
      return 0;
    });
  } catch (const std::exception& e) {
    COHORT_LOG(kWarning) << "FileStore " << state_->path << ": leaving failed: " << e.what();
  }
  ::close(state_->fd);
}

void FileStore::set(const std::string& key, const Bytes& value) {
  state_->write_op([&] {
    state_->set_locked(key, value);
    return 0;
  });
}

Bytes FileStore::get(const std::string& key) {
  return state_->wait_then({key}, timeout(), "get", [&] { return *state_->map.find(key); });
}

int64_t FileStore::add(const std::string& key, int64_t amount) {
  return state_->write_op([&] { return state_->add_locked(key, amount); });
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return state_->write_op([&] {
    const Bytes* before = state_->map.find(key);
    bool changes = (!before && expected.empty()) || (before && *before == expected);
    Bytes result = state_->map.compare_set(key, expected, desired);
    if (changes) state_->write_record(kRecordSet, key, desired);
    return result;
  });
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return state_->read_op([&] { return state_->map.missing(keys).empty(); });
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  state_->wait_then(keys, timeout, "wait", [] { return 0; });
}

bool FileStore::delete_key(const std::string& key) {
  return state_->write_op([&] {
    if (!state_->map.find(key)) return false;
    state_->write_record(kRecordDelete, key, {});
    return state_->map.erase(key);
  });
}

int64_t FileStore::num_keys() {
  return state_->read_op([&] { return state_->map.size(); });
}

void FileStore::append(const std::string& key, const Bytes& value) {
  state_->write_op([&] {
    state_->map.append(key, value);
    state_->write_record(kRecordSet, key, *state_->map.find(key));
    return 0;
  });
}

std::vector<Bytes> FileStore::multi_get(const std::vector<std::string>& keys) {
  return state_->wait_then(keys, timeout(), "multi_get", [&] {
    std::vector<Bytes> out;
    for (const auto& k : keys) out.push_back(*state_->map.find(k));
    return out;
  });
}

void FileStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  throw_if_error(check_multi_set_sizes(keys.size(), values.size()));
  state_->write_op([&] {
    for (size_t i = 0; i < keys.size(); ++i) state_->set_locked(keys[i], values[i]);
    return 0;
  });
}

std::chrono::milliseconds FileStore::timeout() const {
  return std::chrono::milliseconds(state_->timeout_ms.load());
}

void FileStore::set_timeout(std::chrono::milliseconds timeout) {
  state_->timeout_ms.store(timeout.count());
}

const std::string& FileStore::path() const {
  return state_->path;
}

}  // namespace cohort
