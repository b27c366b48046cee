#include "preflight/node_run.h"

#include <cstdio>

#include "preflight/fsroot.h"

namespace preflight {

NodeRunOutcome RunNode(const Config& cfg, const JobContext& job, Phase phase, bool job_failed,
                       const std::vector<CheckResult>& extra_checks,
                       const std::vector<std::pair<std::string, std::string>>& notes) {
  NodeRunOutcome out;
  Level level = phase == Phase::kProlog ? job.level : Level::kQuick;
  if (phase == Phase::kEpilog && job_failed && job.level == Level::kFull) level = Level::kFull;

  FsRoot fs(cfg.fsroot);
  CheckEnv env{cfg, fs, job, phase, level, job_failed};
  Report& r = out.report;
  r.tool = PhaseName(phase);
  r.node = job.node;
  r.job_id = job.job_id;
  r.level = LevelName(level);
  r.started_unix = NowUnix();
  double t0 = MonotonicSeconds();
  if (level != Level::kOff) r.checks = RunChecks(env);
  r.checks.insert(r.checks.end(), extra_checks.begin(), extra_checks.end());
  r.notes.insert(r.notes.end(), notes.begin(), notes.end());
  r.seconds = MonotonicSeconds() - t0;

  auto path = WriteReport(cfg, r);
  if (path) out.json_path = *path;
  else out.write_status = path.status();

  out.failed = r.Overall() == Verdict::kFail;
  if (out.failed) out.drain_reason = DrainReasonFor(r);
  out.warnings = WarnComment(r);

  char head[256];
  int npass = 0, nskip = 0, nfail = 0, nwarn = 0;
  for (const auto& c : r.checks) {
    if (c.verdict == Verdict::kFail) ++nfail;
    else if (c.verdict == Verdict::kSkip) ++nskip;
    else if (c.verdict == Verdict::kWarn) ++nwarn;
    else ++npass;
  }
  std::snprintf(head, sizeof head,
                "preflight: %s %s on %s: level %s, %d passed, %d skipped, %d failed, %d warned (%.3f s)\n",
                r.tool.c_str(), out.failed ? "FAILED" : "ok", r.node.c_str(), r.level.c_str(), npass, nskip,
                nfail, nwarn, r.seconds);
  out.summary = head;
  for (const auto& c : r.checks) {
    if (c.verdict == Verdict::kPass) continue;
    out.summary += std::string("preflight:   ") + VerdictName(c.verdict) +
                   (c.owner == FaultOwner::kUser ? "[user]" : "") + " " + Describe(c);
    if (!c.threshold.empty() && (c.verdict == Verdict::kFail || c.verdict == Verdict::kWarn))
      out.summary += " (need " + c.threshold + ")";
    out.summary += "\n";
  }
  return out;
}

}  // namespace preflight
