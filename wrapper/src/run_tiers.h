// preflight-run's checkpoint tiers inside RunJob (run_job.cc): the resume
// choice across the local folder and the shared tier, the node agent that
// persists to the tier, and local pruning. Private to wrapper/src.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "preflight/config.h"
#include "preflight/run_persist.h"
#include "preflight/run_policy.h"

namespace preflight::run_internal {

// The two tiers (run_persist.h): the resume choice across them, then the
// checkpoint agent when there is a shared tier. Errors here never stop the
// job: they are said, and the job runs on without persisting.
struct Tiers {
  bool on = false;  // a shared tier, persisted to by `agent`
  std::unique_ptr<PersistAgent> agent;
  CkptPlan plan;
  std::string local_dir, node;
};

// With a shared tier (--persist-to) or a framework convention: the plan,
// the earlier runs' leftovers cleaned, the resume chosen across the tiers
// (into *resume; lines said on stderr) and the node agent started.
Tiers StartTiers(const Config& cfg, const RunPolicy& p, const EnvMap& env, const std::string& node, std::string* resume,
                 const std::function<bool(const std::string&)>& on_line);
// The command ended and will not be requeued: see run_tiers.cc.
void EndTiers(Tiers& t);
// Local retention (--keep): the oldest complete checkpoints beyond it go.
void Prune(const RunPolicy& p);

}  // namespace preflight::run_internal
