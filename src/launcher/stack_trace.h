// stack_trace.h: the current thread's call stack as text, one frame per
// line with demangled C++ names, for error files.
#pragma once

#include <string>

namespace cohort {

// stack_trace returns up to 64 frames, skipping the innermost `skip` (this
// function's callers that a reader does not care about). Names of functions
// in executables need -rdynamic (CMake's ENABLE_EXPORTS) to appear.
std::string stack_trace(int skip = 0);

// demangle returns the readable form of a mangled C++ name, or the name.
std::string demangle(const char* mangled);

}  // namespace cohort
