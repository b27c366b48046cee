// Small statistics the judges share: the median of figures (the straggler
// rules of the collective check and of gpu.gemm) and the value most of a
// list hold (gpu.gemm's result hashes, per node and across an allocation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <vector>

namespace preflight {

// The median (the mean of the middle two for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The value most of `values` hold (the smallest among equals), how many
// hold it, and whether that is a strict majority (more than half).
template <class T>
struct Majority {
  T value{};
  size_t count = 0;
  bool strict = false;
};
template <class T>
Majority<T> MajorityOf(const std::vector<T>& values) {
  std::map<T, size_t> n;
  for (const auto& v : values) ++n[v];
  Majority<T> m;
  for (const auto& [v, c] : n)
    if (c > m.count) m.value = v, m.count = c;
  m.strict = 2 * m.count > values.size();
  return m;
}

}  // namespace preflight
