#include "preflight/collective_run.h"

#include "allocation_steps.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/gemm_record.h"
#include "preflight/json.h"
#include "preflight/pairs.h"
#include "preflight/severity.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight::collective {

using allocation_internal::NodeComparisons;
using allocation_internal::Prefixed;
using allocation_internal::Srun;

// --- allocation orchestration ------------------------------------------------------------
namespace {

// preflight-nccl's argv for one step: level, scope, and the caller's
// --config and --set overrides, carried whole.
std::vector<std::string> NcclArgs(const Config& cfg, const Allocation& a, Level level, Scope scope) {
  std::vector<std::string> v = {cfg.nccl.binary, "--level", LevelName(level), "--scope", ScopeName(scope)};
  // Full: the collectives jobs spend their time in (all-gather and
  // reduce-scatter for sharded data parallelism, all-to-all for experts)
  // beside the all-reduce; ring pairs stay all-reduce figures.
  if (level == Level::kFull && scope != Scope::kPairs) v.insert(v.end(), {"--ops", "all"});
  if (!a.config_path.empty()) { v.push_back("--config"); v.push_back(a.config_path); }
  for (const auto& kv : a.sets) { v.push_back("--set"); v.push_back(kv); }
  return v;
}

std::string Indent(const std::string& text) {
  std::string out, line;
  for (char c : text) {
    line += c;
    if (c == '\n') { out += "  " + line; line.clear(); }
  }
  if (!line.empty()) out += "  " + line + "\n";
  return out;
}

}  // namespace

namespace allocation_internal {

std::vector<std::string> Srun(const Config& cfg, const std::vector<std::string>& nodes, int per_node, bool pmix) {
  std::vector<std::string> v = {cfg.nccl.srun};
  if (pmix) v.push_back("--mpi=pmix");
  // --overcommit: one rank per GPU even when the job holds fewer CPUs than
  // GPUs on a node (sbatch -N4 --gres=gpu:8 allocates 1 CPU per node).
  v.insert(v.end(), {"--overlap", "--overcommit", "--kill-on-bad-exit=1", "--job-name=preflight-nccl", "-N",
                     std::to_string(nodes.size()), "-n", std::to_string(nodes.size() * per_node),
                     "--ntasks-per-node=" + std::to_string(per_node), "-w", Join(nodes, ",")});
  return v;
}

}  // namespace allocation_internal

// What the check's srun steps may inherit from the batch job: an allow-list.
// Every other SLURM_*/SBATCH_*/SRUN_* variable is a step option srun reads
// from the environment (SLURM_TRES_PER_TASK, SLURM_TRES_BIND,
// SLURM_GPUS_PER_TASK, SLURM_NTASKS_PER_CORE, SLURM_CPUS_PER_GPU, ...): with
// the job's --gpus-per-task=2 the check's ranks got overlapping GPUs
// ("Not enough gres to bind 2 per task" on 24.11), so none of them passes,
// nor does the batch step's own CUDA_VISIBLE_DEVICES/GPU binding.
std::vector<std::string> LaunchEnv(const std::vector<std::string>& job_env, bool intra) {
  static const char* kExact[] = {
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "LD_LIBRARY_PATH",
      // srun finds the allocation (and the cluster, with federation or
      // multiple clusters) by these; -N, -n, -w and the rest are explicit.
      "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CONF", "SLURM_CLUSTER_NAME", "SLURM_WORKING_CLUSTER"};
  static const char* kPrefix[] = {
      "LC_",
      // The job's communication settings are what the check must measure.
      "NCCL_", "UCX_", "FI_", "RCCL_",
      // The job's own --nccl-check/--preflight-env choices for the plugin
      // in the check's steps (spank_job_control_setenv, option env).
      "SLURM_SPANK_", "_SLURM_SPANK_OPTION_", "SPANK_",
      "PREFLIGHT_"};
  std::vector<std::string> env;
  for (const auto& kv : job_env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (name == kIntraStepEnv) continue;  // set below, for the intra-node step only
    bool keep = false;
    for (const char* e : kExact) keep = keep || name == e;
    for (const char* p : kPrefix) keep = keep || name.rfind(p, 0) == 0;
    if (keep) env.push_back(kv);
  }
  if (intra) env.push_back(std::string(kIntraStepEnv) + "=intra");
  return env;
}

std::vector<size_t> InterNodeSuspects(size_t n, const std::vector<bool>& pair_failed) {
  std::vector<size_t> out;
  if (n < 3 || pair_failed.size() != n) return out;
  bool all = true;
  for (bool f : pair_failed) all &= f;
  if (all) return out;  // every link slow: no single node to blame
  for (size_t i = 0; i < n; ++i)
    if (pair_failed[i] && pair_failed[(i + n - 1) % n]) out.push_back(i);  // pairs (i-1,i) and (i,i+1)
  return out;
}

std::string RequeueNote(const AllocationOutcome& o, const std::vector<std::string>& nodes, const std::string& restarts) {
  std::string s = "preflight: nccl check failed at start " + restarts + " on " + Join(nodes, ",") + ": ";
  std::vector<std::string> slow;
  if (o.straggler_mode == "on")
    for (const auto& st : o.stragglers.stragglers)
      if (std::find(o.drained.begin(), o.drained.end(), st.node) == o.drained.end()) slow.push_back(st.node);
  if (!o.drained.empty()) s += "drained " + Join(o.drained, ",");
  if (!slow.empty()) s += (o.drained.empty() ? "" : "; ") + std::string("straggler ") + Join(slow, ",");
  if (o.drained.empty() && slow.empty()) s += "no single node at fault";
  s += o.requeue ? "; requeued without " + Join(o.Excluded(), ",") : "; job failed";
  return s;
}

std::vector<std::string> AllocationOutcome::Excluded() const {
  std::vector<std::string> out = drained;
  if (straggler_mode == "on")
    for (const auto& s : stragglers.stragglers)
      if (std::find(out.begin(), out.end(), s.node) == out.end()) out.push_back(s.node);
  return out;
}

std::string StragglerDrainReason(const Straggler& s) {
  char frac[32];
  std::snprintf(frac, sizeof frac, "%g", s.fraction);
  std::string fig = s.figure > 0 ? RateText(s.figure) : std::string("none");
  DrainReason d;
  d.check = reason_check::kNcclStraggler;  // "nccl.straggler"
  d.device = s.node;
  d.finding = s.basis + " " + fig + " < " + frac + " x median " + RateText(s.median);
  d.figure = fig;
  d.threshold = std::string(">= ") + frac + " x " + RateText(s.median);
  return FormatReason(d);
}

std::string AllocationOutcomeJson(const AllocationOutcome& o, const std::vector<std::string>& nodes) {
  JsonWriter w(true);
  w.BeginObject();
  w.Field("passed", o.passed);
  w.Key("nodes").BeginArray();
  for (const auto& n : nodes) w.String(n);
  w.EndArray();
  w.Field("busbw_Bps", o.busbw);
  w.Field("threshold_Bps", o.threshold);
  w.Key("pairs").BeginArray();
  for (const auto& p : o.pairs) {
    w.BeginObject();
    w.Field("nodes", p.nodes.size() == 2 ? p.nodes[0] + "-" + p.nodes[1] : std::string());
    w.Field("verdict", p.pass ? "pass" : "fail");
    w.Field("busbw_Bps", p.busbw);
    w.Key("samples_Bps").BeginArray();
    for (double x : p.samples) w.Number(x);
    w.EndArray();
    w.Field("message", p.message);
    w.EndObject();
  }
  w.EndArray();
  w.Key("straggler").BeginObject();
  w.Field("mode", o.straggler_mode.empty() ? std::string("not run") : o.straggler_mode);
  w.Field("median_Bps", o.stragglers.median);
  w.Field("fabric_wide", o.stragglers.fabric_wide);
  if (!o.stragglers.slow_link.empty()) w.Field("slow_link", o.stragglers.slow_link);
  w.Key("nodes").BeginArray();
  for (const auto& s : o.stragglers.stragglers) {
    w.BeginObject();
    w.Field("node", s.node);
    w.Field("basis", s.basis);
    w.Field("figure_Bps", s.figure);
    w.Field("median_Bps", s.median);
    w.Field("fraction", s.fraction);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("drained").BeginArray();
  for (const auto& n : o.drained) w.String(n);
  w.EndArray();
  w.Key("suspects").BeginArray();
  for (const auto& n : o.suspects) w.String(n);
  w.EndArray();
  w.Field("requeue", o.requeue);
  w.Key("excluded").BeginArray();
  for (const auto& n : o.Excluded()) w.String(n);
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

namespace {

// One --nccl-check's orchestration, in the order it acts: the allocation's
// step (sweeps, ring pairs, node records), the straggler verdict, then
// after a failure the two localization steps and the final action.
class AllocationCheck {
 public:
  AllocationCheck(const Config& cfg, const Allocation& a, Level level)
      : cfg_(cfg), a_(a), level_(level), k_(std::max(1, a.ranks_per_node)) {}

  AllocationOutcome Run() {
    // The straggler rule needs ring pairs, measured in the allocation's own
    // step (no extra step, no extra PMIx start-up) unless the site turned it off.
    mode_ = ModeFor(cfg_.check_modes, "nccl.straggler");
    with_pairs_ = mode_ != CheckMode::kOff && a_.nodes.size() >= 2;
    // One job step when the check passes: the nodes' rails, versions and gemm
    // records travel in it (issue 33), compared here before the figures.
    compare_nodes_ = a_.nodes.size() >= 2;
    int step_rc = 0;
    if (!AllocationStep(&step_rc)) return o_;
    JudgeStragglers();
    const bool named = o_.straggler_mode == "on" && !o_.stragglers.stragglers.empty();
    if (!o_.stragglers.stragglers.empty() && o_.straggler_mode == "warn")
      o_.text += kHead + "check_nccl_straggler = warn: named, not acted on; the job runs\n";
    if (step_rc == 0 || (allreduce_ok_ && !named)) {
      o_.passed = !named;
      if (o_.passed) return o_;
    }
    if (!allreduce_ok_) EachNodeAlone(step_rc);
    if (o_.drained.empty() && a_.nodes.size() >= 2) BetweenNodes();
    FinalActionResult end =
        FinalAction(o_.Excluded(), a_.required_nodes, cfg_.nccl.on_failure == NcclOnFailure::kRequeue);
    o_.requeue = end.requeue;
    o_.text += kHead + end.text + "\n";
    return o_;
  }

 private:
  const std::string kHead = "preflight: nccl: ";

  Expected<std::pair<int, std::string>> UserStep(Scope scope, bool pairs, bool node_records) {
    auto argv = Srun(cfg_, a_.nodes, k_, true);
    auto tool = NcclArgs(cfg_, a_, level_, scope);
    argv.insert(argv.end(), tool.begin(), tool.end());
    argv.push_back("--records");
    if (pairs) argv.push_back("--pairs");
    if (node_records) argv.push_back("--node-records");
    // Past nccl_timeout by a margin: the ranks' own watchdog speaks first
    // (kNoBootstrapLine, kNoVerdictLine).
    return RunAs(argv, LaunchEnv(a_.env, false), a_.uid, a_.gid, a_.groups, cfg_.nccl.timeout_ms + 15000);
  }

  // The step ended on the ranks' watchdog before their PMIx bootstrap
  // completed, with no verdict of the allocation: a launch whose fence Slurm
  // never completed (22.05's stepd can refuse a peer's direct connection
  // while it launches its task) says nothing about the nodes.
  static bool HungLaunch(const std::pair<int, std::string>& step) {
    if (step.first == 0 || step.second.find(kNoBootstrapLine) == std::string::npos) return false;
    for (const auto& r : ParseOutput(step.second).records)
      if (r.kind == ScopeName(Scope::kAllocation)) return false;
    return true;
  }

  // The allocation's one step; false when it could not start (o_ says why).
  bool AllocationStep(int* rc) {
    double t0 = MonotonicSeconds();
    auto all = UserStep(Scope::kAllocation, with_pairs_, compare_nodes_);
    for (int launch = 2; launch <= kBootstrapLaunches && all && HungLaunch(*all); ++launch) {
      o_.text += kHead + "the check's launch ended with no PMIx bootstrap within nccl_timeout (a fence Slurm never "
                         "completed): launch " + std::to_string(launch) + " of " + std::to_string(kBootstrapLaunches) +
                 "\n";
      all = UserStep(Scope::kAllocation, with_pairs_, compare_nodes_);
    }
    if (!all) {
      if (compare_nodes_) o_.text += NodeComparisons(cfg_, a_, nullptr, level_);
      o_.text += kHead + "cannot start the check: " + all.status().message() + "\n";
      return false;
    }
    *rc = all->first;
    char took[64];
    std::snprintf(took, sizeof took, "%.1f s", MonotonicSeconds() - t0);
    ParsedOutput parsed = ParseOutput(all->second);
    if (compare_nodes_) o_.text += NodeComparisons(cfg_, a_, &parsed, level_);
    o_.text += kHead + "all_reduce across " + std::to_string(a_.nodes.size()) + " nodes x " + std::to_string(k_) +
               " ranks" + (with_pairs_ ? ", then ring pairs" : "") + " (" + took + ")\n";
    o_.text += Indent(parsed.display);
    for (const auto& e : parsed.errors) o_.text += kHead + "unreadable record: " + e + "\n";
    // Rank 0's record of the allocation scope: its figures for the metrics.
    for (const auto& r : parsed.records) {
      if (r.kind == ScopeName(Scope::kAllocation) && !allreduce_ok_ && o_.busbw == 0) {
        o_.busbw = r.busbw;
        o_.threshold = r.threshold;
        allreduce_ok_ = r.pass;
      }
      if (r.kind == "pair") o_.pairs.push_back(r);
      if (r.kind == "pair" || r.kind == ScopeName(Scope::kIntraNode)) step_records_.push_back(r);
    }
    return true;
  }

  // The straggler rule over the step's pairs (the step applied it too, to
  // choose what to measure twice; this is the verdict that acts).
  void JudgeStragglers() {
    if (with_pairs_ && !o_.pairs.empty()) {
      o_.straggler_mode = CheckModeName(mode_);
      double reference = o_.pairs.front().threshold;
      o_.stragglers = StragglersFromRecords(a_.nodes, step_records_, cfg_.nccl.straggler_fraction, reference);
      o_.text += Prefixed(kHead, o_.stragglers.text);
    } else if (with_pairs_) {
      o_.text += kHead + "no ring pair figures from the step: the straggler rule could not run\n";
    }
  }

  // Localize, step 1: every node alone, in parallel, measured by root
  // (whose verdict drains: the job's own figures, stragglers included,
  // only name a node).
  void EachNodeAlone(int step_rc) {
    o_.text += kHead + "the allocation failed the check (exit " + std::to_string(step_rc) + "); testing each node alone\n";
    auto argv = Srun(cfg_, a_.nodes, 1, false);
    auto tool = NcclArgs(cfg_, a_, level_, Scope::kIntraNode);
    tool.push_back("--intra-node");
    argv.insert(argv.end(), tool.begin(), tool.end());
    auto intra = RunAs(argv, LaunchEnv(a_.env, true), a_.uid, a_.gid, a_.groups, cfg_.nccl.timeout_ms);
    if (intra) o_.text += Indent(intra->second);
    else o_.text += kHead + "intra-node step: " + intra.status().message() + "\n";
    // What the root-run checks decided is in slurmctld, where the user can't write.
    for (const auto& n : a_.nodes) {
      auto st = QueryNode(cfg_, n);
      auto why = st && st->drained() ? ParseReason(st->reason) : std::nullopt;
      if (why && IsNcclReason(*why)) {
        o_.drained.push_back(n);
        o_.text += kHead + "drained " + n + ": " + st->reason + "\n";
      }
    }
  }

  // Step 2: no node failed alone: ring pairs between nodes. Measured in the
  // allocation's step already when the straggler rule runs; else one
  // user-run step of all pairs (sub-groups of one launch).
  void BetweenNodes() {
    const size_t n = a_.nodes.size();
    if (o_.pairs.empty()) {
      auto r = UserStep(Scope::kPairs, false, false);
      if (r) {
        ParsedOutput parsed = ParseOutput(r->second);
        o_.text += Indent(parsed.display);
        for (const auto& e : parsed.errors) o_.text += kHead + "pair step: unreadable record: " + e + "\n";
        for (const auto& rec : parsed.records)
          if (rec.kind == "pair") o_.pairs.push_back(rec);
      } else {
        o_.text += kHead + "pair step: " + r.status().message() + "\n";
      }
    }
    // Each pair's verdict is a "#record" line (collective_records.h); a
    // pair without one (the step died first) counts as failed.
    ParsedOutput recs;
    recs.records = o_.pairs;
    std::vector<bool> failed(n == 2 ? 1 : n, true);
    for (size_t i = 0; i < failed.size(); ++i) {
      const ResultRecord* rec = FindRecord(recs, "pair", {a_.nodes[i], a_.nodes[(i + 1) % n]});
      failed[i] = rec == nullptr || !rec->pass;
    }
    for (size_t i : InterNodeSuspects(n, failed)) o_.suspects.push_back(a_.nodes[i]);
    if (o_.straggler_mode == "on")
      for (const auto& s : o_.stragglers.stragglers)
        if (std::find(o_.suspects.begin(), o_.suspects.end(), s.node) == o_.suspects.end()) o_.suspects.push_back(s.node);
    if (!o_.suspects.empty()) DrainSuspects();
  }

  void DrainSuspects() {
    o_.text += kHead + "inter-node suspect(s): " + Join(o_.suspects, ",") + "\n";
    if (!cfg_.nccl.drain_internode) {
      o_.text += kHead + "not drained: pairwise figures come from the job's own processes "
                         "(nccl_drain_internode=no); an admin should test " + Join(o_.suspects, ",") + "\n";
      return;
    }
    for (const auto& s : o_.suspects) {
      std::string reason = InterDrainReason(s);
      for (const auto& st : o_.stragglers.stragglers)
        if (st.node == s) reason = StragglerDrainReason(st);
      Status d = DrainNode(cfg_, s, reason);
      if (d.ok()) {
        o_.drained.push_back(s);
        o_.text += kHead + "drained " + s + ": " + reason + "\n";
      } else {
        o_.text += kHead + "cannot drain " + s + ": " + d.message() + "\n";
      }
    }
  }

  const Config& cfg_;
  const Allocation& a_;
  const Level level_;
  const int k_;
  AllocationOutcome o_;
  CheckMode mode_ = CheckMode::kOn;
  bool with_pairs_ = false, compare_nodes_ = false, allreduce_ok_ = false;
  std::vector<ResultRecord> step_records_;
};

}  // namespace

AllocationOutcome RunAllocationCheck(const Config& cfg, const Allocation& a, Level level) {
  return AllocationCheck(cfg, a, level).Run();
}

FinalActionResult FinalAction(const std::vector<std::string>& excluded, const std::vector<std::string>& required,
                              bool on_failure_requeue) {
  FinalActionResult r;
  std::vector<std::string> named;
  for (const auto& n : excluded)
    if (std::find(required.begin(), required.end(), n) != required.end()) named.push_back(n);
  if (excluded.empty()) {
    r.text = "the job script did not run; the job fails (no single node found at fault)";
  } else if (!on_failure_requeue) {
    r.text = "the job script did not run; the job fails (nccl_on_failure=fail)";
  } else if (!named.empty()) {
    r.text = "the job script did not run; the job fails: it names " + Join(named, ",") +
             " (-w), so a requeue without " + Join(excluded, ",") + " could never start";
  } else {
    r.requeue = true;
    r.text = "the job script did not run; the job is requeued without " + Join(excluded, ",");
  }
  return r;
}

}  // namespace preflight::collective
