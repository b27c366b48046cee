// preflight: the admin command (man preflight(8)). Its subcommands, each a
// thin shell in a file of its own over the libraries:
//   config, options          config_cmd.h
//   topo                     topo_cmd.h
//   cache, state             cache_cmd.h
//   fleet, reasons, slurm    fleet_cmd.h
//   accept                   accept_cmd.h (its storage worker: accept/)
//   container                container_cmd.h
//   version                  here
// This file is their table, kCommands (each row a subcommand's synopses and
// what it does: the help text; `preflight COMMAND --help` prints its own),
// and Main, which parses the command line and runs the row named.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "accept_cmd.h"
#include "cache_cmd.h"
#include "config_cmd.h"
#include "container_cmd.h"
#include "fleet_cmd.h"
#include "preflight/cli.h"
#include "preflight/log.h"
#include "topo_cmd.h"

namespace {

using namespace preflight;

// One row per subcommand: its synopsis lines (what `preflight --help` lists
// and `preflight COMMAND --help` prints) and what it does.
struct Usage {
  const char* synopsis;
  const char* what;
};
struct Command {
  const char* name;
  Usage usage[2];  // a second synopsis line, or {nullptr, nullptr}
  int (*run)(const std::vector<std::string>& args, const CommonCli& cli);
};

int VersionCmd(const std::vector<std::string>&, const CommonCli&) {
  std::cout << "preflight " << VersionString() << "\n";
  return 0;
}

const Command kCommands[] = {
    {"config", {{"config check|show|keys [NODE]", "validate, print or list the site config"}, {}}, ConfigCmd},
    {"options", {{"options", "the job options the SPANK plugin adds"}, {}}, OptionsCmd},
    {"topo",
     {{"topo [--xml F [--fsroot D]] [--gpus L] [--nodes N] [--json]", "GPU-NIC table and a task's env"},
      {"topo --compare [HOSTLIST|FILE]...", "compare nodes' rails records, name the odd node"}},
     TopoCmd},
    {"fleet", {{"fleet [HOSTLIST|FILE]...", "nodes' driver/VBIOS/InfoROM/HCA firmware/kernel records; name the odd node"}, {}},
     FleetCmd},
    {"cache", {{"cache ls|gc|rm KEY|SRC [node=N]", "list, trim or remove --stage cached datasets"}, {}}, CacheCmd},
    {"state", {{"state gc [--dry-run] [node=N]", "prune state_dir/jobs to state_keep and state_keep_size"}, {}}, StateCmd},
    {"reasons", {{"reasons [HOSTLIST]", "preflight's drains (default: on every node) as JSON, parsed"}, {}}, ReasonsCmd},
    {"slurm", {{"slurm job J|steps J|nodes LIST", "slurmctld's records as JSON (what root-run code reads)"}, {}},
     SlurmRecordsCmd},
    {"accept",
     {{"accept [--level quick|full] [--out DIR] [--storage PATH]...", "cluster acceptance run inside an allocation: report.json + report.html"},
      {}},
     AcceptCmd},
    {"container", {{"container enroot-mounts", "the enroot fstab lines giving a job's container its preflight folders (the enroot hook)"}, {}},
     ContainerCmd},
    {"version", {{"version", "print the version"}, {}}, VersionCmd},
};

// The synopses of `commands`, in one column as wide as the widest, then what
// each does.
std::string UsageLines(const std::vector<const Command*>& commands) {
  size_t width = 0;
  for (const Command* c : commands)
    for (const Usage& u : c->usage)
      if (u.synopsis) width = std::max(width, std::strlen(u.synopsis));
  std::string o;
  for (const Command* c : commands)
    for (const Usage& u : c->usage) {
      if (!u.synopsis) continue;
      o += "  " + std::string(u.synopsis) + std::string(width - std::strlen(u.synopsis) + 2, ' ') + u.what + "\n";
    }
  return o;
}

int Main(int argc, char** argv) {
  CommonCli cli;
  std::vector<std::string> words;
  std::vector<const Command*> all;
  for (const auto& c : kCommands) all.push_back(&c);
  // 100 columns: at boost's default 80 the option help wraps mid-word.
  po::options_description common("Options", 100);
  AddCommonOptions(common, cli);
  po::options_description topo_opts("Options of 'preflight topo'", 100);
  AddTopoOptions(topo_opts);
  po::options_description state_opts("Options of 'preflight state gc'", 100);
  AddStateOptions(state_opts);
  po::options_description accept_opts("Options of 'preflight accept'", 100);
  po::options_description accept_hidden;
  AddAcceptOptions(accept_opts, accept_hidden);
  po::options_description visible(100);
  visible.add(common).add(topo_opts).add(state_opts).add(accept_opts);
  po::options_description parsed_opts;
  parsed_opts.add(visible).add(accept_hidden);
  const std::string general = "Usage: preflight [OPTIONS] COMMAND [ARGS...]\nCommands:\n" + UsageLines(all);
  po::variables_map vm;
  Status s = ParseCommandLineWords(argc, argv, parsed_opts, &words, vm);
  if (!s.ok()) {
    Log(LogLevel::kError, "admin", "bad command line", s.message());
    return 2;
  }
  if (!TopoOptionsParsed(vm)) return 2;
  const Command* cmd = nullptr;
  for (const auto& c : kCommands)
    if (!words.empty() && words[0] == c.name) cmd = &c;
  if (cli.help && cmd != nullptr) {
    // `preflight fleet --help`: that command's usage and the options it reads.
    std::cout << "Usage: preflight [OPTIONS] " << cmd->name << " ...\n" << UsageLines({cmd}) << "\n";
    if (std::strcmp(cmd->name, "topo") == 0) std::cout << topo_opts << "\n";
    if (std::strcmp(cmd->name, "state") == 0) std::cout << state_opts << "\n";
    if (std::strcmp(cmd->name, "accept") == 0) std::cout << accept_opts << "\n";
    std::cout << common << "\nSee preflight(8).\n";
    return 0;
  }
  if (cli.help) { std::cout << general << visible << "\n"; return 0; }
  if (cli.version) return VersionCmd({}, cli);
  if (words.empty()) {
    std::cerr << general << visible << "\n";
    return 2;
  }
  if (cmd != nullptr) return cmd->run(std::vector<std::string>(words.begin() + 1, words.end()), cli);
  Log(LogLevel::kError, "admin", "unknown command '" + words[0] + "'", "see preflight --help");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  return preflight::GuardedMain("admin", [&] { return Main(argc, argv); });
}
