// op_description.h: the text that names an operation in errors and logs,
// "all_reduce #5 of group g", rebuilt for every blocking collective.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cohort {

// describe_into writes "<op> #<sequence> of group <group>" into `out`.
// `*described` is the number `out` holds (0: none yet); it is updated. When
// `out` already names `op` with the number before `sequence`, only the
// digits are counted up in place (a few instructions, no allocation).
void describe_into(std::string* out, uint64_t* described, std::string_view op, uint64_t sequence,
                   const std::string& group);

}  // namespace cohort
