#include "preflight/slurmctl.h"

#include <unistd.h>

#include "preflight/process.h"
#include "preflight/report.h"

namespace preflight {

bool NodeState::ours() const { return reason.rfind(kDrainPrefix, 0) == 0; }

namespace {

std::vector<std::string> ScontrolEnv(const Config& cfg) {
  if (cfg.slurm_conf.empty()) return {};
  return {"SLURM_CONF=" + cfg.slurm_conf};
}

Expected<std::string> Scontrol(const Config& cfg, std::vector<std::string> args) {
  args.insert(args.begin(), cfg.scontrol);
  auto r = RunCommand(args, ScontrolEnv(cfg), cfg.probe_timeout_ms);
  if (!r) return r.status();
  std::string cmd;
  for (const auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
  if (r->timed_out) return Status::Timeout(cmd + ": no answer within " + std::to_string(cfg.probe_timeout_ms) + " ms");
  if (r->exit_code != 0) {
    std::string out = r->output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return Status::IOError(cmd + ": exit " + std::to_string(r->exit_code) + ": " + out);
  }
  return r->output;
}

}  // namespace

Expected<NodeState> ParseNodeLine(const std::string& line) {
  NodeState s;
  size_t st = line.find(" State=");
  if (st == std::string::npos) return Status::InvalidArgument("no State= in scontrol output");
  size_t b = st + 7;
  s.state = line.substr(b, line.find(' ', b) - b);
  size_t r = line.find(" Reason=");
  if (r != std::string::npos) {
    std::string reason = line.substr(r + 8);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    // Slurm appends " [user@timestamp]" and, with -o, may follow with more
    // fields; the bracket ends the reason.
    size_t br = reason.rfind(" [");
    if (br != std::string::npos) reason = reason.substr(0, br);
    s.reason = reason;
  }
  return s;
}

Expected<NodeState> QueryNode(const Config& cfg, const std::string& node) {
  auto out = Scontrol(cfg, {"-o", "show", "node", node});
  if (!out) return out.status();
  return ParseNodeLine(*out);
}

Status DrainNode(const Config& cfg, const std::string& node, const std::string& reason) {
  auto out = Scontrol(cfg, {"update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason});
  return out.status();
}

Status ResumeNode(const Config& cfg, const std::string& node) {
  auto out = Scontrol(cfg, {"update", "NodeName=" + node, "State=RESUME"});
  return out.status();
}

Status FinishDrain(const Config& cfg, const std::string& node, const std::string& reason, unsigned wait_ms) {
  double deadline = MonotonicSeconds() + wait_ms / 1000.0;
  while (MonotonicSeconds() < deadline) {
    auto st = QueryNode(cfg, node);
    if (st && st->drained()) break;
    ::usleep(100 * 1000);
  }
  return DrainNode(cfg, node, reason);
}

Expected<std::string> JobField(const Config& cfg, const std::string& job, const std::string& field) {
  auto out = Scontrol(cfg, {"-o", "show", "job", job});
  if (!out) return out.status();
  std::string key = " " + field + "=";
  std::string line = " " + *out;
  size_t at = line.find(key);
  if (at == std::string::npos) return std::string();
  size_t b = at + key.size();
  std::string v = line.substr(b, line.find_first_of(" \n", b) - b);
  return v == "(null)" ? std::string() : v;
}

Status RequeueJob(const Config& cfg, const std::string& job) { return Scontrol(cfg, {"requeue", job}).status(); }

Status SetJobExcludedNodes(const Config& cfg, const std::string& job, const std::string& hostlist) {
  return Scontrol(cfg, {"update", "JobId=" + job, "ExcNodeList=" + hostlist}).status();
}

Expected<std::vector<std::string>> NodesDrainedByPreflight(const Config& cfg, const std::string& hostlist) {
  auto out = Scontrol(cfg, {"-o", "show", "node", hostlist});
  if (!out) return out.status();
  std::vector<std::string> nodes;
  size_t b = 0;
  while (b < out->size()) {
    size_t e = out->find('\n', b);
    if (e == std::string::npos) e = out->size();
    std::string line = out->substr(b, e - b);
    b = e + 1;
    if (line.rfind("NodeName=", 0) != 0) continue;
    auto st = ParseNodeLine(line);
    if (st && st->drained() && st->ours()) nodes.push_back(line.substr(9, line.find(' ') - 9));
  }
  return nodes;
}

}  // namespace preflight
