// The config and options subcommands of `preflight` (config_cmd.h).
#include "config_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "preflight/config.h"
#include "preflight/config_check.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/options.h"
#include "preflight/plugstack.h"
#include "preflight/slurm_conf.h"

extern char** environ;

namespace preflight {

namespace {

// What slurm.conf's PrologFlags mean for preflight (notes, never an error:
// the admin host may not carry the nodes' slurm.conf).
void SlurmConfNotes(const Config& cfg) {
  std::string path = SlurmConfPath(cfg, EnvironToMap(environ));
  auto flags = ReadPrologFlags(path);
  if (!flags) {
    std::printf("%s: not read (%s): PrologFlags not checked\n", path.c_str(), flags.status().message().c_str());
    return;
  }
  std::string list;
  for (const auto& f : *flags) list += (list.empty() ? "" : ",") + f;
  bool alloc = false;
  // Contain implies Alloc, RunInJob implies Contain (slurm.conf(5)).
  for (const auto& f : *flags) alloc = alloc || f == "alloc" || f == "contain" || f == "runinjob";
  if (!alloc)
    std::printf("%s: PrologFlags=%s: without Alloc the prolog runs only on the batch host, at the first step; "
                "the other nodes are never checked before the job\n", path.c_str(), list.empty() ? "(none)" : list.c_str());
  bool defer = std::find(flags->begin(), flags->end(), "deferbatch") != flags->end();
  if (alloc && !defer)
    std::printf("%s: PrologFlags=%s: without DeferBatch slurmctld starts the batch script as soon as the first "
                "node's prolog completes, while the other nodes may still be checked; add DeferBatch\n",
                path.c_str(), list.c_str());
  auto text = ReadWholeFile(path);
  long window = text ? BatchStartWindow(*text) : 20;
  if (defer && !cfg.stage.dir.empty() && window * 1000L < static_cast<long>(cfg.stage.timeout_ms))
    std::printf("%s: BatchStartTimeout: a stage prolog may run up to stage_timeout (%us), but slurmctld requeues a "
                "job whose batch script has not started %lds after the job did, if its batch node registers "
                "meanwhile (BatchStartTimeout + MessageTimeout); set BatchStartTimeout to at least %u\n",
                path.c_str(), cfg.stage.timeout_ms / 1000, window, cfg.stage.timeout_ms / 1000);
  if (DrainHowFor(*flags) == DrainHow::kNow)
    std::printf("%s: PrologFlags=%s: RunInJob runs the prolog inside the job's extern step, so a failed prolog "
                "drains its node itself, before it exits (no detached helper)\n", path.c_str(), list.c_str());
}

}  // namespace

int ConfigCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  std::string sub = args.empty() ? "check" : args[0];
  if (sub == "keys") {
    for (const auto& k : ConfigKeys()) std::printf("%-24s %-9s %s\n", k.name, k.type, k.help);
    return 0;
  }
  auto cfg = LoadCliConfig(cli, args.size() > 1 ? args[1] : "");
  if (!cfg) {
    Log(LogLevel::kError, "config", "invalid", cfg.status().message());
    return 1;
  }
  if (sub == "check") {
    // The files and folders it names, as the node binaries will take them
    // (config_check.h): what would drain nodes fails the check here.
    auto findings = CheckConfigOnHost(*cfg);
    int errors = 0;
    for (const auto& f : findings)
      if (f.level == ConfigFinding::Level::kError) {
        Log(LogLevel::kError, "config", "invalid", f.message);
        ++errors;
      }
    if (!errors) std::printf("%s: ok\n", cfg->source.empty() ? "(defaults)" : cfg->source.c_str());
    for (const auto& f : findings)
      if (f.level != ConfigFinding::Level::kError)
        std::printf("%s: %s\n", f.level == ConfigFinding::Level::kWarning ? "warning" : "note", f.message.c_str());
    if (errors) return 1;
    SlurmConfNotes(*cfg);
    // The SPANK stack as slurmd loads it: preflight.so after pyxis (plugstack.h).
    for (const auto& line : PlugstackNotes(SlurmConfPath(*cfg, EnvironToMap(environ)))) std::printf("%s\n", line.c_str());
    return 0;
  }
  if (sub == "show") {
    std::fputs(DumpConfig(*cfg).c_str(), stdout);
    return 0;
  }
  Log(LogLevel::kError, "config", "unknown subcommand '" + sub + "'", "expected check, show or keys");
  return 2;
}

int OptionsCmd(const std::vector<std::string>&, const CommonCli&) {
  for (const auto& o : UserOptions()) {
    std::string flag = std::string("--") + o.name;
    if (o.arginfo) flag += o.has_arg == 2 ? std::string("[=") + o.arginfo + "]" : std::string("=") + o.arginfo;
    std::printf("%-28s %s\n", flag.c_str(), o.usage);
  }
  return 0;
}

}  // namespace preflight
