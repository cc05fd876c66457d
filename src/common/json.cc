#include "common/json.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace cohort {
namespace {

using Parsed = nlohmann::ordered_json;

// How deep a document may nest: a dump or an error file is a few levels
// deep, and a hostile one must not make its reader recurse without end.
constexpr int kMaxDepth = 64;

const Json& null_value() {
  static const Json kNull;
  return kNull;
}

const std::string& empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

struct TooDeep {};

// from_parsed turns nlohmann's tree into ours (which keeps the dump format
// the flight recorder's readers expect).
Json from_parsed(const Parsed& p) {
  switch (p.type()) {
    case Parsed::value_t::boolean:
      return Json(p.get<bool>());
    case Parsed::value_t::number_integer:
      return Json(p.get<int64_t>());
    case Parsed::value_t::number_unsigned: {
      // Above int64's range a number is kept as a double, not wrapped.
      const uint64_t v = p.get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX)) return Json(static_cast<double>(v));
      return Json(v);
    }
    case Parsed::value_t::number_float:
      return Json(p.get<double>());
    case Parsed::value_t::string:
      return Json(p.get<std::string>());
    case Parsed::value_t::array: {
      Json out = Json::array();
      for (const auto& item : p) out.push(from_parsed(item));
      return out;
    }
    case Parsed::value_t::object: {
      Json out = Json::object();
      for (const auto& [key, value] : p.items()) out.set(key, from_parsed(value));
      return out;
    }
    default:
      return Json();
  }
}

}  // namespace

int64_t Json::as_int(int64_t fallback) const {
  if (type_ == Type::kInt) return int_;
  if (type_ == Type::kDouble) return static_cast<int64_t>(double_);
  return fallback;
}

double Json::as_double(double fallback) const {
  if (type_ == Type::kDouble) return double_;
  if (type_ == Type::kInt) return static_cast<double>(int_);
  return fallback;
}

const std::string& Json::as_string() const {
  return type_ == Type::kString ? string_ : empty_string();
}

const Json& Json::operator[](const std::string& key) const {
  for (const auto& m : members_) {
    if (m.first == key) return m.second;
  }
  return null_value();
}

bool Json::has(const std::string& key) const {
  for (const auto& m : members_) {
    if (m.first == key) return true;
  }
  return false;
}

Json& Json::push(Json value) {
  type_ = Type::kArray;
  items_.push_back(std::move(value));
  return items_.back();
}

Json& Json::set(const std::string& key, Json value) {
  type_ = Type::kObject;
  for (auto& m : members_) {
    if (m.first == key) return m.second = std::move(value);
  }
  members_.emplace_back(key, std::move(value));
  return members_.back().second;
}

bool Json::is_flat() const {
  for (const auto& i : items_) {
    if (i.type_ == Type::kArray || i.type_ == Type::kObject) return false;
  }
  for (const auto& m : members_) {
    if (m.second.type_ == Type::kArray || m.second.type_ == Type::kObject) return false;
  }
  return true;
}

void Json::write(std::string& out, int indent, int depth) const {
  switch (type_) {
    case Type::kNull:
      out += "null";
      return;
    case Type::kBool:
      out += int_ ? "true" : "false";
      return;
    case Type::kInt:
      out += std::to_string(int_);
      return;
    case Type::kDouble: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", double_);
      out += buf;
      return;
    }
    case Type::kString:
      out += json_quote(string_);
      return;
    case Type::kArray:
    case Type::kObject:
      break;
  }
  const bool object = type_ == Type::kObject;
  const size_t count = object ? members_.size() : items_.size();
  const bool multiline = indent >= 0 && !is_flat() && count > 0;
  const std::string inner =
      multiline ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  out += object ? '{' : '[';
  for (size_t i = 0; i < count; ++i) {
    if (i) out += indent >= 0 && !multiline ? ", " : ",";
    out += inner;
    if (object) {
      out += json_quote(members_[i].first);
      out += indent >= 0 ? ": " : ":";
      members_[i].second.write(out, indent, depth + 1);
    } else {
      items_[i].write(out, indent, depth + 1);
    }
  }
  if (multiline) out += "\n" + std::string(static_cast<size_t>(indent * depth), ' ');
  out += object ? '}' : ']';
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

Result<Json> Json::parse(std::string_view text) {
  // The callback sees every value's depth as it starts; throwing stops the
  // parse before a hostile document nests any deeper.
  auto bound_depth = [](int depth, Parsed::parse_event_t, Parsed&) {
    if (depth > kMaxDepth) throw TooDeep{};
    return true;
  };
  try {
    return from_parsed(Parsed::parse(text.begin(), text.end(), bound_depth));
  } catch (const TooDeep&) {
    return Status(StatusCode::kInvalidArgument,
                  "JSON: nested deeper than " + std::to_string(kMaxDepth) + " levels");
  } catch (const Parsed::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1,
    // column 3: syntax error ..."; the byte and the reason are what matter.
    std::string why = e.what();
    const size_t colon = why.find(": ", why.find("column"));
    why = colon == std::string::npos ? why : why.substr(colon + 2);
    return Status(StatusCode::kInvalidArgument, "JSON: " + why + " at byte " + std::to_string(e.byte));
  }
}

std::string json_quote(std::string_view text) {
  // Bytes that are not UTF-8 (a message may hold any) become U+FFFD.
  return Parsed(std::string(text)).dump(-1, ' ', false, Parsed::error_handler_t::replace);
}

}  // namespace cohort
