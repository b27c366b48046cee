// The acceptance run's nodes stage (run_stages.h): the node checks on every
// node at once, then the fleet comparison of their versions.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "run_stages.h"

namespace preflight::accept::run_internal {

void Stages::Nodes() {
  if (!Budget("the node checks")) return;
  // Each task runs the checks and then names its node and exit code; the
  // program path and arguments are sh's positional parameters, never
  // parsed by the shell.
  std::vector<std::string> a = Srun(live_, false, 1, true);
  a.insert(a.end(), {"/bin/sh", "-c", "\"$0\" \"$@\" 2>&1; echo \"#accept-node ${SLURMD_NODENAME:-?} $?\"", o_.prolog,
                     "--level", o_.level, "--set", "set_drain_reason=no"});
  a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
  if (!o_.node_state_dir.empty()) a.insert(a.end(), {"--set", "state_dir=" + o_.node_state_dir});
  Say("nodes: node checks (level " + o_.level + ") on " + std::to_string(live_.size()) + " nodes");
  ProcessResult p = run_(a, Left());
  std::set<std::string> seen;
  for (const auto& [task, text] : SplitLabelled(p.output)) {
    size_t m = text.rfind("#accept-node ");
    if (m == std::string::npos) continue;
    std::string tail = text.substr(m + 13);
    std::string node = tail.substr(0, tail.find(' '));
    int rc = std::atoi(tail.c_str() + node.size() + 1);
    std::string body = text.substr(0, m);
    seen.insert(node);
    r_->node_checks[node] = rc == 0 ? "" : "exit " + std::to_string(rc) + ": " + LastLine(body);
  }
  if (p.timed_out) Note("node checks did not finish within the budget");
  std::vector<std::string> missing;
  for (const auto& n : live_)
    if (!seen.count(n)) missing.push_back(n);
  if (!missing.empty()) {
    FindLost(missing, "the node checks");
    for (const auto& n : missing)
      if (!r_->lost_nodes.count(n))
        r_->node_checks[n] = "no result from the node checks (" + (p.timed_out ? std::string("timed out") : LastLine(p.output)) + ")";
  }
  if (!Budget("the fleet comparison")) return;
  std::vector<std::string> f = {o_.preflight};
  f.insert(f.end(), o_.pass_args.begin(), o_.pass_args.end());
  if (!o_.node_state_dir.empty()) f.insert(f.end(), {"--set", "state_dir=" + o_.node_state_dir});
  f.insert(f.end(), {"fleet", Join(live_, ",")});
  ProcessResult fl = run_(f, std::min(Left(), 60000u));
  if (fl.exit_code == 0) {
    Say("nodes: fleet versions consistent");
  } else {
    std::string text = LastLine(fl.output);
    Note("fleet: " + (text.empty() ? "exit " + std::to_string(fl.exit_code) : text));
  }
}

}  // namespace preflight::accept::run_internal
