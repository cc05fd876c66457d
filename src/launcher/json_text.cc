#include "launcher/json_text.h"

namespace cohort {

size_t json_field_pos(const std::string& doc, const std::string& key, size_t from) {
  const std::string needle = "\"" + key + "\"";
  for (size_t at = doc.find(needle, from); at != std::string::npos; at = doc.find(needle, at + 1)) {
    size_t p = at + needle.size();
    while (p < doc.size() && (doc[p] == ' ' || doc[p] == '\n' || doc[p] == '\t' || doc[p] == '\r')) ++p;
    if (p >= doc.size() || doc[p] != ':') continue;  // the text was a value, not a key
    ++p;
    while (p < doc.size() && (doc[p] == ' ' || doc[p] == '\n' || doc[p] == '\t' || doc[p] == '\r')) ++p;
    return p;
  }
  return std::string::npos;
}

std::optional<std::string> json_string_field(const std::string& doc, const std::string& key, size_t from) {
  for (size_t p = json_field_pos(doc, key, from); p != std::string::npos; p = json_field_pos(doc, key, p)) {
    if (doc[p] != '"') continue;  // an object or number: look for a later field of that name
    std::string out;
    if (!json_read_string(doc, &p, &out)) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

}  // namespace cohort
