#include "preflight/node_main.h"

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "preflight/cli.h"
#include "preflight/drain_finisher.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"
#include "preflight/node_phase.h"
#include "preflight/process.h"
#include "preflight/slurm_conf.h"
#include "preflight/slurmctl.h"
#include "preflight/text.h"
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

// Give the node preflight's drain reason the way `how` says.
void HandOffDrain(const CommonCli& cli, const Config& cfg, const std::string& node, Phase phase, DrainMode how,
                  const std::string& reason) {
  const char* prog = ProgramName(phase);
  if (how == DrainMode::kNow) {
    Status d = DrainNode(cfg, node, reason);
    if (!d.ok()) Log(LogLevel::kError, prog, "drain " + node + " (PrologFlags=RunInJob)", d.message());
  } else if (how == DrainMode::kDetached) {
    std::vector<std::string> argv2 = {SelfExe(), "--finish-drain", node, "--reason", reason};
    // Claimed before this process exits, so before Slurm drains for this
    // failure: an older finisher still waiting on the node stands down.
    auto token = ClaimDrainFinish(cfg, node);
    if (token) { argv2.push_back("--drain-token"); argv2.push_back(*token); }
    else Log(LogLevel::kInfo, prog, "drain finisher claim", token.status().message());
    if (cli.config_given()) { argv2.push_back("--config"); argv2.push_back(cli.config); }
    for (const auto& kv : cli.sets) { argv2.push_back("--set"); argv2.push_back(kv); }
    Status d = SpawnDetached(argv2, {});
    if (!d.ok()) Log(LogLevel::kError, prog, "drain reason", d.message());
  }
}

// The detached helper (drain_finisher.h), bounded to 60 s of waiting.
int RunFinisher(const Config& cfg, Phase phase, const std::string& node, const std::string& reason,
                const std::string& token) {
  std::string what;
  Status d = FinishDrain(cfg, node, reason, token, 60000, &what);
  if (!d.ok()) Log(LogLevel::kError, ProgramName(phase), "drain " + node, d.message());
  else Log(LogLevel::kInfo, ProgramName(phase), "drain " + node, what);
  return d.ok() ? 0 : 1;
}

// The health check carries out its plan (node_phase.h: PlanHealth).
int HealthActions(const Config& cfg, const std::string& node, const NodeRunOutcome& out) {
  const char* prog = ProgramName(Phase::kHealth);
  std::string mark = state::NodeFile(cfg, node, state::kComment);
  auto st = QueryNode(cfg, node);
  if (!st) Log(LogLevel::kError, prog, "node state", st.status().message());
  HealthPlan plan = PlanHealth(out.failed, out.warnings, ::access(mark.c_str(), F_OK) == 0, st ? &*st : nullptr);
  if (plan.comment == HealthPlan::Comment::kSet) {
    Status c = SetNodeComment(cfg, node, out.warnings);
    if (!c.ok()) Log(LogLevel::kError, prog, "node comment " + node, c.message());
    else if (!(c = WriteFileAtomic(mark, out.warnings + "\n", 0644)).ok())
      Log(LogLevel::kError, prog, "comment record", c.message());
  } else if (plan.comment == HealthPlan::Comment::kClear) {
    Status c = SetNodeComment(cfg, node, "");
    if (!c.ok()) Log(LogLevel::kError, prog, "node comment " + node, c.message());
    else ::unlink(mark.c_str());
  }
  if (plan.drain) {
    Status d = DrainNode(cfg, node, out.drain_reason);
    if (!d.ok()) Log(LogLevel::kError, prog, "drain " + node, d.message());
  } else if (plan.resume) {
    Status r = ResumeNode(cfg, node);
    if (!r.ok()) Log(LogLevel::kError, prog, "resume " + node, r.message());
    else std::printf("preflight: health: %s passes again; resumed (was: %s)\n", node.c_str(), PrintableText(st->reason).c_str());
  }
  return out.failed ? 1 : 0;
}

// The site config does not load: the config owner's fault, not the job's
// nor the hardware's. Slurm drains the node for the non-zero exit with a bare
// "Prolog error"; the reason is then set to the config error (file, line,
// key) by the same detached helper as a node failure's, run with what parses
// of the config (the site's scontrol). The helper itself (`finish_drain`)
// gets here too and finishes the drain with that config.
int ConfigErrorExit(const CommonCli& cli, const std::string& node, Phase phase, const std::string& finish_drain,
                    const std::string& reason, const std::string& token, const Status& error, const EnvMap& env) {
  Config lenient = LoadConfigLenient(cli.config, node);
  for (const auto& kv : cli.sets) (void)ApplyOverrides(lenient, {kv}, "--set", node);
  if (!finish_drain.empty()) return RunFinisher(lenient, phase, finish_drain, reason, token);
  // By hand (no job: an admin trying the config) the error is only printed.
  if (!env.count("SLURM_JOB_ID")) return 2;
  DrainMode how = PlanDrain(phase, lenient.set_drain_reason, ReadPrologFlags(SlurmConfPath(lenient, env)));
  HandOffDrain(cli, lenient, node, phase, how, ConfigDrainReason(error.message()));
  return 2;
}

int Main(int argc, char** argv, Phase phase) {
  const char* prog = ProgramName(phase);
  CommonCli cli;
  std::string node, level_text, finish_drain, reason, token;
  po::options_description visible(std::string("Usage: ") + prog + " [OPTIONS]\n" + Purpose(phase) + "\n\nOptions");
  AddCommonOptions(visible, cli);
  visible.add_options()
      ("node", po::value<std::string>(&node)->value_name("NAME"), "node name (default: $SLURMD_NODENAME, else the host name)")
      ("level", po::value<std::string>(&level_text)->value_name("LEVEL"), "check level quick|full|off, overriding the job's");
  po::options_description hidden;
  hidden.add_options()
      ("finish-drain", po::value<std::string>(&finish_drain), "internal: set NODE's drain reason once Slurm drained it")
      ("reason", po::value<std::string>(&reason), "internal: the reason for --finish-drain")
      ("drain-token", po::value<std::string>(&token), "internal: the claim --finish-drain was started with");
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
    if (phase != Phase::kHealth) return ConfigErrorExit(cli, node, phase, finish_drain, reason, token, cfg.status(), env);
    return 2;
  }

  // Detached from the prolog; may take as long as slurmctld needs.
  if (!finish_drain.empty()) return RunFinisher(*cfg, phase, finish_drain, reason, token);

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
  NodeRunOutcome out = RunNodePhase(*cfg, *job, phase, env, prog);
  // slurmd logs what a prolog prints (SlurmdDebug=debug); an admin running it by hand sees it.
  std::fputs(out.summary.c_str(), stdout);
  std::fflush(stdout);
  if (!out.write_status.ok()) Log(LogLevel::kError, prog, "result file", out.write_status.message());
  if (phase == Phase::kHealth) return HealthActions(*cfg, node, out);
  if (!out.failed) return 0;
  Log(LogLevel::kError, PhaseName(phase), "node " + node + " failed", out.drain_reason);
  Expected<std::vector<std::string>> flags = Status::Unavailable("not read");
  if (cfg->set_drain_reason) {
    flags = ReadPrologFlags(SlurmConfPath(*cfg, env));
    if (!flags) Log(LogLevel::kInfo, prog, "slurm.conf PrologFlags", flags.status().message());
  }
  HandOffDrain(cli, *cfg, node, phase, PlanDrain(phase, cfg->set_drain_reason, flags), out.drain_reason);
  return 1;
}

}  // namespace

int NodeMain(int argc, char** argv, Phase phase) {
  return GuardedMain(ProgramName(phase), [&] { return Main(argc, argv, phase); });
}

}  // namespace preflight
