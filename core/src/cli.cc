#include "preflight/cli.h"

#include "preflight/hostlist.h"

#include <exception>

#include "preflight/log.h"

namespace preflight {

const char* VersionString() { return PREFLIGHT_VERSION; }

void AddCommonOptions(po::options_description& desc, CommonCli& cli) {
  desc.add_options()
      ("help,h", po::bool_switch(&cli.help), "print this help and exit")
      ("version", po::bool_switch(&cli.version), "print the version and exit")
      ("config,c", po::value<std::string>(&cli.config)->value_name("FILE"),
       "site config file (default /etc/preflight/preflight.conf)")
      ("set", po::value<std::vector<std::string>>(&cli.sets)->value_name("KEY=VALUE")->composing(),
       "override one site config key (repeatable)");
}

Status ParseCommandLine(int argc, char** argv, const po::options_description& all,
                        const po::positional_options_description* pos, po::variables_map& vm) {
  try {
    po::command_line_parser p(argc, argv);
    p.options(all);
    if (pos != nullptr) p.positional(*pos);
    po::store(p.run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Status::InvalidArgument(e.what());
  }
  return Status::Ok();
}

Status ParseCommandLineWords(int argc, char** argv, const po::options_description& visible,
                             std::vector<std::string>* words, po::variables_map& vm) {
  po::options_description hidden;
  hidden.add_options()("preflight-words", po::value<std::vector<std::string>>(words), "");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description pos;
  pos.add("preflight-words", -1);
  return ParseCommandLine(argc, argv, all, &pos, vm);
}

Expected<Config> LoadCliConfig(const CommonCli& cli, const std::string& node) {
  // A node name given on the command line becomes a path component (%n in
  // path keys, state_dir/nodes/<node>...): Slurm's node-name charset only.
  if (!node.empty()) {
    Status v = ValidNodeName(node);
    if (!v.ok()) return v;
  }
  auto cfg = LoadConfig(cli.config, node, cli.config_given());
  if (!cfg) return cfg;
  Status s = ApplyOverrides(*cfg, cli.sets, "--set", node);
  if (!s.ok()) return s;
  return cfg;
}

int GuardedMain(const std::string& who, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    Log(LogLevel::kError, who, "unexpected error", e.what());
  } catch (...) {
    Log(LogLevel::kError, who, "unexpected error", "unknown exception");
  }
  return 2;
}

}  // namespace preflight
