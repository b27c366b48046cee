#include "preflight/config_values.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace preflight {

Expected<bool> ParseBool(const std::string& s) {
  if (s == "yes" || s == "true" || s == "on" || s == "1") return true;
  if (s == "no" || s == "false" || s == "off" || s == "0") return false;
  return Status::InvalidArgument("bad boolean '" + s + "' (expected yes or no)");
}

namespace {
Expected<uint64_t> ParseScaled(const std::string& s, const char* what,
                                      const std::vector<std::pair<std::string, uint64_t>>& units,
                                      uint64_t bare) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0) return Status::InvalidArgument(std::string("bad ") + what + " '" + s + "'");
  uint64_t n = 0;
  for (size_t k = 0; k < i; ++k) {
    uint64_t d = static_cast<uint64_t>(s[k] - '0');
    if (n > (UINT64_MAX - d) / 10) return Status::InvalidArgument(std::string(what) + " '" + s + "' too large");
    n = n * 10 + d;
  }
  std::string unit = s.substr(i);
  uint64_t mult = 0;
  if (unit.empty()) mult = bare;
  for (const auto& u : units)
    if (unit == u.first) mult = u.second;
  if (mult == 0) return Status::InvalidArgument(std::string("bad ") + what + " '" + s + "'");
  if (n != 0 && mult > UINT64_MAX / n) return Status::InvalidArgument(std::string(what) + " '" + s + "' too large");
  return n * mult;
}
}  // namespace

Expected<uint64_t> ParseSize(const std::string& s) {
  return ParseScaled(s, "size", {{"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}, {"T", 1ull << 40}}, 1);
}

Expected<uint64_t> ParseCount(const std::string& s) { return ParseScaled(s, "count", {}, 1); }

Expected<uint32_t> ParseDurationMs(const std::string& s) {
  auto v = ParseScaled(s, "duration", {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}}, 1000);
  if (!v) return v.status();
  if (*v > UINT32_MAX) return Status::InvalidArgument("duration '" + s + "' too large");
  return static_cast<uint32_t>(*v);
}

Expected<double> ParseRate(const std::string& s) {
  if (s == "auto") return 0.0;
  std::string t = s;
  if (t.size() > 3 && t.compare(t.size() - 3, 3, "B/s") == 0) t.resize(t.size() - 3);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return Status::InvalidArgument("bad rate '" + s + "' (expected e.g. 500M, 40G, 12.5GB/s or auto)");
  double v = std::strtod(t.substr(0, i).c_str(), nullptr);
  std::string unit = t.substr(i);
  double mult = unit.empty() ? 1 : unit == "K" ? 1e3 : unit == "M" ? 1e6 : unit == "G" ? 1e9 : unit == "T" ? 1e12 : 0;
  if (mult == 0 || !(v >= 0)) return Status::InvalidArgument("bad rate '" + s + "' (expected e.g. 500M, 40G, 12.5GB/s or auto)");
  return v * mult;
}

std::string RateKeyText(double v) {
  if (v <= 0) return "auto";
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && v >= 1000) { v /= 1000; ++u; }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g%s", v, units[u]);
  return buf;
}

std::string ExpandNode(const std::string& value, const std::string& node) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '%' && i + 1 < value.size()) {
      if (value[i + 1] == 'n' && !node.empty()) { out += node; ++i; continue; }
      if (value[i + 1] == '%') { out += '%'; ++i; continue; }
    }
    out += value[i];
  }
  return out;
}

std::string SizeText(uint64_t v) {
  static const char* kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && v != 0 && v % 1024 == 0) { v /= 1024; ++u; }
  return std::to_string(v) + kUnits[u];
}

std::string DurationText(uint32_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string BoolText(bool b) { return b ? "yes" : "no"; }
std::string CountText(uint64_t v) { return std::to_string(v); }

std::string ListText(const std::vector<std::string>& v) {
  std::string o;
  for (const auto& x : v) o += (o.empty() ? "" : ",") + x;
  return o;
}
Expected<std::vector<std::string>> ParseList(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size() && !s.empty()) {
    size_t e = s.find(',', b);
    std::string item = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    size_t i = item.find_first_not_of(" \t"), j = item.find_last_not_of(" \t");
    if (i == std::string::npos) return Status::InvalidArgument("empty item in list '" + s + "'");
    out.push_back(item.substr(i, j - i + 1));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}
Expected<std::string> OneOf(const std::string& s, std::initializer_list<const char*> allowed) {
  std::string all;
  for (const char* a : allowed) {
    if (s == a) return s;
    all += (all.empty() ? "" : ", ") + std::string(a);
  }
  return Status::InvalidArgument("bad value '" + s + "' (expected " + all + ")");
}
Expected<double> ParseFraction(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0) || v > 1) return Status::InvalidArgument("bad fraction '" + s + "' (expected 0 < f <= 1, e.g. 0.6)");
  return v;
}
// Strictly between 0 and 1: a straggler fraction of 1 names every node
// below the median (half of them), 0 none.
Expected<double> ParseOpenFraction(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0) || !(v < 1))
    return Status::InvalidArgument("bad fraction '" + s + "' (expected 0 < f < 1, e.g. 0.5)");
  return v;
}
std::string FractionText(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
Expected<std::string> ParseVersion(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 32 && s.front() != '.' && s.back() != '.' && s.find("..") == std::string::npos;
  for (char c : s) ok = ok && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
  if (!ok) return Status::InvalidArgument("bad version '" + s + "' (expected digits and dots, e.g. 2.27.3)");
  return s;
}

Expected<std::pair<uint32_t, uint32_t>> ParsePortRange(const std::string& s) {
  if (s == "none") return std::make_pair(0u, 0u);
  size_t d = s.find('-');
  auto lo = ParseCount(s.substr(0, d));
  auto hi = d == std::string::npos ? lo : ParseCount(s.substr(d + 1));
  if (!lo || !hi || *lo < 1 || *hi > 65535 || *lo > *hi)
    return Status::InvalidArgument("bad port range '" + s + "' (expected LO-HI within 1-65535, or none)");
  return std::make_pair(static_cast<uint32_t>(*lo), static_cast<uint32_t>(*hi));
}

std::string PortRangeText(const std::pair<uint32_t, uint32_t>& r) {
  return r.first == 0 ? "none" : std::to_string(r.first) + "-" + std::to_string(r.second);
}

}  // namespace preflight
