// What every preflight binary's command line shares: --help, --version,
// --config, --set KEY=VALUE. Built on Boost.Program_options; parse errors
// come back as values with the parser's own message kept.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

namespace po = boost::program_options;

struct CommonCli {
  std::string config = kDefaultConfigPath;
  std::vector<std::string> sets;
  bool help = false;
  bool version = false;
  bool config_given() const { return config != kDefaultConfigPath; }
};

void AddCommonOptions(po::options_description& desc, CommonCli& cli);

// Parse argv into `vm` (visible + hidden, positionals optional). Unknown
// options and bad values become InvalidArgument with the parser's text.
Status ParseCommandLine(int argc, char** argv, const po::options_description& all,
                        const po::positional_options_description* pos, po::variables_map& vm);

// ParseCommandLine for a command whose non-option words (after its
// options, or after "--") are collected in order into `words`: the admin
// command's subcommand words, the wrapper's COMMAND [ARGS...].
Status ParseCommandLineWords(int argc, char** argv, const po::options_description& visible,
                             std::vector<std::string>* words, po::variables_map& vm);

// Site config for a binary: the file (required when given explicitly) plus --set.
Expected<Config> LoadCliConfig(const CommonCli& cli, const std::string& node);

const char* VersionString();

// The one main() of every preflight binary: `body()`, with an exception
// that escapes it logged ("<who>: unexpected error: ...") and turned into
// exit 2 (usage or internal error), never a crash or a pass.
int GuardedMain(const std::string& who, const std::function<int()>& body);

}  // namespace preflight
