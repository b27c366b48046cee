#include "preflight/node_shell.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>

#include "preflight/cli.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"
#include "preflight/node_run.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/slurm_conf.h"
#include "preflight/slurmctl.h"
#include "preflight/stage_job.h"
#include "preflight/topo_load.h"
#include "preflight/state_paths.h"

extern char** environ;

namespace preflight {
namespace {

const char* ProgramName(Phase p) {
  switch (p) {
    case Phase::kProlog: return "preflight-prolog";
    case Phase::kEpilog: return "preflight-epilog";
    case Phase::kHealth: return "preflight-healthcheck";
  }
  return "preflight";
}

const char* Purpose(Phase p) {
  switch (p) {
    case Phase::kProlog: return "Node checks before a job starts; run by slurmd as Prolog= (PrologFlags=Alloc).";
    case Phase::kEpilog: return "Node checks and cleanup after a job; run by slurmd as Epilog=.";
    case Phase::kHealth: return "Re-check a node; return it to service only if preflight drained it and it now passes (HealthCheckProgram=).";
  }
  return "";
}

// The site config does not load: the config owner's fault, not the job's
// nor the hardware's. Slurm drains the node for the non-zero exit with a bare
// "Prolog error"; the reason is then set to the config error (file, line,
// key) by the same detached helper as a node failure's, run with what parses
// of the config (the site's scontrol). The helper itself (`finish_drain`)
// gets here too and finishes the drain with that config.
int ConfigErrorExit(const CommonCli& cli, const std::string& node, Phase phase, const std::string& finish_drain,
                    const std::string& reason, const Status& error, const EnvMap& env) {
  Config lenient = LoadConfigLenient(cli.config, node);
  for (const auto& kv : cli.sets) (void)ApplyOverrides(lenient, {kv}, "--set", node);
  if (!finish_drain.empty()) {
    Status d = FinishDrain(lenient, finish_drain, reason, 60000);
    if (!d.ok()) Log(LogLevel::kError, ProgramName(phase), "drain " + finish_drain, d.message());
    return d.ok() ? 0 : 1;
  }
  // By hand (no job: an admin trying the config) the error is only printed.
  if (!lenient.set_drain_reason || !env.count("SLURM_JOB_ID")) return 2;
  std::string why = ConfigDrainReason(error.message());
  auto flags = ReadPrologFlags(SlurmConfPath(lenient, env));
  if (flags && DrainHowFor(*flags) == DrainHow::kNow) {  // RunInJob: no detached helper outlives the step
    Status d = DrainNode(lenient, node, why);
    if (!d.ok()) Log(LogLevel::kError, ProgramName(phase), "drain " + node + " (PrologFlags=RunInJob)", d.message());
    return 2;
  }
  std::vector<std::string> argv2 = {SelfExe(), "--finish-drain", node, "--reason", why};
  if (cli.config_given()) { argv2.push_back("--config"); argv2.push_back(cli.config); }
  for (const auto& kv : cli.sets) { argv2.push_back("--set"); argv2.push_back(kv); }
  Status d = SpawnDetached(argv2, {});
  if (!d.ok()) Log(LogLevel::kError, ProgramName(phase), "drain reason", d.message());
  return 2;
}

int Main(int argc, char** argv, Phase phase) {
  const char* prog = ProgramName(phase);
  CommonCli cli;
  std::string node, level_text, finish_drain, reason;
  po::options_description visible(std::string("Usage: ") + prog + " [OPTIONS]\n" + Purpose(phase) + "\n\nOptions");
  AddCommonOptions(visible, cli);
  visible.add_options()
      ("node", po::value<std::string>(&node)->value_name("NAME"), "node name (default: $SLURMD_NODENAME, else the host name)")
      ("level", po::value<std::string>(&level_text)->value_name("LEVEL"), "check level quick|full|off, overriding the job's");
  po::options_description hidden;
  hidden.add_options()
      ("finish-drain", po::value<std::string>(&finish_drain), "internal: set NODE's drain reason once Slurm drained it")
      ("reason", po::value<std::string>(&reason), "internal: the reason for --finish-drain");
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  Status s = ParseCommandLine(argc, argv, all, nullptr, vm);
  if (!s.ok()) {
    Log(LogLevel::kError, prog, "bad command line", s.message());
    return 2;
  }
  if (cli.help) { std::cout << visible << "\n"; return 0; }
  if (cli.version) { std::cout << prog << " " << VersionString() << "\n"; return 0; }

  EnvMap env = EnvironToMap(environ);
  if (node.empty()) node = env.count("SLURMD_NODENAME") ? env["SLURMD_NODENAME"] : ShortHostname();
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, prog, "site config", cfg.status().message());
    if (phase != Phase::kHealth) return ConfigErrorExit(cli, node, phase, finish_drain, reason, cfg.status(), env);
    return 2;
  }

  if (!finish_drain.empty()) {
    // Detached from the prolog; may take as long as slurmctld needs.
    Status d = FinishDrain(*cfg, finish_drain, reason, 60000);
    if (!d.ok()) Log(LogLevel::kError, prog, "drain " + finish_drain, d.message());
    return d.ok() ? 0 : 1;
  }

  env["SLURMD_NODENAME"] = node;
  auto job = JobContextFromEnv(env, *cfg, /*allow_no_job=*/true);
  if (!job) {
    Log(LogLevel::kError, prog, "job environment", job.status().message());
    return 2;
  }
  if (!level_text.empty()) {
    auto l = ParseLevel(level_text.c_str());
    if (!l) {
      Log(LogLevel::kError, prog, "--level", l.status().message());
      return 2;
    }
    job->level = *l;
  }
  bool job_failed = false;
  if (phase == Phase::kEpilog && env.count("SLURM_JOB_EXIT_CODE")) job_failed = env["SLURM_JOB_EXIT_CODE"] != "0";

  // Epilog: staging cleanup first (it must happen whatever the checks say),
  // its figures go into the epilog's result.
  UnstageResult unstage;
  if (phase == Phase::kEpilog) unstage = UnstageForJob(*cfg, *job);
  NodeRunOutcome out = RunNode(*cfg, *job, phase, job_failed, unstage.checks, unstage.notes);
  // Keep what preflight leaves per job in bounds (state_keep, state_keep_size;
  // stage views and holds of jobs whose epilog never ran). Never fatal.
  if (phase == Phase::kEpilog || phase == Phase::kHealth) {
    double now = static_cast<double>(::time(nullptr));
    state::StateGcResult gc = state::PruneJobState(*cfg, job->job_id, now);
    for (const auto& e : gc.errors) Log(LogLevel::kError, prog, "state gc", e);
    for (const auto& line : ReleaseStaleJobs(*cfg, LiveSlurmJobs(), now)) Log(LogLevel::kInfo, prog, "stage", line);
  }
  // Prolog: stage datasets only on a node that passed its checks. See
  // stage_job.h for which failures fail the job and which drain the node.
  if (phase == Phase::kProlog && !out.failed && !job->job_id.empty()) {
    StageJobResult st = StageForJob(*cfg, *job);
    out.summary += st.summary;
    if (!st.ok && st.drain) {
      out.failed = true;
      out.drain_reason = std::string(kDrainPrefix) + (st.owner == FaultOwner::kConfig ? "config: " : "stage ") + st.message;
      if (out.drain_reason.size() > 200) out.drain_reason = out.drain_reason.substr(0, 197) + "...";
    } else if (!st.ok) {
      Log(LogLevel::kError, "prolog", "job " + job->job_id + " fails (node stays in service)", "stage: " + st.message);
    }
  }
  // slurmd logs what a prolog prints (SlurmdDebug=debug); an admin running it by hand sees it.
  std::fputs(out.summary.c_str(), stdout);
  std::fflush(stdout);
  if (!out.write_status.ok()) Log(LogLevel::kError, prog, "result file", out.write_status.message());
  if (phase == Phase::kProlog && cfg->topo_env) {
    // Refresh the node's topology cache (hwloc only when stale, sysfs port
    // state always) so tasks read it instead of loading hwloc. Never fatal.
    TopoLoadOptions lo;
    lo.refresh_sysfs = true;
    auto t = LoadTopologyCached(*cfg, node, lo);
    if (!t && t.status().code() != Status::Code::kUnavailable)
      Log(LogLevel::kError, prog, "topology cache", t.status().message());
    // Slurm gave the job GPUs here but the topology shows none (hwloc missed
    // them): logged, never fatal (the GPU checks judge the GPUs themselves).
    if (t && env.count("SLURM_JOB_GPUS")) {
      std::string w = GpuGresWarning(*t, env["SLURM_JOB_GPUS"], "");
      if (!w.empty()) Log(LogLevel::kError, prog, "topology (warning, job " + job->job_id + ")", w);
    }
    // This node's rail signature, for the allocation-wide comparison (rails.h).
    if (t && ClassifyRails(*t, cfg->topo_rails).ok()) {
      Status w = WriteRailsRecord(*cfg, RailsOf(node, *t));
      if (!w.ok()) Log(LogLevel::kError, prog, "rails record", w.message());
    }
    // The job's GPUs on this node, for the plugin's one-NIC-set-per-node rule
    // (topo.h: JobGpusOnNode): slurmd's SLURM_JOB_GPUS is only this trusted here.
    if (!job->job_id.empty()) {
      Status g = WriteJobGpusRecord(*cfg, job->job_id, node, env.count("SLURM_JOB_GPUS") ? env["SLURM_JOB_GPUS"] : "");
      if (!g.ok()) Log(LogLevel::kError, prog, "job GPU record", g.message());
    }
  }
  if (!job->job_id.empty() && phase == Phase::kProlog) {
    std::string txt = state::JobNodeFile(*cfg, job->job_id, node, state::kPrologText);
    Status w = WriteFileAtomic(txt, out.summary, 0644);
    if (!w.ok()) Log(LogLevel::kError, prog, "summary file", w.message());
  }

  if (phase == Phase::kHealth) {
    // warn findings go to the node's Comment (no drain). preflight clears
    // only a comment it set, which it remembers in state_dir.
    std::string mark = state::NodeFile(*cfg, node, state::kComment);
    if (!out.warnings.empty()) {
      Status c = SetNodeComment(*cfg, node, out.warnings);
      if (!c.ok()) Log(LogLevel::kError, prog, "node comment " + node, c.message());
      else if (!(c = WriteFileAtomic(mark, out.warnings + "\n", 0644)).ok())
        Log(LogLevel::kError, prog, "comment record", c.message());
    } else if (::access(mark.c_str(), F_OK) == 0) {
      Status c = SetNodeComment(*cfg, node, "");
      if (!c.ok()) Log(LogLevel::kError, prog, "node comment " + node, c.message());
      else ::unlink(mark.c_str());
    }
    auto st = QueryNode(*cfg, node);
    if (!st) {
      Log(LogLevel::kError, prog, "node state", st.status().message());
      return out.failed ? 1 : 0;
    }
    if (out.failed && !st->drained()) {
      Status d = DrainNode(*cfg, node, out.drain_reason);
      if (!d.ok()) Log(LogLevel::kError, prog, "drain " + node, d.message());
    } else if (!out.failed && st->drained() && st->ours()) {
      Status r = ResumeNode(*cfg, node);
      if (!r.ok()) Log(LogLevel::kError, prog, "resume " + node, r.message());
      else std::printf("preflight: health: %s passes again; resumed (was: %s)\n", node.c_str(), st->reason.c_str());
    }
    return out.failed ? 1 : 0;
  }

  if (out.failed) {
    Log(LogLevel::kError, PhaseName(phase), "node " + node + " failed", out.drain_reason.substr(std::strlen(kDrainPrefix)));
    // PrologFlags=RunInJob (24.05+): prolog and epilog run in the job's
    // extern step, which a detached helper may not outlive; drain now instead.
    DrainHow how = DrainHow::kDetached;
    if ((phase == Phase::kProlog || phase == Phase::kEpilog) && cfg->set_drain_reason) {
      auto flags = ReadPrologFlags(SlurmConfPath(*cfg, env));
      if (flags) how = DrainHowFor(*flags);
      else Log(LogLevel::kInfo, prog, "slurm.conf PrologFlags", flags.status().message());
    }
    if (cfg->set_drain_reason && how == DrainHow::kNow) {
      Status d = DrainNode(*cfg, node, out.drain_reason);
      if (!d.ok()) Log(LogLevel::kError, prog, "drain " + node + " (PrologFlags=RunInJob)", d.message());
    } else if (cfg->set_drain_reason) {
      std::string self = SelfExe();
      std::vector<std::string> argv2 = {self, "--finish-drain", node, "--reason", out.drain_reason};
      if (cli.config_given()) { argv2.push_back("--config"); argv2.push_back(cli.config); }
      for (const auto& kv : cli.sets) { argv2.push_back("--set"); argv2.push_back(kv); }
      Status d = SpawnDetached(argv2, {});
      if (!d.ok()) Log(LogLevel::kError, prog, "drain reason", d.message());
    }
    return 1;
  }
  return 0;
}

}  // namespace

int NodeShellMain(int argc, char** argv, Phase phase) {
  return GuardedMain(ProgramName(phase), [&] { return Main(argc, argv, phase); });
}

}  // namespace preflight
