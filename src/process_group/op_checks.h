// op_checks.h: the argument checks every ProcessGroup operation runs on
// the caller's thread before anything is queued or sent
// (process_group_ops.cc for the collectives, process_group_p2p.cc for
// point-to-point). Each throws InvalidArgument naming the operation, the
// argument and what was wrong; on the hot path the checks pass and no
// string is built.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cohort/errors.h"
#include "cohort/types.h"
#include "process_group/backend.h"
#include "reduce/reduce.h"

namespace cohort::op_checks {

[[noreturn]] inline void bad(std::string_view op, const std::string& why) {
  throw InvalidArgument(std::string(op) + ": " + why);
}

inline const char* device_name(DeviceType type) {
  return type == DeviceType::kCUDA ? "a CUDA device" : "the CPU";
}

// item_name is "outputs[3]" for (list "outputs", index 3), or the name
// alone for index -1. Built only for an error message: on the hot path the
// checks pass and no string is made.
inline std::string item_name(std::string_view list, int index) {
  std::string name(list);
  if (index >= 0) name += "[" + std::to_string(index) + "]";
  return name;
}

inline void check_buffer(std::string_view op, const Buffer& b, std::string_view name, const Backend& backend,
                  int index = -1) {
  if (b.data == nullptr && b.count > 0) {
    bad(op, item_name(name, index) + " is a null pointer with " + std::to_string(b.count) + " elements");
  }
  if (!backend.supports_device(b.device.type)) {
    bad(op, item_name(name, index) + " is on " + device_name(b.device.type) + " but backend " +
                backend.name() +
                " has no backend for it (per device, e.g. backend \"cpu:cohort,cuda:nccl\")");
  }
}

inline void check_dtype(std::string_view op, const Buffer& expected, const Buffer& b, std::string_view name,
                 int index = -1) {
  if (expected.dtype != b.dtype) {
    bad(op, item_name(name, index) + " is " + dtype_name(b.dtype) + " but the input is " +
                dtype_name(expected.dtype));
  }
  if (expected.device.type != b.device.type) {
    bad(op, item_name(name, index) + " is on " + device_name(b.device.type) + " but the input is on " +
                device_name(expected.device.type));
  }
}

inline void check_list(std::string_view op, const std::vector<Buffer>& list, std::string_view name, int expected,
                const Backend& backend) {
  if (static_cast<int>(list.size()) != expected) {
    bad(op, std::string(name) + " has " + std::to_string(list.size()) + " buffers; the group has " +
                std::to_string(expected) + " ranks");
  }
  for (size_t i = 0; i < list.size(); ++i) check_buffer(op, list[i], name, backend, static_cast<int>(i));
}

inline void check_reduce(std::string_view op, const Buffer& b, ReduceOp reduce_op) {
  Status st = check_reduce_op(b.dtype, reduce_op);
  if (!st.ok()) bad(op, st.message());
}

}  // namespace cohort::op_checks
