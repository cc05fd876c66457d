#include "launcher/json_text.h"

#include <nlohmann/json.hpp>

namespace cohort {
namespace {

using Doc = nlohmann::ordered_json;

struct TooDeep {};

// parse reads a whole document, or nothing: malformed, or nested deeper
// than an error file or an etcd reply ever is (first_field recurses).
std::optional<Doc> parse(const std::string& text) {
  auto bound_depth = [](int depth, Doc::parse_event_t, Doc&) {
    if (depth > 64) throw TooDeep{};
    return true;
  };
  try {
    Doc doc = Doc::parse(text, bound_depth, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return std::nullopt;
    return doc;
  } catch (const TooDeep&) {
    return std::nullopt;
  }
}

// first_field finds the first member named `key` for which `wanted` holds,
// depth first in document order.
template <class Wanted>
const Doc* first_field(const Doc& doc, const std::string& key, Wanted wanted) {
  if (doc.is_object()) {
    for (const auto& [name, value] : doc.items()) {
      if (name == key && wanted(value)) return &value;
      if (const Doc* inner = first_field(value, key, wanted)) return inner;
    }
  } else if (doc.is_array()) {
    for (const auto& item : doc) {
      if (const Doc* inner = first_field(item, key, wanted)) return inner;
    }
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> json_string_field(const std::string& text, const std::string& key) {
  auto doc = parse(text);
  if (!doc) return std::nullopt;
  const Doc* field = first_field(*doc, key, [](const Doc& v) { return v.is_string(); });
  if (!field) return std::nullopt;
  return field->get<std::string>();
}

bool json_has_field(const std::string& text, const std::string& key) {
  auto doc = parse(text);
  return doc && first_field(*doc, key, [](const Doc&) { return true; });
}

bool json_field_is_true(const std::string& text, const std::string& key) {
  auto doc = parse(text);
  if (!doc) return false;
  const Doc* field = first_field(*doc, key, [](const Doc&) { return true; });
  return field && field->is_boolean() && field->get<bool>();
}

}  // namespace cohort
