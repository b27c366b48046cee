#include "plugin_args.h"

namespace preflight {

Expected<PluginArgs> ParsePluginArgs(int argc, char** argv) {
  PluginArgs a;
  Config scratch;  // validates values without touching a real config
  for (int i = 0; i < argc; ++i) {
    std::string item = argv[i] ? argv[i] : "";
    if (item.rfind("conf=", 0) == 0) {
      a.conf = item.substr(5);
      a.conf_given = true;
      if (a.conf.empty()) return Status::InvalidArgument("plugstack.conf argument 'conf=': empty path");
      continue;
    }
    Status s = ApplyOverrides(scratch, {item}, "plugstack.conf argument", "");
    if (!s.ok()) return s;
    a.overrides.push_back(item);
  }
  return a;
}

Expected<Config> LoadPluginConfig(const PluginArgs& args, const std::string& node) {
  auto cfg = LoadConfig(args.conf, node, args.conf_given);
  if (!cfg) return cfg;
  Status s = ApplyOverrides(*cfg, args.overrides, "plugstack.conf argument", node);
  if (!s.ok()) return s;
  return cfg;
}

}  // namespace preflight
