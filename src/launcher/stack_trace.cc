#include "launcher/stack_trace.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cstdlib>
#include <memory>

namespace cohort {

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(mangled);
}

namespace {

// readable_frame turns glibc's "binary(mangled+0x1f) [0xaddr]" into
// "binary: demangled+0x1f [0xaddr]".
std::string readable_frame(const std::string& symbol) {
  auto open = symbol.find('(');
  auto plus = symbol.find('+', open == std::string::npos ? 0 : open);
  auto close = symbol.find(')', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos || plus == std::string::npos || plus > close ||
      plus == open + 1) {
    return symbol;
  }
  std::string name = symbol.substr(open + 1, plus - open - 1);
  return symbol.substr(0, open) + ": " + demangle(name.c_str()) + symbol.substr(plus, close - plus) +
         symbol.substr(close + 1);
}

}  // namespace

std::string stack_trace(int skip) {
  void* frames[64];
  int n = backtrace(frames, 64);
  std::unique_ptr<char*, void (*)(void*)> symbols(backtrace_symbols(frames, n), std::free);
  std::string out;
  for (int i = skip + 1; i < n; ++i) {  // +1: this function
    out += "  #" + std::to_string(i - skip - 1) + " ";
    out += symbols ? readable_frame(symbols.get()[i]) : std::string("?");
    out += '\n';
  }
  return out;
}

}  // namespace cohort
