#include "preflight/node_watch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "preflight/gpu_util.h"
#include "preflight/hostlist.h"
#include "preflight/strings.h"

namespace preflight {
namespace {

class NvmlSampler : public GpuSampler {
 public:
  explicit NvmlSampler(NvmlJobGpus g) : g_(std::move(g)) {}
  Expected<std::vector<GpuReading>> Sample() override {
    const NvmlApi* a = g_.api;
    std::vector<GpuReading> out;
    for (size_t i = 0; i < g_.devs.size(); ++i) {
      GpuReading r;
      r.index = g_.index[i];
      nvmlUtilization_t u{};
      nvmlReturn_t e = a->DeviceGetUtilizationRates(g_.devs[i], &u);
      // A GPU that stops answering is no figure at all, not an idle one.
      if (e != NVML_SUCCESS) return Status::Unavailable("GPU " + std::to_string(r.index) + ": nvmlDeviceGetUtilizationRates: " + a->Error(e));
      r.util = u.gpu;
      unsigned mw = 0;
      if (a->DeviceGetPowerUsage && a->DeviceGetPowerUsage(g_.devs[i], &mw) == NVML_SUCCESS) r.power_w = mw / 1000.0;
      if (a->DeviceGetEnforcedPowerLimit && a->DeviceGetEnforcedPowerLimit(g_.devs[i], &mw) == NVML_SUCCESS) r.limit_w = mw / 1000.0;
      nvmlMemory_t m{};
      if (a->DeviceGetMemoryInfo && a->DeviceGetMemoryInfo(g_.devs[i], &m) == NVML_SUCCESS) {
        r.mem_used_mib = m.used >> 20;
        r.mem_total_mib = m.total >> 20;
      }
      out.push_back(r);
    }
    return out;
  }

 private:
  NvmlJobGpus g_;
};

std::string Watts(double w) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f W", w);
  return b;
}

}  // namespace

Expected<std::unique_ptr<GpuSampler>> OpenNvmlSampler(const std::string& library, const std::vector<int>& minors) {
  auto api = LoadNvml(library);
  if (!api) return api.status();
  if ((*api)->DeviceGetUtilizationRates == nullptr) return Status::Unavailable(library + " lacks nvmlDeviceGetUtilizationRates");
  auto g = OpenNvmlJobGpus(library, minors);
  if (!g) return g.status();
  return std::unique_ptr<GpuSampler>(new NvmlSampler(std::move(*g)));
}

std::string WatchLine(const std::string& node, const std::vector<GpuReading>& gpus) {
  std::string s = kWatchLinePrefix + node;
  for (const auto& g : gpus) {
    char b[128];
    std::snprintf(b, sizeof b, " %u:%u:%.0f:%.0f:%llu:%llu", g.index, g.util, g.power_w, g.limit_w,
                  static_cast<unsigned long long>(g.mem_used_mib), static_cast<unsigned long long>(g.mem_total_mib));
    s += b;
  }
  return s;
}

std::string WatchLineUnavailable(const std::string& node, const std::string& why) {
  std::string w;
  for (char c : why) w += (c == '\n' || c == '\r') ? ' ' : c;
  return kWatchLinePrefix + node + " - " + w;
}

Expected<WatchSample> ParseWatchLine(const std::string& line) {
  const std::string prefix = kWatchLinePrefix;
  if (line.compare(0, prefix.size(), prefix) != 0) return Status::InvalidArgument("not a watch line");
  if (line.size() > 65536) return Status::InvalidArgument("watch line over 64 KiB");
  std::istringstream in(line.substr(prefix.size()));
  WatchSample s;
  if (!(in >> s.node) || !ValidNodeName(s.node).ok())
    return Status::InvalidArgument("watch line: bad node name");
  std::string tok;
  while (in >> tok) {
    if (tok == "-") {
      std::getline(in, s.unavailable);
      s.unavailable = s.unavailable.empty() ? "no reason" : s.unavailable.substr(1);
      break;
    }
    GpuReading g;
    unsigned long long used = 0, total = 0;
    double p = 0, l = 0;
    if (std::sscanf(tok.c_str(), "%u:%u:%lf:%lf:%llu:%llu", &g.index, &g.util, &p, &l, &used, &total) != 6)
      return Status::InvalidArgument("watch line: bad GPU field '" + tok.substr(0, 40) + "'");
    g.power_w = p;
    g.limit_w = l;
    g.mem_used_mib = used;
    g.mem_total_mib = total;
    if (s.gpus.size() < 64) s.gpus.push_back(g);
  }
  return s;
}

GpuState ClassifyNode(const std::vector<GpuReading>& gpus, const WatchThresholds& t) {
  if (gpus.empty()) return GpuState::kUnknown;
  std::optional<GpuState> all;
  for (const auto& g : gpus) {
    GpuState s = GpuState::kMixed;
    if (g.util <= t.idle_percent) s = GpuState::kIdle;
    else if (g.util >= t.busy_percent)
      s = g.limit_w > 0 && g.power_w < t.spin_power_fraction * g.limit_w ? GpuState::kSpinning : GpuState::kBusy;
    if (all && *all != s) return GpuState::kMixed;
    all = s;
  }
  return *all;
}

GpuWatchLoop::GpuWatchLoop(const std::string& library, const std::vector<int>& minors, const std::string& node,
                           double interval_s, std::function<void(const std::string&)> say) {
  t_ = std::thread([this, library, minors, node, interval_s, say] {
    std::unique_ptr<GpuSampler> sampler;
    std::string why;
    if (library.empty()) why = "no nvml_library";
    else if (auto s = OpenNvmlSampler(library, minors)) sampler = std::move(*s);
    else why = s.status().message();
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      l.unlock();
      if (sampler) {
        auto r = sampler->Sample();
        say(r ? WatchLine(node, *r) : WatchLineUnavailable(node, r.status().message()));
      } else {
        say(WatchLineUnavailable(node, why));
      }
      l.lock();
      cv_.wait_for(l, std::chrono::milliseconds(static_cast<long>(interval_s * 1000)), [this] { return stop_; });
    }
  });
}

GpuWatchLoop::~GpuWatchLoop() { Stop(); }

void GpuWatchLoop::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (t_.joinable()) t_.join();
}

NodeWatch::NodeWatch(std::vector<std::string> nodes, double interval_s, WatchThresholds t, double start)
    : nodes_(std::move(nodes)), interval_s_(interval_s), t_(t), start_(start) {}

bool NodeWatch::OnLine(const std::string& line, double now) {
  if (line.compare(0, std::string(kWatchLinePrefix).size(), kWatchLinePrefix) != 0) return false;
  auto s = ParseWatchLine(line);
  if (!s) return true;  // ours, malformed: dropped (a node's agent never writes one)
  std::lock_guard<std::mutex> l(mu_);
  if (std::find(nodes_.begin(), nodes_.end(), s->node) == nodes_.end()) return true;
  NodeState& n = state_[s->node];
  n.last = now;
  n.before = n.state;
  n.unavailable = s->unavailable;
  n.state = ClassifyNode(s->gpus, t_);
  if (!s->gpus.empty()) {
    const GpuReading& g = s->gpus.front();
    n.figures = "GPU " + std::to_string(g.index) + " " + std::to_string(g.util) + "% at " + Watts(g.power_w) +
                (g.limit_w > 0 ? " of " + Watts(g.limit_w) : "");
  }
  return true;
}

bool NodeWatch::AnyLine() const {
  std::lock_guard<std::mutex> l(mu_);
  return !state_.empty();
}

HangFinding NodeWatch::Attribute(double now) const {
  std::lock_guard<std::mutex> l(mu_);
  HangFinding f;
  if (state_.empty()) {
    f.line = "GPU watch: no node reported: no node named";
    return f;
  }
  const double silent_after = 3 * interval_s_ + 2;
  std::vector<std::string> silent, idle, spinning, other;
  for (const auto& node : nodes_) {
    auto it = state_.find(node);
    if (it == state_.end() || now - it->second.last > silent_after) {
      if (it != state_.end() || now - start_ > silent_after) silent.push_back(node);
      continue;
    }
    const NodeState& n = it->second;
    // A state holds when the last two samples agree.
    GpuState s = n.state == n.before ? n.state : GpuState::kMixed;
    if (s == GpuState::kIdle) idle.push_back(node + " (" + n.figures + ")");
    else if (s == GpuState::kSpinning) spinning.push_back(node);
    else other.push_back(node);
  }
  std::set<std::string> named;
  if (!silent.empty() && silent.size() < nodes_.size()) {
    for (const auto& n : silent) named.insert(n);
    f.cause = HangCause::kUnresponsive;
    f.line = "GPU watch: no report for over " + std::to_string(static_cast<int>(silent_after)) + " s from " +
             Join(silent, ",") + " (node lost or its agent killed)";
  }
  if (!idle.empty() && !spinning.empty()) {
    for (const auto& d : idle) named.insert(d.substr(0, d.find(' ')));
    f.cause = f.cause == HangCause::kNoReport ? HangCause::kBehind : f.cause;
    f.line += std::string(f.line.empty() ? "GPU watch: " : "; ") + "GPUs idle on " + Join(idle, ", ") +
              " while " + Join(spinning, ",") + (spinning.size() == 1 ? " spins" : " spin") +
              " at low power in a collective " + (idle.size() == 1 ? "it" : "they") + " never reached";
  }
  if (named.empty()) {
    f.cause = spinning.size() == nodes_.size() ? HangCause::kEqualCounts : HangCause::kNoReport;
    f.line = spinning.size() == nodes_.size()
                 ? "GPU watch: every node's GPUs spin at low power (a collective hang; no node behind on its GPUs): no node named"
                 : "GPU watch: no node stands out (" + std::to_string(idle.size()) + " idle, " +
                       std::to_string(spinning.size()) + " spinning, " + std::to_string(other.size()) +
                       " busy or mixed): no node named";
  }
  f.nodes.assign(named.begin(), named.end());
  return f;
}

}  // namespace preflight
