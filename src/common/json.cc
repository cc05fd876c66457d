#include "common/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace cohort {
namespace {

const Json& null_value() {
  static const Json kNull;
  return kNull;
}

const std::string& empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool read_hex4(std::string_view doc, size_t at, uint32_t* value) {
  if (at + 4 > doc.size()) return false;
  auto r = std::from_chars(doc.data() + at, doc.data() + at + 4, *value, 16);
  return r.ec == std::errc() && r.ptr == doc.data() + at + 4;
}

// Parser reads one document; `error` says what went wrong where.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Json> document() {
    Json value;
    if (!read_value(&value, 0)) return Status(StatusCode::kInvalidArgument, error_);
    skip_blanks();
    if (pos_ != text_.size()) return fail("unexpected text after the document");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status fail(const std::string& what) {
    return Status(StatusCode::kInvalidArgument, "JSON: " + what + " at byte " + std::to_string(pos_));
  }
  bool bad(const std::string& what) {
    error_ = "JSON: " + what + " at byte " + std::to_string(pos_);
    return false;
  }

  void skip_blanks() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool read_value(Json* out, int depth) {
    if (depth > kMaxDepth) return bad("nested deeper than " + std::to_string(kMaxDepth));
    skip_blanks();
    if (pos_ >= text_.size()) return bad("the document ends where a value should be");
    const char c = text_[pos_];
    if (c == '{') return read_object(out, depth);
    if (c == '[') return read_array(out, depth);
    if (c == '"') {
      std::string s;
      if (!json_read_string(text_, &pos_, &s)) return bad("malformed string");
      *out = Json(std::move(s));
      return true;
    }
    if (literal("true")) return *out = Json(true), true;
    if (literal("false")) return *out = Json(false), true;
    if (literal("null")) return *out = Json(), true;
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(out);
    return bad(std::string("unexpected character '") + c + "'");
  }

  bool read_number(Json* out) {
    const size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && pos_ > start)) {
        integral = false;
      } else if (c < '0' || c > '9') {
        break;
      }
      ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec == std::errc() && r.ptr == last) return *out = Json(v), true;
    }
    // strtod needs a terminated string; numbers are short.
    const std::string number(first, last);
    char* end = nullptr;
    const double d = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(d)) {
      pos_ = start;
      return bad("malformed number");
    }
    *out = Json(d);
    return true;
  }

  bool read_array(Json* out, int depth) {
    ++pos_;  // '['
    *out = Json::array();
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
    for (;;) {
      Json item;
      if (!read_value(&item, depth + 1)) return false;
      out->push(std::move(item));
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
      return bad("expected ',' or ']' in an array");
    }
  }

  bool read_object(Json* out, int depth) {
    ++pos_;  // '{'
    *out = Json::object();
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
    for (;;) {
      skip_blanks();
      std::string key;
      if (pos_ >= text_.size() || text_[pos_] != '"' || !json_read_string(text_, &pos_, &key)) {
        return bad("expected a member name");
      }
      skip_blanks();
      if (pos_ >= text_.size() || text_[pos_] != ':') return bad("expected ':' after a member name");
      ++pos_;
      Json value;
      if (!read_value(&value, depth + 1)) return false;
      out->set(key, std::move(value));
      skip_blanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
      return bad("expected ',' or '}' in an object");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

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
  return Parser(text).document();
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

bool json_read_string(std::string_view doc, size_t* pos, std::string* out) {
  size_t i = *pos;
  if (i >= doc.size() || doc[i] != '"') return false;
  out->clear();
  for (++i; i < doc.size(); ++i) {
    const char c = doc[i];
    if (c == '"') {
      *pos = i + 1;
      return true;
    }
    if (static_cast<unsigned char>(c) < 0x20) return false;  // raw control characters are not allowed
    if (c != '\\') {
      *out += c;
      continue;
    }
    if (++i >= doc.size()) return false;
    switch (doc[i]) {
      case '"':
      case '\\':
      case '/':
        *out += doc[i];
        break;
      case 'n':
        *out += '\n';
        break;
      case 't':
        *out += '\t';
        break;
      case 'r':
        *out += '\r';
        break;
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!read_hex4(doc, i + 1, &cp)) return false;
        i += 4;
        // A high surrogate followed by a low one is one code point.
        uint32_t low = 0;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < doc.size() && doc[i + 1] == '\\' && doc[i + 2] == 'u' &&
            read_hex4(doc, i + 3, &low) && low >= 0xDC00 && low < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        }
        append_utf8(*out, cp);
        break;
      }
      default:
        return false;
    }
  }
  return false;  // unterminated
}

}  // namespace cohort
