#include "launcher/json_text.h"

#include <cstdio>

namespace cohort {

std::string json_quote(const std::string& text) {
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

namespace {

// append_utf8 encodes a \uXXXX code unit; surrogate pairs are not joined
// (error messages are what we read, and they are ASCII or raw UTF-8).
void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::optional<std::string> json_string_field(const std::string& doc, const std::string& key, size_t from) {
  for (size_t p = json_field_pos(doc, key, from); p != std::string::npos; p = json_field_pos(doc, key, p)) {
    if (doc[p] != '"') continue;  // an object or number: look for a later field of that name
    std::string out;
    for (size_t i = p + 1; i < doc.size(); ++i) {
      char c = doc[i];
      if (c == '"') return out;
      if (c != '\\' || i + 1 >= doc.size()) {
        out += c;
        continue;
      }
      char e = doc[++i];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u':
          if (i + 4 < doc.size()) {
            append_utf8(out, static_cast<unsigned>(std::stoul(doc.substr(i + 1, 4), nullptr, 16)));
            i += 4;
          }
          break;
        default:
          out += e;  // \" \\ \/
      }
    }
    return std::nullopt;  // unterminated string
  }
  return std::nullopt;
}

}  // namespace cohort
