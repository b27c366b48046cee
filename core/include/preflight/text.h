// Text that came from outside (a user's path or file name, a reason an
// admin typed, whatever bytes slurmctld hands back) made safe for the one
// line it goes into: a drain reason, a log line, a JSON string. Two rules,
// each owned here:
//
//   PrintableText  every byte that is not part of printable UTF-8 becomes
//                  "\xNN" (C0 and C1 controls, DEL, ESC sequences, bytes of
//                  an invalid or overlong sequence, surrogates); everything
//                  else is kept as it was. The result is valid UTF-8 and
//                  prints as one line on any terminal.
//   Utf8Prefix     the longest prefix of at most `max` bytes that ends on a
//                  character boundary, so that a cut never splits a
//                  character (a reason cut inside "é" is invalid UTF-8, and
//                  nlohmann, Python and slurmrestd's JSON all refuse it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace preflight {

// The byte length of the valid UTF-8 character at s[i] (1 to 4), or 0 when
// s[i] does not start one (a stray continuation byte, 0xc0/0xc1/0xf5..0xff,
// an overlong or surrogate form, a truncated sequence).
size_t Utf8CharLength(std::string_view s, size_t i);

// Whether `s` is valid UTF-8 throughout.
bool IsValidUtf8(std::string_view s);

// `s` with every byte outside printable UTF-8 written as "\xNN" (see above).
std::string PrintableText(std::string_view s);

// The longest prefix of `s` of at most `max` bytes that ends on a character
// boundary (never inside a multi-byte character).
std::string_view Utf8Prefix(std::string_view s, size_t max);

// The longest suffix of `s` of at most `max` bytes that starts on a
// character boundary.
std::string_view Utf8Suffix(std::string_view s, size_t max);

// `s` if it fits in `max` bytes, else its Utf8Prefix of max - 3 bytes and
// "..." (max >= 3).
std::string Utf8Cut(std::string_view s, size_t max);

}  // namespace preflight
