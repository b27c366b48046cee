#include "preflight/ib_counters.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <set>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "result_sink.h"

namespace preflight {
namespace {

using checks_internal::U;

const uint64_t* Limit(const std::vector<std::pair<std::string, uint64_t>>& l, const std::string& name) {
  for (const auto& kv : l)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

struct State {
  std::string boot;
  double at = 0;
  std::map<std::string, uint64_t> v;  // "hca/port/counter" -> value
};

State Load(const std::string& path) {
  State s;
  auto t = ReadWholeFile(path);
  if (!t) return s;
  std::istringstream in(*t);
  std::string k;
  while (in >> k) {
    if (k == "boot") in >> s.boot;
    else if (k == "at") in >> s.at;
    else {
      uint64_t v = 0;
      if (in >> v) s.v[k] = v;
    }
  }
  return s;
}

bool ParseCounter(const std::string& text, uint64_t* v) {
  char* end = nullptr;
  *v = std::strtoull(text.c_str(), &end, 10);
  return end != text.c_str();
}

}  // namespace

CheckResult JudgeIbCounters(const std::string& device, const std::vector<CounterDelta>& deltas,
                            const std::vector<std::pair<std::string, uint64_t>>& warn,
                            const std::vector<std::pair<std::string, uint64_t>>& fail, double interval_s,
                            bool windowed) {
  CheckResult r;
  r.check = "ib.counters";
  r.device = device;
  std::string moved, fails, warns, fail_th, warn_th;
  int baselined = 0;
  for (const auto& d : deltas) {
    if (d.baseline) { ++baselined; continue; }
    uint64_t rise = d.rise();
    if (rise == 0) continue;
    moved += (moved.empty() ? "" : ", ") + d.name + " +" + U(rise);
    const uint64_t* f = Limit(fail, d.name);
    const uint64_t* w = Limit(warn, d.name);
    std::string what = d.name + " rose by " + U(rise) + " (" + U(d.before) + " -> " + U(d.now) + ")";
    if (f != nullptr && rise > *f) {
      fails += (fails.empty() ? "" : "; ") + what + " > " + U(*f);
      fail_th += (fail_th.empty() ? "" : ", ") + d.name + " <= " + U(*f);
    } else if (w != nullptr && rise > *w) {
      warns += (warns.empty() ? "" : "; ") + what + " > " + U(*w);
      warn_th += (warn_th.empty() ? "" : ", ") + d.name + " <= " + U(*w);
    }
  }
  char iv[48];
  std::snprintf(iv, sizeof iv, windowed ? " in the last %.0f s (ib_counter_window)" : " in %.0f s since the last check",
                interval_s);
  r.value = moved.empty() ? "no error counter rose" : moved;
  if (!fails.empty()) {
    r.verdict = Verdict::kFail;
    r.threshold = fail_th + " per check (ib_counter_fail)";
    r.message = fails + iv;
  } else if (!warns.empty()) {
    r.verdict = Verdict::kWarn;
    r.threshold = warn_th + " per check (ib_counter_warn)";
    r.message = warns + iv;
  } else if (baselined == static_cast<int>(deltas.size())) {
    r.threshold = "ib_counter_warn, ib_counter_fail";
    r.message = "baseline: " + U(deltas.size()) + " counters recorded (first check this boot)";
  } else {
    r.threshold = "ib_counter_warn, ib_counter_fail";
    r.message = moved.empty() ? "no error counter rose" + std::string(iv) : moved + " (within thresholds)";
  }
  return r;
}

std::vector<CheckResult> CheckIbCounters(const CheckEnv& env) {
  const Config& c = env.cfg;
  checks_internal::Sink sink;
  const CheckResult none = checks_internal::Make("ib.counters", "node");
  const std::string cls = "/sys/class/infiniband";
  auto found = env.fs.ListDir(cls);
  if (!found || found->empty()) {
    return {checks_internal::Skip(none, "no HCA on this node")};
  }
  if (c.ib_counter_warn.empty() && c.ib_counter_fail.empty()) {
    return {checks_internal::Skip(none, "no counter thresholds (ib_counter_warn and ib_counter_fail are empty)")};
  }
  if (env.job.node.empty()) {
    return {checks_internal::Skip(none, "no node name to keep counters under")};
  }
  std::set<std::string> names;
  for (const auto& kv : c.ib_counter_warn) names.insert(kv.first);
  for (const auto& kv : c.ib_counter_fail) names.insert(kv.first);

  auto boot = env.fs.ReadFile("/proc/sys/kernel/random/boot_id");
  std::string boot_id = boot ? *boot : "unknown";
  std::string state_path = state::NodeFile(c, env.job.node, state::kIbCounters);
  State prev = Load(state_path);
  if (prev.boot != boot_id) prev = State{};
  State now;
  now.boot = boot_id;
  now.at = static_cast<double>(std::time(nullptr));
  double interval = prev.at > 0 ? now.at - prev.at : 0;
  // Rises are counted from the base taken at the start of the window: a
  // check every minute must not hide a cable that gains a few errors each
  // time. The window's last check judges it whole, then takes a new base.
  // ib_counter_window 0: a new base at every check (rises per check).
  double window_s = c.ib_counter_window_ms / 1000.0;
  bool rebase = c.ib_counter_window_ms == 0 || prev.at == 0 || interval >= window_s;
  State base;  // what is written: the new base, or the kept one
  base.boot = boot_id;
  base.at = rebase ? now.at : prev.at;

  std::vector<std::string> hcas = c.ib_hcas.empty() ? *found : c.ib_hcas;
  for (const auto& hca : hcas) {
    if (std::find(found->begin(), found->end(), hca) == found->end()) continue;  // ib.present reports it
    auto ports = env.fs.ListDir(cls + "/" + hca + "/ports");
    if (!ports) continue;  // ib.port reports it
    for (const auto& port : *ports) {
      std::string pb = cls + "/" + hca + "/ports/" + port, dev = hca + " port " + port;
      double t0 = MonotonicSeconds();
      ProbeStep("ib.counters", dev, "read " + env.fs.HostPath(pb) + "/{counters,hw_counters}");
      std::vector<CounterDelta> deltas;
      std::string unreadable;
      for (const auto& n : names) {
        auto t = env.fs.ReadFile(pb + "/counters/" + n);
        if (!t) t = env.fs.ReadFile(pb + "/hw_counters/" + n);
        if (!t) continue;  // this HCA/driver does not have it
        CounterDelta d;
        d.name = n;
        if (!ParseCounter(*t, &d.now)) {
          unreadable += (unreadable.empty() ? "" : ", ") + n + "='" + *t + "'";
          continue;
        }
        std::string key = hca + "/" + port + "/" + n;
        now.v[key] = d.now;
        auto it = prev.v.find(key);
        d.baseline = it == prev.v.end() || it->second > d.now;
        if (!d.baseline) d.before = it->second;
        base.v[key] = rebase || d.baseline ? d.now : it->second;
        deltas.push_back(d);
      }
      CheckResult r;
      if (!unreadable.empty()) {
        r.check = "ib.counters";
        r.device = dev;
        r.verdict = Verdict::kFail;
        r.value = "unreadable";
        r.threshold = "numeric counters";
        r.message = "cannot parse counters " + unreadable + " under " + env.fs.HostPath(pb);
      } else if (deltas.empty()) {
        r.check = "ib.counters";
        r.device = dev;
        r.verdict = Verdict::kSkip;
        r.message = "skipped: none of the thresholded counters exist under " + env.fs.HostPath(pb);
      } else {
        r = JudgeIbCounters(dev, deltas, c.ib_counter_warn, c.ib_counter_fail, interval, c.ib_counter_window_ms != 0);
      }
      r.seconds = MonotonicSeconds() - t0;
      sink(r);
    }
  }
  std::string text = "boot " + boot_id + "\nat " + std::to_string(static_cast<long long>(base.at)) + "\n";
  for (const auto& kv : base.v) text += kv.first + " " + U(kv.second) + "\n";
  Status w = MakeDirs(state::NodesDir(c), 0755);
  if (w.ok()) w = WriteFileAtomic(state_path, text, 0644);
  if (!w.ok()) {
    CheckResult r = none;
    r.verdict = Verdict::kFail;
    r.message = "cannot keep port counters: " + w.message();
    sink(r);
  }
  return std::move(sink.out);
}

}  // namespace preflight
