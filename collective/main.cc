// preflight-nccl: the collective check (man preflight-nccl(1)).
//
//   srun --mpi=pmix -N3 --ntasks-per-node=8 preflight-nccl [--json] [--level full]
//   preflight-nccl --intra-node [--ranks N]       (one node, no launcher)
//
// Exit codes: 0 the check passed, 1 it failed (threshold, wrong data, or the
// requested GPU backend cannot run), 2 bad usage or config. Under PMIx every
// rank exits with the same code (results are reduced across ranks); only
// rank 0 prints.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <iostream>

#include "preflight/cli.h"
#include "preflight/clock.h"
#include "preflight/collective.h"
#include "preflight/collective_node_records.h"
#include "preflight/collective_records.h"
#include "preflight/collective_run.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/pairs.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"

extern char** environ;

namespace {

using namespace preflight;
using namespace preflight::collective;

const char* kProg = "preflight-nccl";


// With several operations the record carries the deciding one (Deciding):
// its figures, its message after its name.
ResultRecord RecordOf(const CheckRun& run) {
  OpResult o = Deciding(run);
  ResultRecord r;
  r.kind = run.info.scope;
  r.nodes = run.info.nodes;
  r.pass = Passed(run);
  r.busbw = o.judgement.busbw;
  r.threshold = o.judgement.threshold;
  r.message = (run.rest.empty() || !run.error.empty() ? "" : std::string(OpName(o.result.op)) + ": ") + o.judgement.message;
  return r;
}

// The JSON for stdout and --output: without --ops the one all_reduce
// document as always; with --ops an array of one document per operation
// (the same schema, "test" naming it), also for a single operation, so a
// caller that asks gets one shape.
std::string JsonOf(const CheckRun& run, bool ops_given) {
  if (!ops_given) return ResultJson(run.result, run.judgement, run.info);
  std::string out = "[\n" + ResultJson(run.result, run.judgement, run.info);
  for (const auto& o : run.rest) {
    out.pop_back();  // each document ends with a newline
    out += ",\n" + ResultJson(o.result, o.judgement, run.info);
  }
  return out + "]\n";
}

// A table per operation; after several, one footer for them all.
std::string TextOf(const CheckRun& run) {
  if (!run.error.empty() && run.result.sizes.empty()) {
    return "# preflight-nccl " + std::string(OpName(run.result.op)) + " (" + run.info.scope + ", " + run.info.level +
           ") on " + (run.info.nodes.empty() ? "?" : run.info.nodes[0]) + "\n# FAILED: " + run.error + "\n";
  }
  std::string out = ResultText(run.result, run.judgement, run.info);
  if (run.rest.empty()) return out;
  std::string names = OpName(run.result.op);
  for (const auto& o : run.rest) {
    out += ResultText(o.result, o.judgement, run.info);
    names += std::string(", ") + OpName(o.result.op);
  }
  OpResult d = Deciding(run);
  out += Passed(run) ? "# OK: every operation passed (" + names + ")\n"
                     : "# FAILED: " + std::string(OpName(d.result.op)) + ": " + d.judgement.message + "\n";
  return out;
}

// `record`: also the "#record" line for a caller (collective_records.h).
int Emit(const CheckRun& run, bool json, bool ops_given, const std::string& output_file, bool print, bool record,
         const std::string& drain_reason = "") {
  if (print) {
    std::fputs((json ? JsonOf(run, ops_given) : TextOf(run)).c_str(), stdout);
    if (record) {
      ResultRecord r = RecordOf(run);
      if (!r.pass) r.drain_reason = drain_reason;
      std::fputs(RecordLine(r).c_str(), stdout);
    }
    std::fflush(stdout);
    if (!output_file.empty()) {
      Status w = WriteFileAtomic(output_file, JsonOf(run, ops_given), 0644);
      if (!w.ok()) Log(LogLevel::kError, kProg, "--output", w.message());
    }
  }
  return Passed(run) ? 0 : 1;
}

// Ring pairs (pairs.h) after, or instead of, the allocation's all-reduce:
// rank 0 prints every pair, the straggler rule's lines and (with `record`)
// one "#record" line per pair and intra-node group. 1 if a pair failed its
// threshold or the rule named a node.
int PrintPairs(Bootstrap& b, const std::vector<std::string>& rank_nodes, const Config& cfg, const PairsOptions& opt,
               bool record) {
  auto out = RunPairs(b, rank_nodes, cfg, opt);
  if (!out) {
    Log(LogLevel::kError, kProg, "bootstrap", out.status().message());
    return 2;
  }
  bool named = !out->verdict.stragglers.empty();
  if (b.Rank() == 0) {
    std::fputs(out->text.c_str(), stdout);
    if (record) {
      for (const auto& r : out->pairs) std::fputs(RecordLine(r).c_str(), stdout);
      for (const auto& r : out->intra) std::fputs(RecordLine(r).c_str(), stdout);
    }
    std::string src;
    double threshold = Threshold(cfg, PickProfile(cfg, opt.backend, GpuInventory{}), false, &src);
    std::printf("# threshold: %s (%s); straggler fraction %g of the allocation's median\n",
                threshold > 0 ? RateText(threshold).c_str() : "none", src.c_str(), cfg.nccl.straggler_fraction);
    std::printf("# %s\n", !out->all_pass ? "FAILED: some pairs failed"
                           : named       ? "FAILED: the straggler rule named a node"
                                         : "OK: every pair passed");
  }
  std::fflush(stdout);
  return out->all_pass && !named ? 0 : 1;
}

// The command line, typed: what one launch was asked to do.
struct Args {
  CommonCli cli;
  Level level = Level::kQuick;
  std::vector<Op> ops = {Op::kAllReduce};
  bool ops_given = false;  // --ops: --json prints an array
  std::string backend_text, node, output_file, min_busbw, max_bytes;
  Scope scope = Scope::kAllocation;
  bool json = false, intra = false, drain = false, records = false, pairs = false, node_records = false;
  int ranks = 0;
  bool ranks_given = false;
};

// -1: go on; else the exit code (0 after --help/--version, 2 bad usage).
int ParseArgs(int argc, char** argv, Args* a) {
  std::string level_text = "quick", ops_text = "all_reduce", scope_text = "allocation";
  po::options_description visible(
      "Usage: srun --mpi=pmix [SRUN OPTIONS] preflight-nccl [OPTIONS]\n"
      "       preflight-nccl --intra-node [OPTIONS]\n"
      "Collective (all-reduce by default) bus bandwidth and correctness check; exit 0 pass, 1 fail, 2 usage.\n\nOptions");
  AddCommonOptions(visible, a->cli);
  visible.add_options()
      ("level", po::value<std::string>(&level_text)->value_name("LEVEL"), "quick (sizes up to 256 MiB) or full (up to 8 GiB)")
      ("ops", po::value<std::string>(&ops_text)->value_name("LIST"),
       "operations, comma-separated: all_reduce (default), all_gather, reduce_scatter, all_to_all, or all; "
       "--json then prints an array of one document per operation")
      ("backend", po::value<std::string>(&a->backend_text)->value_name("NAME"), "auto, nccl or host (default: config nccl_backend)")
      ("json", po::bool_switch(&a->json), "print the result as JSON instead of the table")
      ("output", po::value<std::string>(&a->output_file)->value_name("FILE"), "also write the JSON result to FILE")
      ("min-busbw", po::value<std::string>(&a->min_busbw)->value_name("RATE"), "threshold, overriding the config and profile (e.g. 40G)")
      ("max-bytes", po::value<std::string>(&a->max_bytes)->value_name("SIZE"), "cap on message sizes (e.g. 64M)")
      ("intra-node", po::bool_switch(&a->intra), "test this node alone: its ranks as threads of this process")
      ("ranks", po::value<int>(&a->ranks)->value_name("N"), "ranks for --intra-node (default: GPUs, or 2 for host)")
      ("node", po::value<std::string>(&a->node)->value_name("NAME"), "node name (default: $SLURMD_NODENAME, else host name)");
  po::options_description hidden;
  hidden.add_options()
      ("scope", po::value<std::string>(&scope_text), "allocation (default), intra-node (label), or pairs: ring pairs of nodes")
      ("drain", po::bool_switch(&a->drain), "with --intra-node, as root: drain this node when it fails")
      ("records", po::bool_switch(&a->records), "also print one '#record {json}' line per verdict, for a caller")
      ("pairs", po::bool_switch(&a->pairs), "after the allocation's all-reduce, ring pairs and the straggler rule in the same launch")
      ("node-records", po::bool_switch(&a->node_records), "first carry each node's rails, versions and gemm records to rank 0's output");
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  auto usage = [](const std::string& what, const std::string& why) {
    Log(LogLevel::kError, kProg, what, why);
    return 2;
  };
  Status s = ParseCommandLine(argc, argv, all, nullptr, vm);
  if (!s.ok()) return usage("bad command line", s.message());
  if (a->cli.help) { std::cout << visible << "\n"; return 0; }
  if (a->cli.version) { std::cout << kProg << " " << VersionString() << "\n"; return 0; }
  a->ops_given = vm.count("ops") > 0;
  auto ops = ParseOps(ops_text);
  if (!ops) return usage("--ops", ops.status().message());
  a->ops = *ops;
  auto scope = ParseScope(scope_text);
  if (!scope) return usage("--scope", scope.status().message());
  a->scope = *scope;
  // Ring pairs and the straggler rule are all-reduce figures: with --pairs
  // the pairs after the sweeps run all_reduce whatever --ops says.
  if (a->ops_given && a->scope == Scope::kPairs) return usage("--ops", "not with --scope pairs (ring pairs run all_reduce)");
  a->ranks_given = vm.count("ranks") > 0;
  if (a->ranks_given) {
    Status r = a->intra ? CheckIntraRanks(a->ranks, 0) : Status::InvalidArgument("only with --intra-node");
    if (!r.ok()) return usage("--ranks", r.message());
  }
  auto level = ParseLevel(level_text.c_str());
  if (!level || *level == Level::kOff)
    return usage("--level", level ? "off runs nothing (expected quick or full)" : level.status().message());
  a->level = *level;
  return -1;
}

// The site config with the command line's thresholds applied; 2 and a
// logged reason when either is bad.
int LoadConfigFor(const Args& a, Config* cfg) {
  auto loaded = LoadCliConfig(a.cli, a.node);
  if (!loaded) {
    Log(LogLevel::kError, kProg, "site config", loaded.status().message());
    return 2;
  }
  *cfg = *loaded;
  if (!a.min_busbw.empty()) {
    auto r = ParseRate(a.min_busbw);
    if (!r) { Log(LogLevel::kError, kProg, "--min-busbw", r.status().message()); return 2; }
    (a.intra ? cfg->nccl.min_intra_busbw : cfg->nccl.min_busbw) = *r;
  }
  if (!a.max_bytes.empty()) {
    auto r = ParseSize(a.max_bytes);
    if (!r) { Log(LogLevel::kError, kProg, "--max-bytes", r.status().message()); return 2; }
    cfg->nccl.max_bytes = *r;
  }
  return -1;
}

// --intra-node: this node's ranks as threads, and with --drain (root) the
// node drained for a failure.
int RunIntra(const Args& a, const Config& cfg, const EnvMap& env, BackendKind backend) {
  // In a localization step the plugin has already run this check as root
  // for this node (see preflight-nccl(1) SECURITY); the user's copy only
  // stands by so the step has a task.
  if (env.count("PREFLIGHT_NCCL_ROOT_DONE")) return 0;
  if (a.drain && ::geteuid() != 0) {
    Log(LogLevel::kError, kProg, "--drain", "only root may drain (this runs as uid " + std::to_string(::geteuid()) + ")");
    return 2;
  }
  CheckRun run = RunIntraNode(cfg, a.node, a.level, backend, a.ranks, a.ops);
  if (run.usage_error) {  // the request, not the node: no result, no drain
    Log(LogLevel::kError, kProg, "--ranks", run.error);
    return 2;
  }
  // With --records the failed record carries the drain reason, for a
  // caller that decides about the drain itself (the plugin).
  int rc = Emit(run, a.json, a.ops_given, a.output_file, true, a.records, IntraDrainReason(run, a.node));
  if (rc != 0 && a.drain) {
    std::string reason = IntraDrainReason(run, a.node);
    Status d = DrainNode(cfg, a.node, reason);
    if (d.ok()) std::printf("# drained %s: %s\n", a.node.c_str(), reason.c_str());
    else Log(LogLevel::kError, kProg, "drain " + a.node, d.message());
    std::fflush(stdout);
  }
  return rc;
}

// Watchdog: a rank stuck in a fence or a dead peer's socket must not hold
// the job's start forever; nccl_timeout bounds the whole run.
// It starts before the bootstrap: Slurm's PMIx can leave the first fence
// waiting forever (a stepd refusing a peer's direct connection while it
// launches its task: "Connection reject" in slurmd's log).
std::atomic<bool> g_bootstrapped{false};  // the first fence completed
void StartWatchdog(unsigned limit_ms) {
  std::thread([limit_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(limit_ms));
    static const std::string booted = std::string(kNoVerdictLine) + "\n";
    static const std::string not_booted = std::string(kNoBootstrapLine) + "\n";
    const std::string& msg = g_bootstrapped.load() ? booted : not_booted;
    (void)!::write(1, msg.data(), msg.size());
    ::_exit(1);
  }).detach();
}

// Under a launcher (PMIx): the node records first when asked, then the
// allocation's sweeps and, with --pairs, the ring pairs in the same launch;
// or the ring pairs alone (--scope pairs).
int RunLaunched(const Args& a, const Config& cfg, const EnvMap& env, BackendKind backend) {
  const unsigned limit_ms = cfg.nccl.timeout_ms;
  const double started = MonotonicSeconds();
  StartWatchdog(limit_ms);
  auto boot = MakePmixBootstrap(a.node);
  if (!boot) {
    Log(LogLevel::kError, kProg, "bootstrap", boot.status().message());
    return 2;
  }
  Bootstrap& b = **boot;
  CheckRun run;
  run.info.scope = ScopeName(a.scope);
  run.info.level = LevelName(a.level);
  run.info.bootstrap = b.Name();
  auto nodes = b.AllGather("node", b.Node());
  if (!nodes) {
    Log(LogLevel::kError, kProg, "bootstrap", nodes.status().message());
    return 2;
  }
  g_bootstrapped = true;
  for (const auto& n : *nodes)
    if (run.info.nodes.empty() || run.info.nodes.back() != n) run.info.nodes.push_back(n);
  // Before the sweep: a check that fails or runs out of time still says
  // how the nodes differ. A failure here is the caller's to notice (it
  // reads the records with their own step then).
  if (a.node_records) {
    auto lines = ShareNodeRecords(b, state::NodesDir(cfg));
    if (!lines) Log(LogLevel::kError, kProg, "node records", lines.status().message());
    else if (b.Rank() == 0) std::fputs(lines->c_str(), stdout), std::fflush(stdout);
  }
  run.result.backend = ResultBackendName(backend);
  run.result.nranks = b.Size();
  run.result.op = a.ops[0];

  double user_cap = 0;
  if (env.count("PREFLIGHT_NCCL_HOST_RATE")) {
    auto r = ParseRate(env.at("PREFLIGHT_NCCL_HOST_RATE"));
    if (!r) { Log(LogLevel::kError, kProg, "PREFLIGHT_NCCL_HOST_RATE", r.status().message()); return 2; }
    user_cap = *r;
  }
  // Budgets inside nccl_timeout: with ring pairs to follow, the all-reduce
  // gets a third of it (a cut link must not eat the pairs' time), the pairs
  // what is left up to 90% (the rest: fences and printing).
  const double t0 = started, limit_s = limit_ms / 1000.0;  // the watchdog's clock
  PairsOptions po_pairs;
  po_pairs.level = a.level;
  po_pairs.backend = backend;
  po_pairs.user_rate_cap = user_cap;
  po_pairs.intra = b.Size() >= 2 * static_cast<int>(run.info.nodes.size());
  auto pairs_budget = [&] { return std::max(1.0, t0 + 0.9 * limit_s - MonotonicSeconds()); };
  if (a.scope == Scope::kPairs) {
    po_pairs.budget_s = pairs_budget();
    return PrintPairs(b, *nodes, cfg, po_pairs, a.records);
  }
  const bool then_pairs = a.pairs && run.info.nodes.size() >= 2;
  const double allreduce_deadline = then_pairs ? t0 + limit_s / 3 : 0;
  auto then = [&](int rc) {
    if (!then_pairs) return rc;
    po_pairs.budget_s = pairs_budget();
    return std::max(rc, PrintPairs(b, *nodes, cfg, po_pairs, a.records));
  };

  // One exchange inside MakeBackend carries every rank's success or failure.
  auto be = MakeBackend(backend, b, cfg, user_cap, allreduce_deadline);
  if (!be) {
    run.error = be.status().message();
    run.judgement.message = run.error;
    return then(Emit(run, a.json, a.ops_given, a.output_file, b.Rank() == 0, a.records));
  }
  GpuInventory inv;
  if (backend == BackendKind::kNccl) {
    auto p = ProbeGpus(NcclOptions{});
    if (p) inv = *p;
  }
  const NodeProfile* prof = PickProfile(cfg, backend, inv);
  run.info.profile = prof ? prof->name : "";
  double threshold = Threshold(cfg, prof, run.info.nodes.size() == 1, &run.info.threshold_source);
  Op failed = a.ops[0];
  auto res = RunSweeps(**be, a.ops, SweepForLevel(a.level, cfg.nccl.max_bytes), &failed);
  be->reset();  // the ring's sockets: the pairs make their own
  SetSweeps(&run, a.ops, res, failed, threshold);
  return then(Emit(run, a.json, a.ops_given, a.output_file, b.Rank() == 0, a.records));
}

int Main(int argc, char** argv) {
  Args a;
  int rc = ParseArgs(argc, argv, &a);
  if (rc >= 0) return rc;
  EnvMap env = EnvironToMap(environ);
  if (a.node.empty()) a.node = env.count("SLURMD_NODENAME") ? env["SLURMD_NODENAME"] : ShortHostname();
  Config cfg;
  if ((rc = LoadConfigFor(a, &cfg)) >= 0) return rc;
  auto choice = ParseBackendKind(a.backend_text.empty() ? cfg.nccl.backend : a.backend_text);
  if (!choice) {
    Log(LogLevel::kError, kProg, "--backend", choice.status().message());
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> envv(env.begin(), env.end());
  BackendKind backend = ResolveBackend(*choice, GpusRequested(envv));
  return a.intra ? RunIntra(a, cfg, env, backend) : RunLaunched(a, cfg, env, backend);
}

}  // namespace

int main(int argc, char** argv) {
  return preflight::GuardedMain(kProg, [&] { return Main(argc, argv); });
}
