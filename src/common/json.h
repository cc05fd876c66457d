// json.h: whole JSON documents, read and written.
//
// The flight recorder writes each rank's operations as a JSON document and
// cohort-trace reads them back; the launcher's error files use the string
// escaping. Json is a plain tree of values (objects keep their members in
// the order they were set); parsing (nlohmann-json's) is strict (RFC 8259)
// and bounded in depth, since a dump may come from a process that died
// mid-write.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cohort {

class Json {
 public:
  enum class Type : uint8_t { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Json() = default;                                                       // null
  Json(bool b) : type_(Type::kBool), int_(b ? 1 : 0) {}                   // NOLINT: implicit
  Json(int v) : type_(Type::kInt), int_(v) {}                             // NOLINT
  Json(int64_t v) : type_(Type::kInt), int_(v) {}                         // NOLINT
  Json(uint64_t v) : type_(Type::kInt), int_(static_cast<int64_t>(v)) {}  // NOLINT
  Json(double v) : type_(Type::kDouble), double_(v) {}                    // NOLINT
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}    // NOLINT
  Json(const char* s) : type_(Type::kString), string_(s) {}               // NOLINT
  static Json array() { return Json(Type::kArray); }
  static Json object() { return Json(Type::kObject); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kDouble; }

  // The readers below return `fallback` (or an empty value) when the value
  // has another type, so that a reader can take what a document has.
  bool as_bool(bool fallback = false) const { return type_ == Type::kBool ? int_ != 0 : fallback; }
  int64_t as_int(int64_t fallback = 0) const;
  double as_double(double fallback = 0) const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const { return items_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }
  // operator[] returns the member `key` of an object, or a null value.
  const Json& operator[](const std::string& key) const;
  bool has(const std::string& key) const;

  // push appends to an array; set adds (or replaces) an object's member.
  Json& push(Json value);
  Json& set(const std::string& key, Json value);

  // dump writes the value: compact with indent < 0; otherwise one member
  // per line, except that arrays and objects holding only scalars stay on
  // one line (a dump's entries read one per line).
  std::string dump(int indent = 2) const;

  // parse reads one document (surrounding blanks allowed), or returns
  // InvalidArgument saying what is wrong and at which byte.
  static Result<Json> parse(std::string_view text);

 private:
  explicit Json(Type type) : type_(type) {}
  bool is_flat() const;
  void write(std::string& out, int indent, int depth) const;

  Type type_ = Type::kNull;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// json_quote returns `text` as a JSON string literal, quotes included.
std::string json_quote(std::string_view text);

}  // namespace cohort
