#include "launcher/output_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cohort/errors.h"

namespace cohort::launcher {
namespace {

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a closed console must not stop the launcher
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

OutputSink::OutputSink(std::string prefix, int console_fd, const std::string& file_path)
    : prefix_(std::move(prefix)), console_fd_(console_fd) {
  if (!file_path.empty()) {
    file_fd_ = ::open(file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file_fd_ < 0) throw Error("cannot create log file " + file_path + ": " + std::strerror(errno));
  }
}

OutputSink::~OutputSink() {
  finish();
  if (file_fd_ >= 0) ::close(file_fd_);
}

void OutputSink::feed(const char* data, size_t n) {
  if (file_fd_ >= 0) write_all(file_fd_, data, n);
  if (console_fd_ < 0) return;
  partial_.append(data, n);
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    write_console(partial_.substr(start, nl + 1 - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
}

void OutputSink::finish() {
  if (console_fd_ >= 0 && !partial_.empty()) write_console(partial_ + "\n");
  partial_.clear();
}

void OutputSink::write_console(const std::string& line) {
  // One write per line, so that lines of different workers never mix.
  std::string out = prefix_ + line;
  write_all(console_fd_, out.data(), out.size());
}

}  // namespace cohort::launcher
