// The machinery every stage of the acceptance run uses (run_stages.h):
// budgets, progress lines, srun command lines, lost nodes; and the text
// helpers the stages share.
#include "run_stages.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "preflight/slurmctl.h"

namespace preflight::accept::run_internal {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string F(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

namespace {

std::string Quote(const std::string& a) {
  if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+") ==
                        std::string::npos)
    return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string Cmdline(const std::vector<std::string>& argv) {
  std::string o;
  for (const auto& a : argv) o += (o.empty() ? "" : " ") + Quote(a);
  return o;
}

std::map<int, std::string> SplitLabelled(const std::string& out) {
  std::map<int, std::string> by;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    size_t i = line.find_first_not_of(' ');
    size_t colon = line.find(": ");
    if (i == std::string::npos || colon == std::string::npos || colon <= i) continue;
    std::string id = line.substr(i, colon - i);
    if (id.find_first_not_of("0123456789") != std::string::npos) continue;
    by[std::stoi(id)] += line.substr(colon + 2) + "\n";
  }
  return by;
}

std::string LastLine(const std::string& out) {
  size_t end = out.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t start = out.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string l = out.substr(start, end - start + 1);
  return l.size() > 240 ? l.substr(0, 240) + "..." : l;
}

template <class Fn>
void Stages::Timed(size_t i, Fn fn) {
  stage_ = &r_->stages[i];
  deadline_ = Now() + stage_->budget_seconds;
  double t0 = Now();
  Say(stage_->name + ": start (budget " + F("%.0f", stage_->budget_seconds) + " s, " +
      std::to_string(live_.size()) + " nodes)");
  fn();
  stage_->seconds = Now() - t0;
  Say(stage_->name + ": done in " + F("%.1f", stage_->seconds) + " s");
}

void Stages::Go() {
  for (const auto& n : o_.nodes) live_.push_back(n);
  r_->stages = {{"nodes", Verdict::kSkip, 0, o_.budget_nodes, {}},
                {"collective", Verdict::kSkip, 0, o_.budget_collective, {}},
                {"storage", Verdict::kSkip, 0, o_.budget_storage, {}},
                {"train", Verdict::kSkip, 0, o_.budget_train, {}}};
  Timed(0, [this] { Nodes(); });
  Timed(1, [this] { Collective(); });
  Timed(2, [this] { Storage(); });
  Timed(3, [this] { Train(); });
}

void Stages::Say(const std::string& line) {
  if (progress_) progress_("preflight accept: " + line);
}

void Stages::Note(const std::string& line) {
  stage_->notes.push_back(line);
  Say(stage_->name + ": " + line);
}

unsigned Stages::Left() const {
  double s = deadline_ - Now();
  return s <= 1 ? 0 : static_cast<unsigned>(s * 1000);
}

bool Stages::Budget(const std::string& what) {
  if (Left() > 0) return true;
  Note("budget of " + F("%.0f", stage_->budget_seconds) + " s spent: " + what + " not run");
  return false;
}

std::vector<std::string> Stages::Srun(const std::vector<std::string>& nodes, bool pmix, int per_node, bool label) {
  std::vector<std::string> a = {o_.srun, "--nodes=" + std::to_string(nodes.size()), "--nodelist=" + Join(nodes, ","),
                                "--ntasks-per-node=" + std::to_string(per_node),
                                "--ntasks=" + std::to_string(per_node * static_cast<int>(nodes.size())),
                                "--kill-on-bad-exit=0"};
  if (pmix) a.push_back("--mpi=pmix");
  if (label) a.push_back("--label");
  return a;
}

void Stages::FindLost(const std::vector<std::string>& nodes, const std::string& step) {
  // slurmctld's node records as core reads them (`preflight slurm nodes`,
  // JSON; slurmctl.h), never sinfo's text.
  ProcessResult p = Preflight({"slurm", "nodes", Join(nodes, ",")});
  if (p.exit_code != 0) return;
  auto records = ParseNodeRecords(p.output);
  if (!records) return;
  for (const NodeState& n : *records) {
    // Slurm's complete state: DOWN, or a flag +NOT_RESPONDING, +FAIL.
    bool lost = n.state.find("DOWN") != std::string::npos || n.state.find("NOT_RESPONDING") != std::string::npos ||
                n.state.find("FAIL") != std::string::npos;
    if (!lost || r_->lost_nodes.count(n.name) || std::find(nodes.begin(), nodes.end(), n.name) == nodes.end()) continue;
    r_->lost_nodes[n.name] = "during " + step + " (Slurm: " + n.state + ")";
    live_.erase(std::remove(live_.begin(), live_.end(), n.name), live_.end());
    Note(n.name + " lost mid-run during " + step + " (Slurm: " + n.state + "): later steps run without it");
  }
}

}  // namespace preflight::accept::run_internal
