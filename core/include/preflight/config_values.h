// Value syntax shared by the config keys and the command lines: booleans,
// sizes, counts, durations, rates, fractions, comma lists, and the name
// tables of enum-valued keys. Each subsystem's own vocabulary (Xid actions,
// counter limits, stage_verify, ...) is in its *_config.h and built on
// these; config.cc's key table puts them together.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "preflight/status.h"

namespace preflight {

Expected<bool> ParseBool(const std::string& s);
Expected<uint64_t> ParseSize(const std::string& s);      // 4096, 64K, 10M, 2G, 1T
Expected<uint64_t> ParseCount(const std::string& s);
Expected<uint32_t> ParseDurationMs(const std::string& s);  // 250ms, 10s, 2m; bare = seconds
// Bytes per second with decimal units as nccl-tests prints them: 500M,
// 40G, 12.5GB/s; "auto" is 0.
Expected<double> ParseRate(const std::string& s);
std::string RateKeyText(double bytes_per_s);
// `%n` becomes the node name (left as is when node is empty), `%%` a `%`.
std::string ExpandNode(const std::string& value, const std::string& node);

// 0 < f <= 1 (ParseFraction); 0 < f < 1 (ParseOpenFraction).
Expected<double> ParseFraction(const std::string& s);
Expected<double> ParseOpenFraction(const std::string& s);
// "a,b,c", items trimmed, none empty.
Expected<std::vector<std::string>> ParseList(const std::string& s);
// One of `allowed`; the error lists them.
Expected<std::string> OneOf(const std::string& s, std::initializer_list<const char*> allowed);

// A dotted release number: "2.27.3" (digits and single dots, at most 32 bytes).
Expected<std::string> ParseVersion(const std::string& s);
// A TCP port range "LO-HI" (1..65535, LO <= HI), or "none": {0, 0}.
Expected<std::pair<uint32_t, uint32_t>> ParsePortRange(const std::string& s);
std::string PortRangeText(const std::pair<uint32_t, uint32_t>& r);

// The text a value has in the config (`preflight config show`).
std::string SizeText(uint64_t v);
std::string DurationText(uint32_t ms);
std::string BoolText(bool b);
std::string CountText(uint64_t v);
std::string FractionText(double v);
std::string ListText(const std::vector<std::string>& v);

// A count within [lo, hi]; the error states the range.
template <uint64_t lo, uint64_t hi>
Expected<uint64_t> CountIn(const std::string& s) {
  auto n = ParseCount(s);
  if (!n || *n < lo || *n > hi)
    return Status::InvalidArgument("bad value '" + s + "' (expected a number from " + std::to_string(lo) + " to " +
                                   std::to_string(hi) + ")");
  return n;
}

// An enum-valued key's table: its values and their names in the config.
template <class E>
using EnumNames = std::initializer_list<std::pair<E, const char*>>;
template <class E>
const char* NameIn(EnumNames<E> names, E e) {
  for (const auto& n : names)
    if (n.first == e) return n.second;
  return names.begin()->second;
}
template <class E>
Expected<E> ParseIn(EnumNames<E> names, const std::string& s) {
  std::string all;
  for (const auto& n : names) {
    if (s == n.second) return n.first;
    all += (all.empty() ? "" : ", ") + std::string(n.second);
  }
  return Status::InvalidArgument("bad value '" + s + "' (expected " + all + ")");
}

}  // namespace preflight
