#include "preflight/health_config.h"

#include <algorithm>
#include <cctype>

#include "preflight/config_values.h"

namespace preflight {
namespace {

constexpr EnumNames<GpuPersistence> kPersistenceNames = {
    {GpuPersistence::kAny, "any"}, {GpuPersistence::kOn, "on"}, {GpuPersistence::kOff, "off"}};
constexpr EnumNames<LinkLayer> kLinkLayerNames = {
    {LinkLayer::kAny, "any"}, {LinkLayer::kInfiniBand, "InfiniBand"}, {LinkLayer::kEthernet, "Ethernet"}};
constexpr EnumNames<XidAction> kXidActionNames = {{XidAction::kDrainReset, "drain_reset"}, {XidAction::kDrain, "drain"},
                                              {XidAction::kWarn, "warn"}, {XidAction::kUser, "user"},
                                              {XidAction::kIgnore, "ignore"}};


}  // namespace

const char* GpuPersistenceName(GpuPersistence p) { return NameIn(kPersistenceNames, p); }
Expected<GpuPersistence> ParsePersistence(const std::string& s) { return ParseIn(kPersistenceNames, s); }
const char* LinkLayerName(LinkLayer l) { return NameIn(kLinkLayerNames, l); }
Expected<LinkLayer> ParseLinkLayer(const std::string& s) { return ParseIn(kLinkLayerNames, s); }
const char* XidActionName(XidAction a) { return NameIn(kXidActionNames, a); }

bool ParseXidAction(const std::string& s, XidAction* a) {
  auto x = ParseIn(kXidActionNames, s);
  if (x) *a = *x;
  return x.ok();
}

Expected<std::vector<std::string>> ParseXidList(const std::string& s) {
  auto l = ParseList(s);
  if (!l) return l;
  for (const auto& x : *l)
    if (!ParseCount(x)) return Status::InvalidArgument("bad Xid '" + x + "' (expected a number)");
  return l;
}
Expected<std::vector<std::string>> ParseThrottleList(const std::string& s) {
  static const char* kNames[] = {"idle", "app_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
                                 "sw_thermal", "hw_thermal", "hw_power_brake", "display_clocks"};
  auto l = ParseList(s);
  if (!l) return l;
  for (const auto& x : *l) {
    bool ok = false;
    for (const char* n : kNames) ok = ok || x == n;
    if (!ok)
      return Status::InvalidArgument("unknown throttle reason '" + x +
                                     "' (expected idle, app_clocks, sw_power_cap, hw_slowdown, sync_boost, "
                                     "sw_thermal, hw_thermal, hw_power_brake, display_clocks)");
  }
  return l;
}
Expected<std::string> ParseComputeMode(const std::string& s) {
  return OneOf(s, {"any", "default", "exclusive_process", "prohibited"});
}
Expected<CounterLimits> ParseCounterLimits(const std::string& s) {
  CounterLimits out;
  if (s.empty()) return out;
  auto l = ParseList(s);
  if (!l) return l.status();
  for (const auto& item : *l) {
    size_t colon = item.find(':');
    std::string name = item.substr(0, colon);
    bool ok = colon != std::string::npos && !name.empty() &&
              std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!ok) return Status::InvalidArgument("bad counter limit '" + item + "' (expected NAME:MAX, e.g. symbol_error:10)");
    auto n = ParseCount(item.substr(colon + 1));
    if (!n) return Status::InvalidArgument("bad counter limit '" + item + "': " + n.status().message());
    for (const auto& kv : out)
      if (kv.first == name) return Status::InvalidArgument("counter '" + name + "' given twice");
    out.emplace_back(name, *n);
  }
  return out;
}
std::string CounterLimitsText(const CounterLimits& l) {
  std::string o;
  for (const auto& kv : l) o += (o.empty() ? "" : ",") + kv.first + ":" + std::to_string(kv.second);
  return o;
}

Expected<XidActions> ParseXidActions(const std::string& s) {
  XidActions out;
  if (s.empty()) return out;
  auto l = ParseList(s);
  if (!l) return l.status();
  for (const auto& item : *l) {
    size_t colon = item.find(':');
    auto n = ParseCount(item.substr(0, colon));
    XidAction a;
    if (colon == std::string::npos || !n || *n > 100000 || !ParseXidAction(item.substr(colon + 1), &a))
      return Status::InvalidArgument("bad Xid action '" + item +
                                     "' (expected XID:ACTION, ACTION one of drain_reset, drain, warn, user, ignore)");
    for (const auto& kv : out)
      if (kv.first == static_cast<int>(*n)) return Status::InvalidArgument("Xid " + std::to_string(*n) + " given twice");
    out.emplace_back(static_cast<int>(*n), a);
  }
  return out;
}
std::string XidActionsText(const XidActions& l) {
  std::string o;
  for (const auto& kv : l) o += (o.empty() ? "" : ",") + std::to_string(kv.first) + ":" + XidActionName(kv.second);
  return o;
}

Expected<std::vector<std::string>> ParseFleetFields(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  auto l = ParseList(s);
  if (!l) return l;
  for (const auto& f : *l)
    if (f != "driver" && f != "vbios" && f != "inforom" && f != "hca_fw" && f != "kernel")
      return Status::InvalidArgument("unknown field '" + f + "' (expected driver, vbios, inforom, hca_fw, kernel)");
  return l;
}

Expected<std::string> ParseBwProfile(const std::string& s) {
  return OneOf(s, {"auto", "H100", "H200", "B200", "A100", "L40S"});
}

Expected<uint64_t> ParseDcgmLevel(const std::string& s) {
  auto n = ParseCount(s);
  if (!n || *n > 4) return Status::InvalidArgument("bad DCGM level '" + s + "' (expected 0 to 4)");
  return n;
}


}  // namespace preflight
