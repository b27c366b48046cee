// The acceptance run's nodes stage (run_stages.h): the node checks on every
// node at once, then the comparisons across the nodes of their versions
// (preflight fleet) and of their rails (preflight topo --compare).
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
  // The comparisons read the records the node checks just wrote, from the
  // same state_dir (node_state_dir, shared under --out, or the site's).
  // What they find is a note: the other stages go on.
  if (!Budget("the fleet comparison")) return;
  ProcessResult fl = Preflight({"fleet", Join(live_, ",")});
  if (fl.exit_code == 0) {
    Say("nodes: fleet versions consistent");
  } else {
    std::string text = LastLine(fl.output);
    Note("fleet: " + (text.empty() ? "exit " + std::to_string(fl.exit_code) : text));
  }
  if (live_.size() >= 2 && Budget("the rails comparison")) Rails();
}

void Stages::Rails() {
  // preflight topo --compare: the same comparison (rails.h: CompareRails)
  // the --nccl-check step prints; exit 0 same, 1 a node differs, 2 no
  // record to compare. Every line it prints is a finding: the odd node and
  // what differs, the nodes without a record, or why none was compared.
  ProcessResult rl = Preflight({"topo", "--compare", Join(live_, ",")});
  std::vector<std::string> lines;
  for (const auto& l : SplitNonEmpty(rl.output, '\n'))
    if (rl.exit_code != 0 || l.rfind("no rails record", 0) == 0) lines.push_back(l);
  if (rl.exit_code != 0 && lines.empty()) lines.push_back("exit " + std::to_string(rl.exit_code));
  // Bounded: a fabric where every node differs is one finding, not N lines
  // (and the records go with node_state_dir when the run ends).
  constexpr size_t kShown = 12;
  for (size_t i = 0; i < lines.size() && i < kShown; ++i) Note("rails: " + lines[i]);
  if (lines.size() > kShown) Note("rails: " + std::to_string(lines.size() - kShown) + " more lines not shown");
  if (rl.exit_code == 0) Say(lines.empty() ? "nodes: rails the same on every node" : "nodes: rails the same on the nodes with a record");
}

ProcessResult Stages::Preflight(const std::vector<std::string>& args) {
  std::vector<std::string> a = {o_.preflight};
  a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
  if (!o_.node_state_dir.empty()) a.insert(a.end(), {"--set", "state_dir=" + o_.node_state_dir});
  a.insert(a.end(), args.begin(), args.end());
  return run_(a, std::min(Left(), 60000u));
}

}  // namespace preflight::accept::run_internal
