#include "preflight/hostlist.h"

#include <sstream>

#include "preflight/job.h"

namespace preflight {

Expected<std::vector<std::string>> ExpandHostlist(const std::string& s) {
  std::vector<std::string> out;
  // Split at top-level commas.
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return Status::InvalidArgument("hostlist '" + s + "': unbalanced ']'");
    if (c == ',' && depth == 0) { items.push_back(cur); cur.clear(); continue; }
    cur += c;
  }
  if (depth != 0) return Status::InvalidArgument("hostlist '" + s + "': unbalanced '['");
  items.push_back(cur);
  for (const auto& item : items) {
    if (item.empty()) continue;
    size_t lb = item.find('[');
    if (lb == std::string::npos) { out.push_back(item); continue; }
    size_t rb = item.find(']', lb);
    std::string prefix = item.substr(0, lb), ranges = item.substr(lb + 1, rb - lb - 1);
    auto rest = ExpandHostlist(item.substr(rb + 1));  // further bracket groups
    if (!rest) return rest.status();
    if (rest->empty()) rest->push_back("");
    std::stringstream rs(ranges);
    std::string r;
    while (std::getline(rs, r, ',')) {
      size_t dash = r.find('-');
      std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
      auto lo = ParseCount(a), hi = ParseCount(b);
      if (!lo || !hi || *hi < *lo || *hi - *lo > 100000)
        return Status::InvalidArgument("hostlist '" + s + "': bad range '" + r + "'");
      for (uint64_t n = *lo; n <= *hi; ++n) {
        std::string num = std::to_string(n);
        if (num.size() < a.size()) num = std::string(a.size() - num.size(), '0') + num;  // keep padding
        for (const auto& suffix : *rest) out.push_back(prefix + num + suffix);
      }
    }
  }
  return out;
}

}  // namespace preflight
