// json_text.h: the little JSON the launcher reads and writes: escaping a
// string, and finding a string or boolean field in a document. Enough for
// torch's error files and etcd's JSON gateway; not a general parser.
#pragma once

#include <optional>
#include <string>

namespace cohort {

// json_quote returns `text` as a JSON string literal, quotes included.
std::string json_quote(const std::string& text);

// json_string_field returns the unescaped value of the first string field
// named `key` at or after `from` in `doc`, or nullopt when there is none.
std::optional<std::string> json_string_field(const std::string& doc, const std::string& key, size_t from = 0);

// json_field_pos returns where the value of the first field named `key`
// starts (after the colon and blanks), or npos.
size_t json_field_pos(const std::string& doc, const std::string& key, size_t from = 0);

}  // namespace cohort
