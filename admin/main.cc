// preflight: the admin command (man preflight(8)).
//   preflight config check|show|keys    validate, print, or list site config keys
//   preflight options                   the job options the SPANK plugin adds
//   preflight version
// Subcommands added by later components register in kCommands below.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include "preflight/cli.h"
#include "preflight/log.h"
#include "preflight/options.h"

namespace {

using namespace preflight;

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
    std::printf("%s: ok\n", cfg->source.empty() ? "(defaults)" : cfg->source.c_str());
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

struct Command {
  const char* name;
  const char* usage;
  int (*run)(const std::vector<std::string>& args, const CommonCli& cli);
};

const Command kCommands[] = {
    {"config", "config check|show|keys [NODE]   validate, print or list the site config", ConfigCmd},
    {"options", "options                         the job options the SPANK plugin adds", OptionsCmd},
};

int Main(int argc, char** argv) {
  CommonCli cli;
  std::vector<std::string> words;
  std::string usage = "Usage: preflight [OPTIONS] COMMAND [ARGS...]\nCommands:\n";
  for (const auto& c : kCommands) usage += std::string("  ") + c.usage + "\n";
  po::options_description visible(usage + "\nOptions");
  AddCommonOptions(visible, cli);
  po::options_description hidden;
  hidden.add_options()("words", po::value<std::vector<std::string>>(&words), "");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description pos;
  pos.add("words", -1);
  po::variables_map vm;
  Status s = ParseCommandLine(argc, argv, all, &pos, vm);
  if (!s.ok()) {
    Log(LogLevel::kError, "admin", "bad command line", s.message());
    return 2;
  }
  if (cli.help) { std::cout << visible << "\n"; return 0; }
  if (cli.version || (!words.empty() && words[0] == "version")) {
    std::cout << "preflight " << VersionString() << "\n";
    return 0;
  }
  if (words.empty()) {
    std::cerr << visible << "\n";
    return 2;
  }
  for (const auto& c : kCommands)
    if (words[0] == c.name) return c.run(std::vector<std::string>(words.begin() + 1, words.end()), cli);
  Log(LogLevel::kError, "admin", "unknown command '" + words[0] + "'", "see preflight --help");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "admin", "unexpected error", e.what());
  } catch (...) {
    Log(LogLevel::kError, "admin", "unexpected error", "unknown exception");
  }
  return 2;
}
