// op_description.h: the text that names an operation in errors and logs,
// "all_reduce #5 of group g", rebuilt for every blocking collective.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cohort {

// describe_into writes "<op> #<sequence> of group <group>" into `out`;
// `*held` and `*held_op` say what `out` holds (its number, 0 for none yet,
// and where its op's name was read) and are updated. When `out` already
// names `op` with the number before `sequence`, only the digits are
// counted up in place (a few instructions, no allocation); an op read from
// the same address as last time needs no comparison of its text.
void describe_into(std::string* out, uint64_t* held, const char** held_op, std::string_view op,
                   uint64_t sequence, const std::string& group);

// describe names an operation given its whole description ("send to 3 tag
// 0"): "<op> #<sequence> of group <group>" for a collective, "<op> (p2p
// #<sequence>) of group <group>" for a point-to-point call, which are
// numbered apart.
std::string describe(std::string_view op, uint64_t sequence, bool collective, const std::string& group);

}  // namespace cohort
