// The program side of the launcher's error reporting (cohort/elastic.h).
#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <typeinfo>

#include "cohort/elastic.h"
#include "launcher/json_text.h"
#include "launcher/stack_trace.h"

namespace cohort {
namespace {

const char* error_file_path() {
  const char* p = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!p || !*p) p = std::getenv("COHORT_ERROR_FILE");
  return p && *p ? p : nullptr;
}

// describe_current_exception names the exception in flight as torch does
// for Python ("RuntimeError: boom"): its demangled type, then what().
std::string describe_current_exception() {
  std::type_info* type = abi::__cxa_current_exception_type();
  std::string name = type ? demangle(type->name()) : "unknown exception";
  try {
    std::rethrow_exception(std::current_exception());
  } catch (const std::exception& e) {
    return name + ": " + e.what();
  } catch (...) {
    return name;
  }
}

[[noreturn]] void on_terminate() {
  std::string message =
      std::current_exception() ? describe_current_exception() : "std::terminate called without an exception";
  // Skip on_terminate and the runtime's terminate frames; the thrower's
  // frames follow.
  std::string stack = stack_trace(2);
  std::fflush(stdout);
  std::fprintf(stderr, "%s\nstack of the throw:\n%s", message.c_str(), stack.c_str());
  std::fflush(stderr);
  write_error_file(message, stack);
  // _exit: static destructors may not run safely from a terminate handler.
  _exit(1);
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) return std::atoi(v);
  }
  return fallback;
}

}  // namespace

bool write_error_file(const std::string& message, const std::string& stack) {
  const char* path = error_file_path();
  if (!path) return false;
  std::string doc = "{\"message\": {\"message\": " + json_quote(message) +
                    ", \"extraInfo\": {\"py_callstack\": " + json_quote(stack) +
                    ", \"timestamp\": " + json_quote(std::to_string(std::time(nullptr))) + "}}}\n";
  std::string tmp = std::string(path) + ".tmp" + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < doc.size()) {
    ssize_t n = ::write(fd, doc.data() + done, doc.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done == doc.size() && std::rename(tmp.c_str(), path) == 0;
}

void install_error_handler() {
  std::set_terminate(on_terminate);
}

int record_errors(const std::function<int()>& main_fn) {
  install_error_handler();
  // No try/catch here on purpose: an exception nobody catches reaches
  // std::terminate before the stack unwinds, so the handler sees the frames
  // of the throw.
  return main_fn();
}

int local_rank() {
  return env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
}

int local_world_size() {
  return env_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}, 1);
}

}  // namespace cohort
