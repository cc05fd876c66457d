#include "process_group/op_description.h"

#include <charconv>
#include <cstring>

namespace cohort {

std::string describe(std::string_view op, uint64_t sequence, bool collective, const std::string& group) {
  std::string text;
  text.reserve(op.size() + group.size() + 40);
  text.append(op).append(collective ? " #" : " (p2p #").append(std::to_string(sequence));
  text.append(collective ? "" : ")").append(" of group ").append(group);
  return text;
}

// describe_into writes "all_reduce #5 of group g" into `out`, reusing its
// capacity (no allocation once it is large enough). It runs for every
// blocking collective, so the usual case is cheap: when `out` already
// describes the same op with the number before `sequence` (`*held`),
// only the digits are counted up in place; otherwise one resize and plain
// copies.
void describe_into(std::string* out, uint64_t* held, const char** held_op, std::string_view op,
                   uint64_t sequence, const std::string& group) {
  constexpr std::string_view kOfGroup = " of group ";
  // The same text at the same address is the same op (a literal); another
  // address may still hold the same text.
  const bool same_op = out->size() > op.size() + 2 && (*out)[op.size()] == ' ' &&
                       (op.data() == *held_op || std::string_view(*out).substr(0, op.size()) == op);
  if (sequence == *held + 1 && same_op) {
    const size_t first = op.size() + 2;  // after " #"
    size_t i = out->size() - kOfGroup.size() - group.size();
    while (i > first && (*out)[i - 1] == '9') (*out)[--i] = '0';
    if (i > first) {
      ++(*out)[i - 1];
      *held = sequence;
      return;
    }
    // 99 -> 100: one digit more; rebuilt below.
  }
  char number[24] = " #";
  const size_t digits =
      static_cast<size_t>(std::to_chars(number + 2, number + sizeof number, sequence).ptr - number);
  out->resize(op.size() + digits + kOfGroup.size() + group.size());
  char* at = out->data();
  std::memcpy(at, op.data(), op.size());
  std::memcpy(at += op.size(), number, digits);
  std::memcpy(at += digits, kOfGroup.data(), kOfGroup.size());
  std::memcpy(at + kOfGroup.size(), group.data(), group.size());
  *held = sequence;
  *held_op = op.data();
}

}  // namespace cohort
