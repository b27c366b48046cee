#include "preflight/rails_check.h"

#include "preflight/placement.h"
#include "preflight/rails.h"
#include "preflight/topo_load.h"

namespace preflight {

std::vector<CheckResult> CheckRailsUp(const CheckEnv& env) {
  CheckResult base;
  base.check = "topo.rails";
  TopoLoadOptions lo;
  lo.write_cache = false;    // the prolog's own refresh writes it
  lo.refresh_sysfs = true;   // port state now, not the cache's
  auto topo = LoadTopologyCached(env.cfg, env.job.node, lo);
  if (!topo) {
    base.verdict = Verdict::kSkip;
    base.message = "skipped: no topology: " + topo.status().message();
    return {base};
  }
  Status rails = ClassifyRails(*topo, env.cfg.topo_rails);
  if (!rails.ok()) {
    base.verdict = Verdict::kFail;
    base.value = "bad topo_rails";
    base.message = rails.message();
    return {base};
  }
  auto placement = PlacementPairing(*topo);
  std::vector<CheckResult> out;
  int n = 0;
  for (const auto& nic : topo->nics) {
    if (nic.role != NicRole::kRail) continue;
    ++n;
    if (nic.usable()) continue;
    std::string gpus;
    for (const auto& p : placement)
      for (const auto& name : p.nics)
        if (name == nic.name) gpus += (gpus.empty() ? "GPU" : ",GPU") + std::to_string(p.gpu);
    std::string ports;
    for (const auto& p : nic.ports) ports += (ports.empty() ? "port " : ", port ") + std::to_string(p.num) + " " + p.state;
    CheckResult r = base;
    r.device = nic.name;
    r.verdict = Verdict::kFail;
    r.value = ports;
    r.threshold = "ACTIVE";
    r.message = "compute rail down (" + ports + ")" + (gpus.empty() ? "" : ", the rail of " + gpus) + "; " +
                nic.role_why;
    out.push_back(r);
  }
  if (out.empty()) {
    base.message = n == 0 ? "skipped: no compute rail" : std::to_string(n) + " compute rail(s) usable";
    base.verdict = n == 0 ? Verdict::kSkip : Verdict::kPass;
    base.value = std::to_string(n);
    out.push_back(base);
  }
  return out;
}

}  // namespace preflight
