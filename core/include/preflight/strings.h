// Small string helpers every subsystem uses.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace preflight {

// "a,b,c" from {"a","b","c"} and ","; "" for none.
inline std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "a,,b" -> {"a", "b"}: the pieces between `sep`, empty ones dropped.
inline std::vector<std::string> SplitNonEmpty(const std::string& text, char sep) {
  std::vector<std::string> out;
  for (size_t i = 0; i <= text.size();) {
    size_t j = text.find(sep, i);
    if (j == std::string::npos) j = text.size();
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// "key=value" lines (the cache's info files of older releases) as a map:
// split at the first '='; lines without one are skipped; a later key wins.
inline std::map<std::string, std::string> ParseKeyValueLines(const std::string& text) {
  std::map<std::string, std::string> m;
  for (const auto& line : SplitNonEmpty(text, '\n')) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

}  // namespace preflight
