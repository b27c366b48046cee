#include "run_tiers.h"

#include <cstdio>
#include <set>

#include "preflight/checkpoint.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"
#include "preflight/process.h"
#include "preflight/slurmctl.h"
#include "preflight/strings.h"

namespace preflight::run_internal {

// The command ended and will not be requeued: the agents stop (their last
// round), then this run's copies that a newer commit overtook go
// (RemoveOvertakenCopies), said in one line. After a requeue only the
// agents stop: the grace time is short, and the next run cleans.
void EndTiers(Tiers& t) {
  if (t.agent) t.agent->Finish();
  if (!t.on || t.local_dir.empty()) return;
  auto gone = RemoveOvertakenCopies(t.local_dir, t.plan, t.node);
  if (!gone)
    Log(LogLevel::kError, "run", "removing overtaken copies from " + t.plan.tier, gone.status().message());
  else if (!gone->empty())
    std::fprintf(stderr, "preflight: run: removed %zu unfinished cop%s overtaken by a newer durable checkpoint from %s\n",
                 gone->size(), gone->size() == 1 ? "y" : "ies", t.plan.tier.c_str());
  t.on = false;
}

Tiers StartTiers(const Config& cfg, const RunPolicy& p, const EnvMap& env, const std::string& node, std::string* resume,
                 const std::function<bool(const std::string&)>& on_line) {
  Tiers t;
  CkptPlan plan;
  if (!p.persist_to.empty()) {
    auto built = BuildCkptPlan(cfg, p, env);
    Status made = built ? MakeDirs(p.persist_to, 0700) : built.status();
    if (made.ok()) {
      plan = *built;
      t.on = true;
    } else {
      Log(LogLevel::kError, "run", "shared tier " + p.persist_to, made.message() + ": not persisting checkpoints");
    }
  }
  if (t.on)
    for (const auto& line : CleanEarlierRuns(plan, [&cfg](const std::set<std::string>& jobs) {
           return AskSlurmJobs(cfg, "", jobs, kCleanAskLimit);
         }))
      std::fprintf(stderr, "%s\n", line.c_str());
  CkptConventionSpec spec = t.on ? plan.ConventionFor(node) : CkptConventionSpec{p.convention, p.checkpoint_marker, true};
  // One node's local view says nothing about the other nodes' parts.
  const bool allow_local = !t.on || plan.nodes.size() == 1;
  auto choice = ChooseRunResume(p, t.on ? plan.tier : "", spec, allow_local);
  if (choice) {
    for (const auto& line : choice->Lines()) std::fprintf(stderr, "%s\n", line.c_str());
    if (choice->found) *resume = choice->chosen.path;
  } else {
    Log(LogLevel::kError, "run", "looking for a checkpoint to resume from", choice.status().message());
  }
  if (!t.on) return t;
  t.plan = plan;
  t.local_dir = p.checkpoint_dir;
  t.node = node;
  auto argv = PersistAgentArgv(p.self_exe.empty() ? SelfExe() : p.self_exe, p.config_path, p.config_sets, p,
                               plan.nodes.size());
  auto agent = PersistAgent::Start(argv, on_line);
  if (agent) t.agent = std::move(*agent);
  else Log(LogLevel::kError, "run", "node agent not started", agent.status().message() + " (" + Join(argv, " ") + ")");
  return t;
}

void Prune(const RunPolicy& p) {
  if (p.keep_checkpoints == 0) return;
  auto d = PruneCheckpoints(p.checkpoint_dir, p.checkpoint_marker, p.keep_checkpoints);
  if (!d) {
    Log(LogLevel::kError, "run", "checkpoint pruning", d.status().message());
    return;
  }
  for (const auto& path : *d) Log(LogLevel::kInfo, "run", "deleted old checkpoint " + path);
}

}  // namespace preflight::run_internal
