#include "common/point_of_view.h"

#include <cctype>

namespace cohort {
namespace {

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

bool starts_word(const std::string& text, size_t at) {
  return at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
}

}  // namespace

std::string as_said_by(const std::string& text, int rank) {
  const std::string phrase = "this rank";
  const std::string mine = "rank " + std::to_string(rank);
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(phrase); at != std::string::npos; at = text.find(phrase, from)) {
    out.append(text, from, at - from);
    size_t end = at + phrase.size();
    if (!starts_word(text, at) ||
        (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end])))) {
      out.append(phrase);  // part of a longer word
      from = end;
      continue;
    }
    // "this rank (N)" is a text this rank read and now relays: "rank N".
    if (text.compare(end, 2, " (") == 0) {
      size_t digits = end + 2;
      while (digits < text.size() && is_digit(text[digits])) ++digits;
      if (digits > end + 2 && digits < text.size() && text[digits] == ')') {
        out.append("rank ").append(text, end + 2, digits - end - 2);
        from = digits + 1;
        continue;
      }
    }
    out.append(mine);
    from = end;
  }
  out.append(text, from, std::string::npos);
  return out;
}

std::string as_read_by(const std::string& text, int rank) {
  const std::string mine = "rank " + std::to_string(rank);
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(mine); at != std::string::npos; at = text.find(mine, from)) {
    const size_t end = at + mine.size();
    out.append(text, from, at - from);
    const bool whole = starts_word(text, at) && (end == text.size() || !is_digit(text[end]));
    out.append(whole ? "this rank (" + std::to_string(rank) + ")" : mine);
    from = end;
  }
  out.append(text, from, std::string::npos);
  return out;
}

}  // namespace cohort
