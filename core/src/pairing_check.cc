#include "preflight/pairing_check.h"

#include <cstdlib>

#include "preflight/topo_load.h"

namespace preflight {

namespace {

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

Expected<ExpectedPairing> ParseExpectedPairing(const std::string& text) {
  ExpectedPairing out;
  if (text.empty()) return out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t comma = text.find(',', i);
    std::string item = text.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      return Status::InvalidArgument("bad pairing '" + item + "' (expected GPU:NIC[+NIC], e.g. 0:mlx5_0)");
    char* end = nullptr;
    long gpu = std::strtol(item.c_str(), &end, 10);
    if (end != item.c_str() + colon || gpu < 0 || gpu > 4096)
      return Status::InvalidArgument("bad GPU index in '" + item + "'");
    for (const auto& p : out)
      if (p.first == gpu) return Status::InvalidArgument("GPU " + std::to_string(gpu) + " given twice");
    std::vector<std::string> nics;
    std::string rest = item.substr(colon + 1);
    size_t j = 0;
    while (j <= rest.size()) {
      size_t plus = rest.find('+', j);
      std::string nic = rest.substr(j, plus == std::string::npos ? std::string::npos : plus - j);
      if (nic.empty()) return Status::InvalidArgument("empty NIC name in '" + item + "'");
      nics.push_back(nic);
      if (plus == std::string::npos) break;
      j = plus + 1;
    }
    out.emplace_back(static_cast<int>(gpu), nics);
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return out;
}

std::string ExpectedPairingText(const std::vector<GpuPairing>& pairing) {
  std::string s;
  for (const auto& p : pairing) {
    if (p.nics.empty()) continue;
    s += (s.empty() ? "" : ",") + std::to_string(p.gpu) + ":" + Join(p.nics, "+");
  }
  return s;
}

std::vector<GpuPairing> PlacementPairing(Topology topo) {
  for (auto& nic : topo.nics)
    for (auto& port : nic.ports) port.state.clear();  // "unknown" counts as usable
  return PairGpus(topo);
}

std::vector<CheckResult> CheckPairing(const CheckEnv& env) {
  CheckResult skip;
  skip.check = "topo.pairing";
  skip.verdict = Verdict::kSkip;
  auto expected = ParseExpectedPairing(env.cfg.topo_expect);
  if (!expected || expected->empty()) {
    skip.message = expected ? "skipped: no topo_expect configured" : "skipped: " + expected.status().message();
    return {skip};
  }
  TopoLoadOptions lo;
  lo.write_cache = false;  // the prolog's own refresh writes it; checks only read
  auto topo = LoadTopologyCached(env.cfg, env.job.node, lo);
  if (!topo) {
    skip.message = "skipped: no topology: " + topo.status().message();
    return {skip};
  }
  // The same rails as the plugin's and `preflight topo`'s, so the pinned
  // line they print is what this compares against.
  Status rails = ClassifyRails(*topo, env.cfg.topo_rails);
  if (!rails.ok()) {
    CheckResult r;
    r.check = "topo.pairing";
    r.verdict = Verdict::kFail;
    r.value = "bad topo_rails";
    r.message = rails.message();
    return {r};
  }
  std::vector<GpuPairing> actual = PlacementPairing(*topo);
  std::vector<CheckResult> out;
  for (const auto& want : *expected) {
    CheckResult r;
    r.check = "topo.pairing";
    r.device = "GPU" + std::to_string(want.first);
    r.threshold = Join(want.second, "+");
    const GpuPairing* got = nullptr;
    for (const auto& p : actual)
      if (p.gpu == want.first) got = &p;
    for (const auto& g : topo->gpus)
      if (g.index == want.first) r.device += " " + g.busid;
    if (got == nullptr) {
      r.verdict = Verdict::kFail;
      r.value = "absent";
      r.message = "GPU" + std::to_string(want.first) + " not in the topology (expected next to " + r.threshold + ")";
    } else {
      r.value = got->nics.empty() ? "no NIC" : Join(got->nics, "+") + " " + PathClassName(got->cls);
      if (got->nics != want.second) {
        r.verdict = Verdict::kFail;
        r.message = "closest NIC is " + r.value + ", expected " + r.threshold + " (card moved or re-enumerated?)";
      } else {
        r.message = "next to " + r.value;
      }
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace preflight
