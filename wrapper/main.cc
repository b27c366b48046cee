// preflight-run: runs the training command inside the job (man preflight-run(1)).
// This shell parses the command line into a RunPolicy and hands it to the
// core's RunJob; it never throws out of main().
#include <cstdio>
#include <exception>
#include <pwd.h>
#include <unistd.h>

#include <iostream>

#include "preflight/cli.h"
#include "preflight/log.h"
#include "preflight/run_job.h"
#include "preflight/run_persist.h"

extern char** environ;

namespace {

using namespace preflight;

int Main(int argc, char** argv) {
  CommonCli cli;
  RunCli run;
  std::vector<std::string> command;
  po::options_description visible(
      "Usage: preflight-run [OPTIONS] -- COMMAND [ARGS...]\n"
      "Run COMMAND inside the job: relay signals, turn preemption into checkpoint + requeue,\n"
      "resume from the newest complete checkpoint, retry infrastructure failures, watch for stalls.\n"
      "Options override the site config's run_* keys.\n\nOptions");
  AddCommonOptions(visible, cli);
  AddRunOptions(visible, run);
  // The hidden mode of the per-node checkpoint agent (run_persist.h).
  po::options_description all;
  all.add(visible);
  all.add_options()("persist-agent", po::bool_switch(&run.persist_agent), "");
  po::variables_map vm;
  Status s = ParseCommandLineWords(argc, argv, all, &command, vm);
  if (!s.ok()) {
    Log(LogLevel::kError, "run", "bad command line", s.message());
    return 2;
  }
  if (cli.help) { std::cout << visible << "\n"; return 0; }
  if (cli.version) { std::cout << "preflight-run " << VersionString() << "\n"; return 0; }
  if (command.empty() && !run.persist_agent) {
    Log(LogLevel::kError, "run", "bad command line", "no COMMAND given (preflight-run [OPTIONS] -- COMMAND ...)");
    return 2;
  }
  EnvMap env = EnvironToMap(environ);
  auto node = env.count("SLURMD_NODENAME") ? env["SLURMD_NODENAME"] : ShortHostname();
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, "run", "site config", cfg.status().message());
    return 2;
  }
  run.node = node;
  if (const struct passwd* pw = ::getpwuid(::getuid())) run.user = pw->pw_name;
  if (env.count("PREFLIGHT_CKPT_LOCAL")) run.ckpt_local = env["PREFLIGHT_CKPT_LOCAL"];
  auto policy = ResolveRunPolicy(*cfg, vm, run);
  if (!policy) {
    Log(LogLevel::kError, "run", "bad option", policy.status().message());
    return run.persist_agent ? 0 : 2;  // the agent never fails the job
  }
  if (run.persist_agent) return RunPersistAgentTask(*cfg, *policy, env);
  if (cli.config_given()) policy->config_path = cli.config;
  policy->config_sets = cli.sets;
  return RunJob(*cfg, *policy, env, command);
}

}  // namespace

int main(int argc, char** argv) {
  return preflight::GuardedMain("run", [&] { return Main(argc, argv); });
}
