#include "preflight/json.h"

#include <cmath>
#include <cstdio>

#include "preflight/text.h"

namespace preflight {

// Valid JSON for any bytes (RFC 8259 requires UTF-8): a byte that is not
// part of a valid UTF-8 character becomes U+FFFD, as a strict reader
// (nlohmann, Python, slurmrestd's clients) would otherwise refuse the whole
// document; controls, DEL and C1 are written as \u escapes.
std::string JsonEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = Utf8CharLength(s, i);
    if (n == 0) {
      o += "\\ufffd";
      ++i;
      continue;
    }
    if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {  // C1 control
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      o += b;
      i += 2;
      continue;
    }
    if (n > 1) {
      o.append(s, i, n);
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o;
}

void JsonWriter::Newline() {
  if (!pretty_) return;
  out_ += '\n';
  out_.append(2 * first_.size(), ' ');
}

void JsonWriter::Separate() {
  if (after_key_) { after_key_ = false; return; }
  if (first_.empty()) return;
  if (!first_.back()) out_ += ',';
  first_.back() = false;
  Newline();
}

JsonWriter& JsonWriter::BeginObject() { Separate(); out_ += '{'; first_.push_back(true); return *this; }
JsonWriter& JsonWriter::BeginArray() { Separate(); out_ += '['; first_.push_back(true); return *this; }

JsonWriter& JsonWriter::EndObject() {
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) Newline();
  out_ += '}';
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) Newline();
  out_ += ']';
  return *this;
}

JsonWriter& JsonWriter::Key(const std::string& k) {
  Separate();
  out_ += '"' + JsonEscape(k) + (pretty_ ? "\": " : "\":");
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(const std::string& v) { Separate(); out_ += '"' + JsonEscape(v) + '"'; return *this; }
JsonWriter& JsonWriter::Int(int64_t v) { Separate(); out_ += std::to_string(v); return *this; }
JsonWriter& JsonWriter::Bool(bool v) { Separate(); out_ += v ? "true" : "false"; return *this; }
JsonWriter& JsonWriter::Null() { Separate(); out_ += "null"; return *this; }

JsonWriter& JsonWriter::Number(double v) {
  Separate();
  if (!std::isfinite(v)) { out_ += "null"; return *this; }
  char b[32];
  std::snprintf(b, sizeof b, "%.15g", v);
  out_ += b;
  return *this;
}

}  // namespace preflight
