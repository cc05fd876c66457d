// json_text.h: the fields of JSON documents the launcher reads, torch's
// error files and etcd's JSON gateway replies (which hold more than we
// care to model): the first field of a name, wherever it is nested.
// Escaping (json_quote) is in common/json.h.
#pragma once

#include <optional>
#include <string>

#include "common/json.h"  // json_quote

namespace cohort {

// json_string_field returns the first string-valued field named `key`,
// depth first in document order; nullopt when there is none or `doc` is
// not JSON.
std::optional<std::string> json_string_field(const std::string& doc, const std::string& key);

// json_has_field says whether any field is named `key`; json_field_is_true
// whether the first one is the boolean true.
bool json_has_field(const std::string& doc, const std::string& key);
bool json_field_is_true(const std::string& doc, const std::string& key);

}  // namespace cohort
