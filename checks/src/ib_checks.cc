// InfiniBand / RoCE port checks from sysfs (ib_checks.h:
// CheckInterconnect): presence, state, rate, link layer, flapping, and a
// RoCE port's netdev. One function per finding; CheckInterconnect walks the
// HCAs and ports.
#include "preflight/ib_checks.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "result_sink.h"

namespace preflight {
namespace {

using namespace checks_internal;

const char* const kIbClass = "/sys/class/infiniband";

std::string FirstWordAfterColon(const std::string& s) {
  // "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp"
  size_t c = s.find(':');
  std::string v = c == std::string::npos ? s : s.substr(c + 1);
  size_t b = v.find_first_not_of(' ');
  return b == std::string::npos ? "" : v.substr(b);
}

// One port's sysfs files, read together (their cost is shared by its results).
struct PortFiles {
  std::string dev, path;  // "mlx5_0 port 1", ".../ports/1"
  Expected<std::string> state{Status::NotFound("")}, phys{Status::NotFound("")}, rate{Status::NotFound("")},
      layer{Status::NotFound("")}, downed{Status::NotFound("")};
  double seconds = 0;  // per result
};

PortFiles ReadPort(const CheckEnv& env, const std::string& hca, const std::string& port) {
  PortFiles f;
  f.dev = hca + " port " + port;
  f.path = std::string(kIbClass) + "/" + hca + "/ports/" + port;
  double t0 = MonotonicSeconds();
  ProbeStep("ib.port", f.dev, "read " + env.fs.HostPath(f.path));
  f.state = env.fs.ReadFile(f.path + "/state");
  f.phys = env.fs.ReadFile(f.path + "/phys_state");
  f.rate = env.fs.ReadFile(f.path + "/rate");
  f.layer = env.fs.ReadFile(f.path + "/link_layer");
  f.downed = env.fs.ReadFile(f.path + "/counters/link_downed");
  f.seconds = (MonotonicSeconds() - t0) / 5;
  return f;
}

CheckResult PortState(const PortFiles& f) {
  CheckResult p = Make("ib.port", f.dev);
  p.seconds = f.seconds;
  p.threshold = "ACTIVE/LinkUp";
  if (!f.state || !f.phys) {
    p.verdict = Verdict::kFail;
    p.value = "unreadable";
    p.message = (!f.state ? f.state.status() : f.phys.status()).message();
    return p;
  }
  std::string s = FirstWordAfterColon(*f.state), ph = FirstWordAfterColon(*f.phys);
  p.value = s + "/" + ph;
  if (s != "ACTIVE" || ph != "LinkUp") {
    p.verdict = Verdict::kFail;
    p.message = "port " + p.value + ", need ACTIVE/LinkUp";
  } else {
    p.message = "port ACTIVE/LinkUp";
  }
  return p;
}

CheckResult PortRate(const CheckEnv& env, const PortFiles& f) {
  const Config& c = env.cfg;
  CheckResult rr = Make("ib.rate", f.dev);
  rr.seconds = f.seconds;
  if (!f.rate) {
    rr.verdict = Verdict::kFail;
    rr.value = "unreadable";
    rr.message = f.rate.status().message();
    return rr;
  }
  char* end = nullptr;
  double gbps = std::strtod(f.rate->c_str(), &end);
  rr.value = *f.rate;
  rr.threshold = c.ib_rate != 0 ? ">= " + U(c.ib_rate) + " Gb/sec" : "any";
  if (end == f.rate->c_str()) {
    rr.verdict = Verdict::kFail;
    rr.message = "cannot parse rate '" + *f.rate + "' in " + env.fs.HostPath(f.path + "/rate");
  } else if (c.ib_rate != 0 && gbps < static_cast<double>(c.ib_rate)) {
    rr.verdict = Verdict::kFail;
    rr.message = "rate " + *f.rate + " < " + U(c.ib_rate) + " Gb/sec";
  } else {
    rr.message = "rate " + *f.rate;
  }
  return rr;
}

CheckResult PortLinkLayer(const Config& c, const PortFiles& f) {
  CheckResult ll = Make("ib.link_layer", f.dev);
  ll.seconds = f.seconds;
  ll.threshold = LinkLayerName(c.ib_link_layer);
  if (!f.layer) {
    ll.verdict = Verdict::kFail;
    ll.value = "unreadable";
    ll.message = f.layer.status().message();
    return ll;
  }
  ll.value = *f.layer;
  if (c.ib_link_layer != LinkLayer::kAny && *f.layer != ll.threshold) {
    ll.verdict = Verdict::kFail;
    ll.message = "link layer " + *f.layer + ", expected " + ll.threshold;
  } else {
    ll.message = "link layer " + *f.layer;
  }
  return ll;
}

// link_downed against the previous check's value (`prev`); records the
// current one in `now`.
CheckResult PortFlapping(const PortFiles& f, const std::string& key, const std::map<std::string, uint64_t>& prev,
                         std::map<std::string, uint64_t>* now) {
  CheckResult fl = Make("ib.flapping", f.dev);
  fl.seconds = f.seconds;
  fl.threshold = "link_downed unchanged";
  if (!f.downed) return Skip(fl, "no link_downed counter: " + f.downed.status().message());
  uint64_t v = std::strtoull(f.downed->c_str(), nullptr, 10);
  (*now)[key] = v;
  fl.value = "link_downed " + U(v);
  auto it = prev.find(key);
  if (it != prev.end() && v > it->second) {
    fl.verdict = Verdict::kFail;
    fl.message = "link went down " + U(v - it->second) + " times since last check (link_downed " + U(it->second) +
                 " -> " + U(v) + ")";
  } else {
    fl.message = it == prev.end() ? "link_downed " + U(v) + " (first check)" : "link_downed unchanged at " + U(v);
  }
  return fl;
}

// RoCE: the port's Ethernet netdev must be up too.
CheckResult RoceNetdev(const CheckEnv& env, const std::string& hca, const PortFiles& f) {
  std::string base = std::string(kIbClass) + "/" + hca;
  CheckResult nd = Make("ib.netdev", f.dev);
  nd.threshold = "up";
  auto nets = env.fs.ListDir(base + "/device/net");
  if (!nets || nets->empty()) {
    nd.verdict = Verdict::kFail;
    nd.value = "none";
    nd.message = "no netdev for RoCE port under " + env.fs.HostPath(base + "/device/net");
    return nd;
  }
  std::string bad, vals;
  for (const auto& n : *nets) {
    auto op = env.fs.ReadFile("/sys/class/net/" + n + "/operstate");
    std::string o = op ? *op : "unreadable";
    vals += (vals.empty() ? "" : ",") + n + "=" + o;
    if (o != "up") bad += (bad.empty() ? "" : ", ") + n + " is " + o;
  }
  nd.value = vals;
  if (!bad.empty()) {
    nd.verdict = Verdict::kFail;
    nd.message = "RoCE netdev not up: " + bad;
  } else {
    nd.message = "netdev " + vals;
  }
  return nd;
}

}  // namespace

std::vector<CheckResult> CheckInterconnect(const CheckEnv& env) {
  const Config& c = env.cfg;
  Sink sink;
  const std::string cls = kIbClass;
  ProbeStep("ib.present", "", "list " + env.fs.HostPath(cls));
  auto found = env.fs.ListDir(cls);
  std::vector<std::string> hcas = found ? *found : std::vector<std::string>{};
  if (hcas.empty() && c.ib_hcas.empty()) {
    sink(Skip(Make("ib.present", "node"),
              "no HCA on this node (" + (found ? env.fs.HostPath(cls) + " is empty" : found.status().message()) + ")"));
    return std::move(sink.out);
  }
  std::vector<std::string> check = c.ib_hcas.empty() ? hcas : c.ib_hcas;
  for (const auto& want : c.ib_hcas) {
    CheckResult r = Make("ib.present", want);
    r.threshold = "present";
    if (std::find(hcas.begin(), hcas.end(), want) == hcas.end()) {
      r.verdict = Verdict::kFail;
      r.value = "missing";
      r.message = "expected HCA missing from " + env.fs.HostPath(cls);
    } else {
      r.value = "present";
      r.message = "present";
    }
    sink(r);
  }

  // Previous link_downed counters, to tell a flapping link from a stable one.
  std::string state_path = state::NodeFile(c, env.job.node, state::kIb);
  std::map<std::string, uint64_t> prev, now;
  if (auto t = ReadWholeFile(state_path)) {
    std::istringstream in(*t);
    std::string k;
    uint64_t v;
    while (in >> k >> v) prev[k] = v;
  }

  for (const auto& hca : check) {
    if (std::find(hcas.begin(), hcas.end(), hca) == hcas.end()) continue;  // reported above
    std::string base = cls + "/" + hca;
    auto ports = env.fs.ListDir(base + "/ports");
    if (!ports || ports->empty()) {
      CheckResult r = Make("ib.port", hca);
      r.verdict = Verdict::kFail;
      r.value = "no ports";
      r.message = ports ? "no ports under " + env.fs.HostPath(base + "/ports") : ports.status().message();
      sink(r);
      continue;
    }
    for (const auto& port : *ports) {
      PortFiles f = ReadPort(env, hca, port);
      sink(PortState(f));
      sink(PortRate(env, f));
      sink(PortLinkLayer(c, f));
      CheckResult fl = PortFlapping(f, hca + "/" + port, prev, &now);
      sink(fl);
      if (f.layer && *f.layer == "Ethernet") sink(RoceNetdev(env, hca, f));
    }
  }
  if (!now.empty() && !env.job.node.empty()) {
    std::string out;
    for (const auto& kv : now) out += kv.first + " " + U(kv.second) + "\n";
    Status w = MakeDirs(state::NodesDir(c), 0755);
    if (w.ok()) w = WriteFileAtomic(state_path, out, 0644);
    if (!w.ok()) {
      CheckResult r = Make("ib.flapping", "node");
      r.verdict = Verdict::kFail;
      r.message = "cannot keep link counters: " + w.message();
      sink(r);
    }
  }
  return std::move(sink.out);
}

}  // namespace preflight
