#include "preflight/collective_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight::collective {

// --- allocation orchestration ------------------------------------------------------------
namespace {

// The job's environment for a user-run step: the batch environment minus
// what would steer srun away from the layout given on its command line.
std::vector<std::string> NcclArgs(const Config& cfg, const Allocation& a, Level level, const char* scope) {
  std::vector<std::string> v = {cfg.nccl.binary, "--level", LevelName(level), "--scope", scope};
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
  s += o.drained.empty() ? std::string("no single node at fault") : "drained " + Join(o.drained, ",");
  s += o.requeue ? "; requeued without " + Join(o.drained, ",") : "; job failed";
  return s;
}

namespace {

// Each node's record <state_dir>/nodes/<node><suffix>, read on its node by
// one user task (node-local state_dir): a user step, so what it says
// decides nothing about a node. The JSON lines, and the nodes without one.
struct NodeRecords {
  std::vector<std::string> lines;
  std::string missing;  // "n2,n3"
};
Expected<NodeRecords> GatherNodeRecords(const Config& cfg, const Allocation& a, const char* suffix) {
  auto argv = Srun(cfg, a.nodes, 1, false);
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           std::string("cat \"$0/$SLURMD_NODENAME") + suffix +
                               "\" 2>/dev/null || echo \"no-record $SLURMD_NODENAME\"",
                           state::NodesDir(cfg)});
  auto r = RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.probe_timeout_ms);
  if (!r) return r.status();
  NodeRecords out;
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

// Read every node's record, parse, sort by node, compare: the shape shared
// by the rails and the versions comparisons.
template <class Outcome, class Record, class Parse, class Compare>
Outcome Across(const Config& cfg, const Allocation& a, const char* suffix, const std::string& head, const char* what,
               const char* why_missing, Parse parse, Compare compare) {
  Outcome o;
  auto recs = GatherNodeRecords(cfg, a, suffix);
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

}  // namespace

RailsOutcome RailsAcross(const Config& cfg, const Allocation& a) {
  return Across<RailsOutcome, NodeRails>(cfg, a, state::kRails, "preflight: rails: ", "rails",
                                         "its prolog has not recorded one", ParseRailsJson, CompareRails);
}

VersionsOutcome VersionsAcross(const Config& cfg, const Allocation& a) {
  return Across<VersionsOutcome, NodeVersions>(cfg, a, state::kVersions, "preflight: versions: ", "versions",
                                               "its node checks have not run", ParseVersionsJson, CompareVersions);
}

AllocationOutcome RunAllocationCheck(const Config& cfg, const Allocation& a, Level level) {
  AllocationOutcome o;
  const int k = std::max(1, a.ranks_per_node);
  std::string head = "preflight: nccl: ";
  auto user_step = [&](const std::vector<std::string>& nodes, const char* scope) {
    auto argv = Srun(cfg, nodes, k, true);
    auto tool = NcclArgs(cfg, a, level, scope);
    argv.insert(argv.end(), tool.begin(), tool.end());
    argv.push_back("--records");
    return RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.nccl.timeout_ms);
  };

  if (a.nodes.size() >= 2) o.text += RailsAcross(cfg, a).text;
  if (a.nodes.size() >= 2) o.text += VersionsAcross(cfg, a).text;
  double t0 = MonotonicSeconds();
  auto all = user_step(a.nodes, "allocation");
  if (!all) {
    o.text += head + "cannot start the check: " + all.status().message() + "\n";
    return o;
  }
  char took[64];
  std::snprintf(took, sizeof took, "%.1f s", MonotonicSeconds() - t0);
  o.text += head + "all_reduce across " + std::to_string(a.nodes.size()) + " nodes x " + std::to_string(k) +
           " ranks (" + took + ")\n";
  {
    ParsedOutput parsed = ParseOutput(all->second);
    o.text += Indent(parsed.display);
    // Rank 0's record of the allocation scope: its figures for the metrics.
    for (const auto& r : parsed.records)
      if (r.kind == "allocation") {
        o.busbw = r.busbw;
        o.threshold = r.threshold;
        break;
      }
  }
  if (all->first == 0) {
    o.passed = true;
    return o;
  }

  // Localize, step 1: every node alone, in parallel, measured by root.
  o.text += head + "the allocation failed the check (exit " + std::to_string(all->first) +
            "); testing each node alone\n";
  {
    auto argv = Srun(cfg, a.nodes, 1, false);
    auto tool = NcclArgs(cfg, a, level, "intra-node");
    tool.push_back("--intra-node");
    argv.insert(argv.end(), tool.begin(), tool.end());
    auto intra = RunAs(argv, LaunchEnv(a.env, true), a.uid, a.gid, a.groups, cfg.nccl.timeout_ms);
    if (intra) o.text += Indent(intra->second);
    else o.text += head + "intra-node step: " + intra.status().message() + "\n";
  }
  // What the root-run checks decided is in slurmctld, where the user can't write.
  for (const auto& n : a.nodes) {
    auto st = QueryNode(cfg, n);
    auto why = st && st->drained() ? ParseReason(st->reason) : std::nullopt;
    if (why && IsNcclReason(*why)) {
      o.drained.push_back(n);
      o.text += head + "drained " + n + ": " + st->reason + "\n";
    }
  }

  // Step 2: no node failed alone: ring pairs between nodes, all in one
  // user-run step (pairs are sub-groups of one launch: one start-up cost,
  // and no step on a subset of the allocation).
  if (o.drained.empty() && a.nodes.size() >= 2) {
    const size_t n = a.nodes.size();
    auto r = user_step(a.nodes, "pairs");
    std::vector<bool> failed(n == 2 ? 1 : n, true);
    if (r) {
      // Each pair's verdict is a "#record" line (collective_records.h); a
      // pair without one (the step died first) counts as failed.
      ParsedOutput parsed = ParseOutput(r->second);
      o.text += Indent(parsed.display);
      for (const auto& e : parsed.errors) o.text += head + "pair step: unreadable record: " + e + "\n";
      for (size_t i = 0; i < failed.size(); ++i) {
        const ResultRecord* rec = FindRecord(parsed, "pair", {a.nodes[i], a.nodes[(i + 1) % n]});
        failed[i] = rec == nullptr || !rec->pass;
      }
    } else {
      o.text += head + "pair step: " + r.status().message() + "\n";
    }
    for (size_t i : InterNodeSuspects(n, failed)) o.suspects.push_back(a.nodes[i]);
    if (!o.suspects.empty()) {
      o.text += head + "inter-node suspect(s): " + Join(o.suspects, ",") + "\n";
      if (cfg.nccl.drain_internode) {
        for (const auto& s : o.suspects) {
          std::string reason = InterDrainReason(s);
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

  if (!o.drained.empty() && cfg.nccl.on_failure == NcclOnFailure::kRequeue) {
    o.requeue = true;
    o.text += head + "the job script did not run; the job is requeued without " + Join(o.drained, ",") + "\n";
  } else {
    o.text += head + "the job script did not run; the job fails" +
              (o.drained.empty() ? std::string(" (no single node found at fault)") : " (nccl_on_failure=fail)") + "\n";
  }
  return o;
}

}  // namespace preflight::collective
