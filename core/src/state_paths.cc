#include "preflight/state_paths.h"

namespace preflight::state {
namespace {
std::string Node(const std::string& node) { return node.empty() ? std::string("localhost") : node; }
}  // namespace

std::string NodesDir(const Config& cfg) { return cfg.state_dir + "/nodes"; }
std::string JobDir(const Config& cfg, const std::string& job) { return cfg.state_dir + "/jobs/" + job; }
std::string NodeFile(const Config& cfg, const std::string& node, const std::string& suffix) {
  return NodesDir(cfg) + "/" + Node(node) + suffix;
}
std::string JobNodeFile(const Config& cfg, const std::string& job, const std::string& node, const std::string& suffix) {
  return JobDir(cfg, job) + "/" + Node(node) + suffix;
}

}  // namespace preflight::state
