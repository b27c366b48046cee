// Small string helpers every subsystem uses.
#pragma once

#include <string>
#include <vector>

namespace preflight {

// "a,b,c" from {"a","b","c"} and ","; "" for none.
inline std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace preflight
