#include "preflight/pairing_check.h"

#include <cstdlib>

#include "preflight/placement.h"
#include "preflight/topo_load.h"
#include "preflight/strings.h"

namespace preflight {

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
