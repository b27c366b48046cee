#include "preflight/collective_run.h"

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

namespace {

// Each node's record <state_dir>/nodes/<node><suffix>, read on its node by
// one user task (node-local state_dir): a user step, so what it says
// decides nothing about a node. Only when the collective step did not
// carry the records (collective_node_records.h): it failed to start.
Expected<NodeRecordSet> GatherNodeRecords(const Config& cfg, const Allocation& a, const char* suffix) {
  auto argv = Srun(cfg, a.nodes, 1, false);
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           std::string("cat \"$0/$SLURMD_NODENAME") + suffix +
                               "\" 2>/dev/null || echo \"no-record $SLURMD_NODENAME\"",
                           state::NodesDir(cfg)});
  auto r = RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.probe_timeout_ms);
  if (!r) return r.status();
  NodeRecordSet out;
  size_t b = 0;
  const std::string& text = r->second;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(b, e - b);
    b = e + 1;
    if (line.rfind("no-record ", 0) == 0) out.missing += (out.missing.empty() ? "" : ",") + line.substr(10);
    if (!line.empty() && line[0] == '{') out.lines.push_back(std::move(line));
  }
  return out;
}

// Every line of `text`, prefixed with `head`.
std::string Prefixed(const std::string& head, const std::string& text) {
  std::string out;
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    out += head + text.substr(p, e - p) + "\n";
    p = e == std::string::npos ? text.size() : e + 1;
  }
  return out;
}

// Parse the nodes' records, sort by node, compare: the shape shared by the
// rails and the versions comparisons.
template <class Outcome, class Record, class Parse, class Compare>
Outcome Across(const Expected<NodeRecordSet>& recs, const std::string& head, const char* what, const char* why_missing,
               Parse parse, Compare compare) {
  Outcome o;
  if (!recs) {
    o.text = head + "cannot read the nodes' " + what + ": " + recs.status().message() + "\n";
    return o;
  }
  std::vector<Record> nodes;
  for (const auto& line : recs->lines)
    if (auto n = parse(line)) nodes.push_back(*n);
  std::sort(nodes.begin(), nodes.end(), [](const Record& x, const Record& y) { return x.node < y.node; });
  if (!recs->missing.empty()) o.text += head + "no " + what + " record on " + recs->missing + " (" + why_missing + ")\n";
  if (nodes.size() < 2) return o;
  o.comparison = compare(nodes);
  o.text += Prefixed(head, o.comparison.text);
  return o;
}

RailsOutcome RailsOf(const Expected<NodeRecordSet>& recs) {
  return Across<RailsOutcome, NodeRails>(recs, "preflight: rails: ", "rails", "its prolog has not recorded one",
                                         ParseRailsJson, CompareRails);
}
VersionsOutcome VersionsOf(const Expected<NodeRecordSet>& recs) {
  return Across<VersionsOutcome, NodeVersions>(recs, "preflight: versions: ", "versions",
                                               "its node checks have not run", ParseVersionsJson, CompareVersions);
}

// The comparisons' text from the records the step carried; a kind it did
// not carry is read with its own step.
// The gemm records only at the full level, the one whose prolog soaked.
std::string NodeComparisons(const Config& cfg, const Allocation& a, const ParsedOutput* carried, Level level) {
  auto set = [&](const char* kind, const char* suffix) -> Expected<NodeRecordSet> {
    if (carried != nullptr) {
      auto it = carried->node_records.find(kind);
      if (it != carried->node_records.end()) return it->second;
    }
    return GatherNodeRecords(cfg, a, suffix);
  };
  std::string text = RailsOf(set("rails", state::kRails)).text + VersionsOf(set("versions", state::kVersions)).text;
  if (level >= Level::kFull)
    if (auto gemm = set("gemm", kGemmRecordSuffix)) text += GemmAcrossText(*gemm, a.job_id);
  return text;
}

}  // namespace

std::string GemmAcrossText(const NodeRecordSet& recs, const std::string& job) {
  std::vector<NodeGemm> nodes;
  std::string without;
  for (const auto& line : recs.lines)
    if (auto n = ParseGemmRecordJson(line)) nodes.push_back(*n);
  // Only this job's soaks count: a node's record from an earlier job's soak,
  // or none (a job below the full level runs no soak), is said only when
  // some node did record this job's.
  GemmAcross c = CompareGemm(nodes, job);
  if (c.nodes == 0) return "";
  for (const auto& n : nodes)
    if (n.job != job) without += (without.empty() ? "" : ",") + n.node;
  if (!recs.missing.empty()) without += (without.empty() ? "" : ",") + recs.missing;
  std::string out = Prefixed("preflight: gemm: ", c.text);
  if (!without.empty()) out += "preflight: gemm: no soak of this job recorded on " + without + "\n";
  return out;
}

RailsOutcome RailsAcross(const Config& cfg, const Allocation& a) { return RailsOf(GatherNodeRecords(cfg, a, state::kRails)); }

VersionsOutcome VersionsAcross(const Config& cfg, const Allocation& a) {
  return VersionsOf(GatherNodeRecords(cfg, a, state::kVersions));
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

AllocationOutcome RunAllocationCheck(const Config& cfg, const Allocation& a, Level level) {
  AllocationOutcome o;
  const int k = std::max(1, a.ranks_per_node);
  std::string head = "preflight: nccl: ";
  auto user_step = [&](const std::vector<std::string>& nodes, Scope scope, bool pairs, bool node_records) {
    auto argv = Srun(cfg, nodes, k, true);
    auto tool = NcclArgs(cfg, a, level, scope);
    argv.insert(argv.end(), tool.begin(), tool.end());
    argv.push_back("--records");
    if (pairs) argv.push_back("--pairs");
    if (node_records) argv.push_back("--node-records");
    return RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.nccl.timeout_ms);
  };
  // The straggler rule needs ring pairs, measured in the allocation's own
  // step (no extra step, no extra PMIx start-up) unless the site turned it off.
  CheckMode mode = ModeFor(cfg.check_modes, "nccl.straggler");
  const bool with_pairs = mode != CheckMode::kOff && a.nodes.size() >= 2;

  // One job step when the check passes: the nodes' rails, versions and gemm
  // records travel in it (issue 33), compared here before the figures.
  const bool compare_nodes = a.nodes.size() >= 2;
  double t0 = MonotonicSeconds();
  auto all = user_step(a.nodes, Scope::kAllocation, with_pairs, compare_nodes);
  if (!all) {
    if (compare_nodes) o.text += NodeComparisons(cfg, a, nullptr, level);
    o.text += head + "cannot start the check: " + all.status().message() + "\n";
    return o;
  }
  char took[64];
  std::snprintf(took, sizeof took, "%.1f s", MonotonicSeconds() - t0);
  bool allreduce_ok = false;
  std::vector<ResultRecord> step_records;
  {
    ParsedOutput parsed = ParseOutput(all->second);
    if (compare_nodes) o.text += NodeComparisons(cfg, a, &parsed, level);
    o.text += head + "all_reduce across " + std::to_string(a.nodes.size()) + " nodes x " + std::to_string(k) +
              " ranks" + (with_pairs ? ", then ring pairs" : "") + " (" + took + ")\n";
    o.text += Indent(parsed.display);
    for (const auto& e : parsed.errors) o.text += head + "unreadable record: " + e + "\n";
    // Rank 0's record of the allocation scope: its figures for the metrics.
    for (const auto& r : parsed.records) {
      if (r.kind == ScopeName(Scope::kAllocation) && !allreduce_ok && o.busbw == 0) {
        o.busbw = r.busbw;
        o.threshold = r.threshold;
        allreduce_ok = r.pass;
      }
      if (r.kind == "pair") o.pairs.push_back(r);
      if (r.kind == "pair" || r.kind == ScopeName(Scope::kIntraNode)) step_records.push_back(r);
    }
  }
  // The straggler rule over the step's pairs (the step applied it too, to
  // choose what to measure twice; this is the verdict that acts).
  if (with_pairs && !o.pairs.empty()) {
    o.straggler_mode = CheckModeName(mode);
    double reference = o.pairs.front().threshold;
    o.stragglers = StragglersFromRecords(a.nodes, step_records, cfg.nccl.straggler_fraction, reference);
    o.text += Prefixed(head, o.stragglers.text);
  } else if (with_pairs) {
    o.text += head + "no ring pair figures from the step: the straggler rule could not run\n";
  }
  const bool named = o.straggler_mode == "on" && !o.stragglers.stragglers.empty();
  if (!o.stragglers.stragglers.empty() && o.straggler_mode == "warn")
    o.text += head + "check_nccl_straggler = warn: named, not acted on; the job runs\n";
  if (all->first == 0 || (allreduce_ok && !named)) {
    o.passed = !named;
    if (o.passed) return o;
  }

  if (!allreduce_ok) {
    // Localize, step 1: every node alone, in parallel, measured by root
    // (whose verdict drains: the job's own figures, stragglers included,
    // only name a node).
    o.text += head + "the allocation failed the check (exit " + std::to_string(all->first) +
              "); testing each node alone\n";
    auto argv = Srun(cfg, a.nodes, 1, false);
    auto tool = NcclArgs(cfg, a, level, Scope::kIntraNode);
    tool.push_back("--intra-node");
    argv.insert(argv.end(), tool.begin(), tool.end());
    auto intra = RunAs(argv, LaunchEnv(a.env, true), a.uid, a.gid, a.groups, cfg.nccl.timeout_ms);
    if (intra) o.text += Indent(intra->second);
    else o.text += head + "intra-node step: " + intra.status().message() + "\n";
    // What the root-run checks decided is in slurmctld, where the user can't write.
    for (const auto& n : a.nodes) {
      auto st = QueryNode(cfg, n);
      auto why = st && st->drained() ? ParseReason(st->reason) : std::nullopt;
      if (why && IsNcclReason(*why)) {
        o.drained.push_back(n);
        o.text += head + "drained " + n + ": " + st->reason + "\n";
      }
    }
  }

  // Step 2: no node failed alone: ring pairs between nodes. Measured in the
  // allocation's step already when the straggler rule runs; else one
  // user-run step of all pairs (sub-groups of one launch).
  if (o.drained.empty() && a.nodes.size() >= 2) {
    const size_t n = a.nodes.size();
    if (o.pairs.empty()) {
      auto r = user_step(a.nodes, Scope::kPairs, false, false);
      if (r) {
        ParsedOutput parsed = ParseOutput(r->second);
        o.text += Indent(parsed.display);
        for (const auto& e : parsed.errors) o.text += head + "pair step: unreadable record: " + e + "\n";
        for (const auto& rec : parsed.records)
          if (rec.kind == "pair") o.pairs.push_back(rec);
      } else {
        o.text += head + "pair step: " + r.status().message() + "\n";
      }
    }
    // Each pair's verdict is a "#record" line (collective_records.h); a
    // pair without one (the step died first) counts as failed.
    ParsedOutput recs;
    recs.records = o.pairs;
    std::vector<bool> failed(n == 2 ? 1 : n, true);
    for (size_t i = 0; i < failed.size(); ++i) {
      const ResultRecord* rec = FindRecord(recs, "pair", {a.nodes[i], a.nodes[(i + 1) % n]});
      failed[i] = rec == nullptr || !rec->pass;
    }
    for (size_t i : InterNodeSuspects(n, failed)) o.suspects.push_back(a.nodes[i]);
    if (o.straggler_mode == "on")
      for (const auto& s : o.stragglers.stragglers)
        if (std::find(o.suspects.begin(), o.suspects.end(), s.node) == o.suspects.end()) o.suspects.push_back(s.node);
    if (!o.suspects.empty()) {
      o.text += head + "inter-node suspect(s): " + Join(o.suspects, ",") + "\n";
      if (cfg.nccl.drain_internode) {
        for (const auto& s : o.suspects) {
          std::string reason = InterDrainReason(s);
          for (const auto& st : o.stragglers.stragglers)
            if (st.node == s) reason = StragglerDrainReason(st);
          Status d = DrainNode(cfg, s, reason);
          if (d.ok()) {
            o.drained.push_back(s);
            o.text += head + "drained " + s + ": " + reason + "\n";
          } else {
            o.text += head + "cannot drain " + s + ": " + d.message() + "\n";
          }
        }
      } else {
        o.text += head + "not drained: pairwise figures come from the job's own processes "
                         "(nccl_drain_internode=no); an admin should test " + Join(o.suspects, ",") + "\n";
      }
    }
  }

  FinalActionResult end = FinalAction(o.Excluded(), a.required_nodes, cfg.nccl.on_failure == NcclOnFailure::kRequeue);
  o.requeue = end.requeue;
  o.text += head + end.text + "\n";
  return o;
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
