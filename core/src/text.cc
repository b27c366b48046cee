#include "preflight/text.h"

#include <cstdio>

namespace preflight {
namespace {

bool Continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// Whether code point `cp` prints: not a C0 or C1 control, not DEL.
bool Printable(unsigned cp) { return cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0); }

// The code point of the valid character of `len` bytes at s[i].
unsigned CodePoint(std::string_view s, size_t i, size_t len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + i);
  if (len == 1) return p[0];
  if (len == 2) return ((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu);
  if (len == 3) return ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
  return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu);
}

}  // namespace

size_t Utf8CharLength(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if (!Continuation(static_cast<unsigned char>(s[i + k]))) return 0;
  unsigned cp = CodePoint(s, i, len);
  // Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid (RFC 3629).
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8CharLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string PrintableText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8CharLength(s, i);
    if (n > 0 && Printable(CodePoint(s, i, n))) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // One byte at a time: an invalid sequence's next byte may start a valid one.
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(s[i]));
    out += b;
    ++i;
  }
  return out;
}

std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  // Back off the continuation bytes of the character the cut falls in; at
  // most 3 of them (a longer run is not UTF-8: cut where asked).
  for (size_t k = 0; k < 3 && cut > 0 && Continuation(static_cast<unsigned char>(s[cut])); ++k) --cut;
  if (Continuation(static_cast<unsigned char>(s[cut]))) cut = max;
  return s.substr(0, cut);
}

std::string_view Utf8Suffix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t start = s.size() - max;
  for (size_t k = 0; k < 3 && start < s.size() && Continuation(static_cast<unsigned char>(s[start])); ++k) ++start;
  return s.substr(start);
}

std::string Utf8Cut(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  return std::string(Utf8Prefix(s, max >= 3 ? max - 3 : 0)) + "...";
}

}  // namespace preflight
