// The cache and state subcommands of `preflight` (cache_cmd.h).
#include "cache_cmd.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>

#include "preflight/hostlist.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/slurmctl.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"

namespace preflight {

namespace {

// The node a `cache` or `state` command acts for: the last word
// `node=NAME` if there is one (taken off `args`), else this host's short
// name. The name becomes a path component (%n in stage_dir, state files),
// so it must be a valid node name; nullopt means refused (logged).
std::optional<std::string> TakeNodeWord(std::vector<std::string>& args, const char* cmd) {
  std::string node = ShortHostname();
  if (!args.empty() && args.back().rfind("node=", 0) == 0) {
    node = args.back().substr(5);
    args.pop_back();
    Status v = ValidNodeName(node);
    if (!v.ok()) {
      Log(LogLevel::kError, cmd, "node=", v.message());
      return std::nullopt;
    }
  }
  return node;
}

bool g_state_dry_run = false;
// state gc's exit status when it ran through but left folders it could not
// remove (each named on stderr): not 1, which says gc could not run.
constexpr int kStateGcLeft = 4;

}  // namespace

void AddStateOptions(po::options_description& desc) {
  desc.add_options()("dry-run", po::bool_switch(&g_state_dry_run), "list what would be removed; remove nothing");
}

// preflight cache ls|gc|rm KEY|SOURCE [--node N]: this node's --stage cache.
// gc trims to stage_cache_quota (leftovers of crashed builds always go);
// rm refuses a dataset a job uses. Node: `--set`/config `%n` expansion uses
// the host's short name unless the last word is `node=NAME`.
int CacheCmd(const std::vector<std::string>& args_in, const CommonCli& cli) {
  std::vector<std::string> args = args_in;
  std::optional<std::string> taken = TakeNodeWord(args, "cache");
  if (!taken) return 2;
  const std::string& node = *taken;
  std::string sub = args.empty() ? "ls" : args[0];
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, "cache", "site config", cfg.status().message());
    return 1;
  }
  if (cfg->stage.dir.empty()) {
    Log(LogLevel::kError, "cache", "no stage_dir in " + (cfg->source.empty() ? std::string("the config") : cfg->source), "staging is disabled");
    return 1;
  }
  StageCacheOptions o = CacheOptionsFor(*cfg);
  if (sub == "ls" && args.size() <= 1) {
    auto list = ListCache(o);
    if (!list) {
      Log(LogLevel::kError, "cache", "ls", list.status().message());
      return 1;
    }
    std::printf("%-16s %10s %9s %-20s %-12s %s\n", "KEY", "BYTES", "FILES", "LAST_USED", "JOBS", "SOURCE");
    for (const auto& e : *list) {
      char when[32] = "-";
      time_t t = static_cast<time_t>(e.last_used);
      if (t > 0) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", std::gmtime(&t));
      std::string jobs;
      for (const auto& j : e.jobs) jobs += (jobs.empty() ? "" : ",") + j;
      if (e.busy) jobs += jobs.empty() ? "(staging)" : ",(staging)";
      std::printf("%-16s %10llu %9llu %-20s %-12s %s\n", e.key.c_str(), static_cast<unsigned long long>(e.bytes),
                  static_cast<unsigned long long>(e.files), when, jobs.empty() ? "-" : jobs.c_str(), e.source.c_str());
    }
    std::printf("total %llu bytes in %zu dataset(s), quota %s\n", static_cast<unsigned long long>(CacheBytes(*list)),
                list->size(), o.quota == UINT64_MAX ? "none" : std::to_string(o.quota).c_str());
    return 0;
  }
  if (sub == "gc" && args.size() <= 1) {
    // Holds of jobs with no slurmstepd left here (slurmd killed before the
    // epilog) would keep their datasets forever: released first, once
    // slurmctld says the job no longer runs here (job_liveness.h).
    double now = static_cast<double>(::time(nullptr));
    std::set<std::string> stepd = LiveSlurmJobs();
    std::set<std::string> stale = StaleStageJobs(*cfg, stepd, now);
    SlurmJobs slurm = AskSlurmJobs(*cfg, node, stale, SIZE_MAX);
    if (!slurm.answered)
      Log(LogLevel::kError, "cache", "gc", "slurmctld could not be asked; no stale job's view or hold released: " + slurm.error);
    for (const auto& line : ReleaseStaleJobs(*cfg, stepd, slurm, now)) std::printf("%s\n", line.c_str());
    std::vector<std::string> removed;
    Status s = TrimCache(o, o.quota, &removed);
    for (const auto& r : removed) std::printf("removed %s\n", r.c_str());
    if (!s.ok()) {
      Log(LogLevel::kError, "cache", "gc", s.message());
      return 1;
    }
    return slurm.answered ? 0 : 1;
  }
  if (sub == "rm" && args.size() >= 2) {
    int rc = 0;
    for (size_t i = 1; i < args.size(); ++i) {
      Status s = RemoveCacheEntry(o, args[i]);
      if (!s.ok()) {
        Log(LogLevel::kError, "cache", "rm " + args[i], s.message());
        rc = 1;
      } else {
        std::printf("removed %s\n", args[i].c_str());
      }
    }
    return rc;
  }
  Log(LogLevel::kError, "cache", "bad arguments", "expected ls, gc or rm KEY|SOURCE... [node=NAME]");
  return 2;
}

// preflight state gc [--dry-run] [node=NAME]: prune state_dir/jobs to
// state_keep and state_keep_size (state_paths.h: PruneJobState), as the
// epilog does after every job.
int StateCmd(const std::vector<std::string>& args_in, const CommonCli& cli) {
  std::vector<std::string> args = args_in;
  std::optional<std::string> taken = TakeNodeWord(args, "state");
  if (!taken) return 2;
  const std::string& node = *taken;
  bool dry = g_state_dry_run;
  if (args.size() != 1 || args[0] != "gc") {
    Log(LogLevel::kError, "state", "bad arguments", "expected: state gc [--dry-run] [node=NAME]");
    return 2;
  }
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, "state", "site config", cfg.status().message());
    return 1;
  }
  // Folders the age and size rules pick go only once slurmctld says the
  // job has ended (job_liveness.h); when it cannot be asked none goes.
  double now = static_cast<double>(::time(nullptr));
  SlurmJobs slurm = AskSlurmJobs(*cfg, node, state::JobsToPrune(*cfg, "", now), SIZE_MAX);
  if (!slurm.answered)
    Log(LogLevel::kError, "state gc", "slurmctld could not be asked; no folder of a job that may run removed: " + slurm.error);
  state::StateGcResult r = state::PruneJobState(*cfg, "", now, slurm, dry);
  for (const auto& line : r.removed) std::printf("%s %s\n", dry ? "would remove" : "removed", line.c_str());
  for (const auto& line : r.kept_live) std::printf("kept %s\n", line.c_str());
  std::string left = r.left.empty() ? "" : "; left " + std::to_string(r.left.size()) + " it could not remove";
  std::printf("kept %zu job folder(s), %llu bytes; %s %llu bytes (state_keep %s, state_keep_size %llu)%s\n", r.kept,
              static_cast<unsigned long long>(r.kept_bytes), dry ? "would free" : "freed",
              static_cast<unsigned long long>(r.removed_bytes), std::to_string(cfg->state_keep_ms / 1000).append("s").c_str(),
              static_cast<unsigned long long>(cfg->state_keep_bytes), left.c_str());
  std::fflush(stdout);
  for (const auto& e : r.errors) Log(LogLevel::kError, "state gc", e);
  for (const auto& e : r.left) Log(LogLevel::kError, "state gc", e);
  if (!r.errors.empty() || !slurm.answered) return 1;
  return r.left.empty() ? 0 : kStateGcLeft;
}

}  // namespace preflight
