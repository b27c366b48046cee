// The plugin's arguments on its plugstack.conf line: conf=PATH plus config
// keys (key=value overrides). Slurm-free, so that it is tested without
// Slurm (test/plugin_args_test.cc); plugin.cc parses them once in
// slurm_spank_init and each callback loads the config they point at.
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

// Arguments on the plugin's plugstack.conf line: conf=PATH plus config keys.
struct PluginArgs {
  std::string conf = kDefaultConfigPath;
  bool conf_given = false;
  std::vector<std::string> overrides;  // validated key=value
};
Expected<PluginArgs> ParsePluginArgs(int argc, char** argv);

// Load the config the plugin's arguments point at, with their overrides.
Expected<Config> LoadPluginConfig(const PluginArgs& args, const std::string& node);

}  // namespace preflight
