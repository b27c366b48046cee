#include "preflight/node_phase.h"

#include <unistd.h>

#include <ctime>
#include <set>

#include "preflight/drain_reason.h"
#include "preflight/fileutil.h"
#include "preflight/gpu_job_map.h"
#include "preflight/log.h"
#include "preflight/rails.h"
#include "preflight/slurm_conf.h"
#include "preflight/state_paths.h"
#include "preflight/topo_load.h"

namespace preflight {

DrainMode PlanDrain(Phase phase, bool set_drain_reason, const Expected<std::vector<std::string>>& prolog_flags) {
  if (phase == Phase::kHealth || !set_drain_reason) return DrainMode::kNone;
  if (prolog_flags && DrainHowFor(*prolog_flags) == DrainHow::kNow) return DrainMode::kNow;
  return DrainMode::kDetached;
}

HealthPlan PlanHealth(bool failed, const std::string& warnings, bool our_comment_set, const NodeState* node) {
  HealthPlan p;
  // warn findings go to the node's Comment (no drain); preflight clears only
  // a comment it set, which it remembers in state_dir.
  if (!warnings.empty()) p.comment = HealthPlan::Comment::kSet;
  else if (our_comment_set) p.comment = HealthPlan::Comment::kClear;
  if (node == nullptr) return p;
  p.drain = failed && !node->drained();
  p.resume = !failed && node->drained() && node->ours();
  return p;
}

std::string FoldStageResult(const StageJobResult& st, NodeRunOutcome* out) {
  out->summary += st.summary;
  if (st.ok) return "";
  if (!st.drain) return "stage: " + st.message;
  DrainReason d;
  d.owner = st.owner == FaultOwner::kConfig ? FaultOwner::kConfig : FaultOwner::kNode;
  d.check = reason_check::kStage;
  d.finding = st.message;
  out->failed = true;
  out->drain_reason = FormatReason(d);
  return "";
}

std::string FoldCkptDirResult(const CkptDirResult& c, NodeRunOutcome* out) {
  for (const auto& w : c.warnings) out->summary += "preflight: ckpt: warning: " + w + "\n";
  if (c.made || c.message.empty()) return "";
  if (!ActionFor(c.owner).drain) return "ckpt: " + c.message + " (the job runs without $PREFLIGHT_CKPT_LOCAL)";
  DrainReason d;
  d.owner = c.owner == FaultOwner::kConfig ? FaultOwner::kConfig : FaultOwner::kNode;
  d.check = reason_check::kCkpt;
  d.finding = c.message;
  out->failed = true;
  out->drain_reason = FormatReason(d);
  return "";
}

namespace {

// At most this many `preflight slurm job` requests per epilog or health
// check (each bounded by probe_timeout); jobs not asked are kept this time.
constexpr size_t kGcAskLimit = 16;

// Prolog: refresh the node's topology cache (hwloc only when stale, sysfs
// port state always) so tasks read it instead of loading hwloc, and write
// the records other parts read. Never fatal.
void PrologTopology(const Config& cfg, const JobContext& job, const EnvMap& env, const char* prog) {
  const std::string& node = job.node;
  auto gpus = env.find("SLURM_JOB_GPUS");
  TopoLoadOptions lo;
  lo.refresh_sysfs = true;
  auto t = LoadTopologyCached(cfg, node, lo);
  if (!t && t.status().code() != Status::Code::kUnavailable)
    Log(LogLevel::kError, prog, "topology cache", t.status().message());
  // Slurm gave the job GPUs here but the topology shows none (hwloc missed
  // them): logged, never fatal (the GPU checks judge the GPUs themselves).
  if (t && gpus != env.end()) {
    std::string w = GpuGresWarning(*t, gpus->second, "");
    if (!w.empty()) Log(LogLevel::kError, prog, "topology (warning, job " + job.job_id + ")", w);
  }
  // This node's rail signature, for the allocation-wide comparison (rails.h).
  if (t && ClassifyRails(*t, cfg.topo_rails).ok()) {
    Status w = WriteRailsRecord(cfg, RailsOf(node, *t));
    if (!w.ok()) Log(LogLevel::kError, prog, "rails record", w.message());
  }
  // The job's GPUs on this node, for the plugin's one-NIC-set-per-node rule
  // (topo.h: JobGpusOnNode): slurmd's SLURM_JOB_GPUS is only this trusted here.
  if (!job.job_id.empty()) {
    Status g = WriteJobGpusRecord(cfg, job.job_id, node, gpus != env.end() ? gpus->second : "");
    if (!g.ok()) Log(LogLevel::kError, prog, "job GPU record", g.message());
  }
}

// dcgm-exporter's GPU-to-job mapping (gpu_job_map.h), when the site names
// its folder: the prolog lists the job for its GPUs here (slurmd's
// SLURM_JOB_GPUS), the epilog removes the job wherever it is listed.
// Logged, never fatal: the labels are for dashboards.
void UpdateGpuJobMap(const Config& cfg, const JobContext& job, Phase phase, const EnvMap& env, const char* prog) {
  if (cfg.dcgm_job_map_dir.empty() || job.job_id.empty()) return;
  Status s;
  if (phase == Phase::kProlog) {
    auto gpus = env.find("SLURM_JOB_GPUS");
    if (gpus == env.end() || gpus->second.empty()) return;  // no GPU of this node
    auto ids = ParseIdList(gpus->second);
    if (!ids) s = ids.status().Context("SLURM_JOB_GPUS='" + gpus->second + "'");
    else s = AddJobToGpuMap(cfg.dcgm_job_map_dir, *ids, job.job_id).status();
  } else if (phase == Phase::kEpilog) {
    s = RemoveJobFromGpuMap(cfg.dcgm_job_map_dir, job.job_id).status();
  }
  if (!s.ok()) Log(LogLevel::kError, prog, "dcgm job map (job " + job.job_id + ")", s.message());
}

}  // namespace

NodeRunOutcome RunNodePhase(const Config& cfg, const JobContext& job, Phase phase, const EnvMap& env, const char* prog) {
  auto exit_code = env.find("SLURM_JOB_EXIT_CODE");
  bool job_failed = phase == Phase::kEpilog && exit_code != env.end() && exit_code->second != "0";
  // Epilog: staging cleanup first (it must happen whatever the checks say),
  // its figures go into the epilog's result.
  UnstageResult unstage;
  if (phase == Phase::kEpilog) {
    unstage = UnstageForJob(cfg, job);
    // The job's checkpoints: the finishing copy, as the job's user, within
    // ckpt_epilog_budget. Whatever it finds is the job's, never the node's.
    CkptEpilogResult ck = FinishCkptForJob(cfg, job);
    if (ck.requested) {
      unstage.checks.push_back(ck.check);
      for (const auto& l : ck.lines) Log(LogLevel::kInfo, prog, "job " + job.job_id, l);
      unstage.notes.push_back({"ckpt.newest_durable", ck.report.round.newest_durable});
      unstage.notes.push_back({"ckpt.bytes_not_durable", std::to_string(ck.report.round.bytes_not_durable)});
      unstage.notes.push_back({"ckpt.removed", ck.removed ? "1" : "0"});
    }
    UpdateGpuJobMap(cfg, job, phase, env, prog);
  }
  NodeRunOutcome out = RunNode(cfg, job, phase, job_failed, unstage.checks, unstage.notes);
  // Keep what preflight leaves per job in bounds (state_keep, state_keep_size;
  // stage views and holds of jobs whose epilog never ran). Never fatal.
  // Whatever looks stale is released only if slurmctld does not list the
  // job as running (job_liveness.h); asked here, never in the prolog.
  if (phase == Phase::kEpilog || phase == Phase::kHealth) {
    double now = static_cast<double>(::time(nullptr));
    std::set<std::string> stepd = LiveSlurmJobs();
    std::set<std::string> ask = StaleStageJobs(cfg, stepd, now);
    for (const auto& j : state::JobsToPrune(cfg, job.job_id, now)) ask.insert(j);
    for (const auto& j : StaleCkptJobs(cfg, job.job_id, now)) ask.insert(j);
    SlurmJobs slurm = AskSlurmJobs(cfg, job.node, ask, kGcAskLimit);
    if (!slurm.answered)
      Log(LogLevel::kError, prog, "gc", "slurmctld could not be asked about " + std::to_string(ask.size()) +
                                            " job(s) that look stale; nothing of theirs released: " + slurm.error);
    state::StateGcResult gc = state::PruneJobState(cfg, job.job_id, now, slurm);
    for (const auto& e : gc.errors) Log(LogLevel::kError, prog, "state gc", e);
    for (const auto& e : gc.left) Log(LogLevel::kError, prog, "state gc", e);
    for (const auto& line : gc.kept_live) Log(LogLevel::kInfo, prog, "state gc", line);
    for (const auto& line : ReleaseStaleJobs(cfg, stepd, slurm, now)) Log(LogLevel::kInfo, prog, "stage", line);
    for (const auto& line : GcCkptJobs(cfg, job.job_id, now, slurm)) Log(LogLevel::kInfo, prog, "ckpt gc", line);
  }
  if (phase != Phase::kProlog) return out;
  // Prolog: stage datasets only on a node that passed its checks. See
  // stage_job.h for which failures fail the job and which drain the node.
  if (!out.failed && !job.job_id.empty()) {
    std::string job_only = FoldStageResult(StageForJob(cfg, job), &out);
    if (!job_only.empty())
      Log(LogLevel::kError, "prolog", "job " + job.job_id + " fails (node stays in service)", job_only);
  }
  // The job's local checkpoint folder (ckpt_dir), on a node that will run
  // it: made by slurmd's prolog (root) only. The same binary run as the
  // user (the node checks of `preflight accept`) makes no job folder.
  if (!out.failed && !job.job_id.empty() && ::geteuid() == 0) {
    CkptDirResult ck = MakeCkptJobDir(cfg, job);
    for (const auto& w : ck.warnings) Log(LogLevel::kInfo, prog, "ckpt", "warning: " + w);
    std::string user_only = FoldCkptDirResult(ck, &out);
    if (!user_only.empty()) Log(LogLevel::kError, prog, "job " + job.job_id + " (node stays in service)", user_only);
  }
  if (cfg.topo_env) PrologTopology(cfg, job, env, prog);
  // Only a job that will run here gets GPU metrics labels.
  if (!out.failed) UpdateGpuJobMap(cfg, job, phase, env, prog);
  if (!job.job_id.empty()) {
    std::string txt = state::JobNodeFile(cfg, job.job_id, job.node, state::kPrologText);
    Status w = WriteFileAtomic(txt, out.summary, 0644);
    if (!w.ok()) Log(LogLevel::kError, prog, "summary file", w.message());
  }
  return out;
}

}  // namespace preflight
