// json_text.h: the little JSON the launcher reads: a string or boolean
// field found in a document, without parsing the rest. Enough for torch's
// error files and etcd's JSON gateway (whose replies may hold more than we
// care to model). Escaping (json_quote) is in common/json.h.
#pragma once

#include <optional>
#include <string>

#include "common/json.h"  // json_quote

namespace cohort {

// json_string_field returns the unescaped value of the first string field
// named `key` at or after `from` in `doc`, or nullopt when there is none.
std::optional<std::string> json_string_field(const std::string& doc, const std::string& key, size_t from = 0);

// json_field_pos returns where the value of the first field named `key`
// starts (after the colon and blanks), or npos.
size_t json_field_pos(const std::string& doc, const std::string& key, size_t from = 0);

}  // namespace cohort
