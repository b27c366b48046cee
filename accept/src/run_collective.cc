// The acceptance run's collective stage (run_stages.h): the intra-node
// sweeps, the sweeps at growing node counts, and the ring pairs, each
// suspect measured twice before it is blamed.
#include <algorithm>
#include <set>

#include "preflight/collective_records.h"
#include "preflight/straggler.h"
#include "run_stages.h"

namespace preflight::accept::run_internal {

std::vector<std::string> Stages::NcclArgs(std::vector<std::string> a) {
  a.push_back(o_.nccl);
  a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
  a.insert(a.end(), {"--level", o_.level});
  if (!o_.max_bytes.empty()) a.insert(a.end(), {"--max-bytes", o_.max_bytes});
  return a;
}

// A launch whose PMIx fence never completed (Slurm 22.05's stepd can refuse
// a peer's direct connection while it launches its task; the fence then
// waits until preflight-nccl's watchdog ends the rank) says nothing about
// the nodes: it is run again, up to kBootstrapLaunches in all, within the
// stage's budget.
ProcessResult Stages::Launch(const std::vector<std::string>& a, const std::string& what) {
  ProcessResult p = run_(a, Left());
  for (int launch = 2; launch <= collective::kBootstrapLaunches; ++launch) {
    if (p.exit_code == 0 || p.timed_out || p.output.find(collective::kNoBootstrapLine) == std::string::npos) return p;
    if (!Budget(what + " again")) return p;
    Note(what + ": no PMIx bootstrap within nccl_timeout (a fence Slurm never completed): launch " +
         std::to_string(launch) + " of " + std::to_string(collective::kBootstrapLaunches));
    p = run_(a, Left());
  }
  return p;
}

void Stages::Collective() {
  int per = o_.ranks_per_node > 0 ? o_.ranks_per_node : 1;
  // Intra-node on every node at once: one JSON document per task.
  if (Budget("the intra-node sweeps")) IntraNode();
  if (live_.size() < 2) {
    Note("one node: the curve is intra-node only (no inter-node figure, no scaling, no ring pairs, no all-gather, "
         "reduce-scatter or all-to-all across nodes)");
    return;
  }
  for (int k : NodeCounts(static_cast<int>(live_.size()))) {
    if (k > static_cast<int>(live_.size())) break;
    if (!Budget(std::to_string(k) + "-node sweep")) return;
    std::vector<std::string> nodes(live_.begin(), live_.begin() + k);
    std::vector<std::string> a = NcclArgs(Srun(nodes, true, per, false));
    a.push_back("--json");
    double t0 = Now();
    ProcessResult p = Launch(a, "the " + std::to_string(k) + "-node sweep");
    Curve c;
    Status s = ParseNcclJson(p.output, &c);
    c.nodes = k;
    c.node_names = nodes;
    c.reproduce = Cmdline(a);
    if (!s.ok()) {
      c.error = p.timed_out ? "no verdict within the stage budget" : "no result: " + LastLine(p.output);
      FindLost(nodes, std::to_string(k) + "-node sweep");
    }
    r_->curves.push_back(c);
    Say("collective: " + std::to_string(k) + " nodes: " +
        (c.error.empty() ? RateWords(c.Busbw()) : c.error) + " (" + F("%.1f", Now() - t0) + " s)");
  }
  if (Budget("the other collectives")) Operations(per);
  if (live_.size() >= 2 && Budget("the ring pairs")) Pairs(per);
}

// All-gather, reduce-scatter and all-to-all across the whole allocation, in
// one launch: what sharded data parallelism and experts spend their time in.
void Stages::Operations(int per) {
  std::vector<std::string> a = NcclArgs(Srun(live_, true, per, false));
  a.insert(a.end(), {"--ops", "all_gather,reduce_scatter,all_to_all", "--json"});
  double t0 = Now();
  ProcessResult p = Launch(a, "the other collectives");
  std::vector<Curve> got;
  Status s = ParseNcclOpsJson(p.output, &got);
  if (!s.ok()) {
    Curve c;
    c.op = "all_gather,reduce_scatter,all_to_all";
    c.error = p.timed_out ? "no verdict within the stage budget" : "no result: " + LastLine(p.output);
    got.push_back(c);
    FindLost(live_, "the other collectives");
  }
  for (auto& c : got) {
    c.nodes = static_cast<int>(live_.size());
    c.node_names = live_;
    c.reproduce = Cmdline(a);
    Say("collective: " + c.op + " on " + std::to_string(c.nodes) + " nodes: " +
        (c.error.empty() ? RateWords(c.Busbw()) : c.error));
    r_->op_curves.push_back(std::move(c));
  }
  Say("collective: the other collectives took " + F("%.1f", Now() - t0) + " s");
}

// The intra-node sweep on every node, and again on each suspect.
void Stages::IntraNode() {
  std::vector<std::string> a = NcclArgs(Srun(live_, false, 1, true));
  a.insert(a.end(), {"--intra-node", "--json"});
  Say("collective: intra-node on " + std::to_string(live_.size()) + " nodes");
  double t0 = Now();
  ProcessResult p = run_(a, Left());
  std::set<std::string> got;
  auto tasks = SplitLabelled(p.output);
  for (const auto& [task, text] : tasks) {
    Curve c;
    Status s = ParseNcclJson(text, &c);
    if (!s.ok() || c.node_names.empty()) continue;
    c.nodes = 1;
    c.reproduce = Cmdline({o_.srun, "-N1", "-w", c.node_names[0], o_.nccl, "--intra-node", "--json", "--level", o_.level});
    got.insert(c.node_names[0]);
    r_->curves.push_back(c);
  }
  std::vector<std::string> missing;
  for (const auto& n : live_)
    if (!got.count(n)) missing.push_back(n);
  if (!missing.empty()) FindLost(missing, "the intra-node sweeps");
  for (const auto& n : missing)
    if (!r_->lost_nodes.count(n)) {
      Curve c;
      c.nodes = 1;
      c.node_names = {n};
      // One task per node, in the allocation's order: task i ran on live_[i].
      size_t i = std::find(live_.begin(), live_.end(), n) - live_.begin();
      std::string own = tasks.count(static_cast<int>(i)) ? LastLine(tasks[static_cast<int>(i)]) : "";
      c.error = p.timed_out ? "no result within the budget" : "no result: " + (own.empty() ? LastLine(p.output) : own);
      r_->curves.push_back(c);
    }
  // Measure twice before blaming: a node the straggler rule names by its
  // intra-node figure runs again, alone, and keeps its better sweep.
  std::map<std::string, double> intra;
  for (const auto& c : r_->curves)
    if (c.nodes == 1 && c.error.empty() && !c.node_names.empty()) intra[c.node_names[0]] = c.Busbw();
  auto v = collective::FindStragglers(live_, {}, intra, o_.thresholds.straggler_fraction, 0);
  for (const auto& s : v.stragglers) {
    if (s.basis != "intra-node" || !Budget("the second intra-node sweep of " + s.node)) continue;
    Say("collective: intra-node again on " + s.node + " (suspect)");
    std::vector<std::string> again = NcclArgs(Srun({s.node}, false, 1, true));
    again.insert(again.end(), {"--intra-node", "--json"});
    ProcessResult p2 = run_(again, Left());
    for (const auto& [task, text] : SplitLabelled(p2.output)) {
      Curve c2;
      if (!ParseNcclJson(text, &c2).ok() || c2.node_names.empty() || c2.node_names[0] != s.node) continue;
      for (auto& c : r_->curves) {
        if (c.nodes != 1 || c.node_names.empty() || c.node_names[0] != s.node || !c2.error.empty()) continue;
        // The better sweep is the node's figure, the worse one goes to
        // the median (straggler.h): a suspect that comes back fast must
        // not raise the bar for everyone else.
        double worse = std::min(c.Busbw(), c2.Busbw());
        if (c2.Busbw() > c.Busbw()) {
          c2.nodes = 1;
          c2.reproduce = c.reproduce;
          c = c2;
        }
        c.worse_busbw = worse;
      }
    }
  }
  Say("collective: intra-node done in " + F("%.1f", Now() - t0) + " s");
}

std::vector<PairFigure> Stages::RunPairs(const std::vector<std::string>& nodes, int per, std::string* error) {
  std::vector<std::string> a = NcclArgs(Srun(nodes, true, per, false));
  a.insert(a.end(), {"--scope", "pairs", "--records"});
  ProcessResult p = Launch(a, "the ring pairs");
  auto parsed = collective::ParseOutput(p.output);
  std::vector<PairFigure> out;
  for (const auto& rec : parsed.records)
    if (rec.kind == "pair" && rec.nodes.size() == 2) {
      // preflight-nccl may have sampled the pair twice itself (samples_Bps).
      out.push_back({rec.nodes[0], rec.nodes[1], rec.busbw, rec.WorseSample(), rec.pass, rec.message});
    }
  if (out.empty()) *error = p.timed_out ? "no pair verdict within the stage budget" : "no pair records: " + LastLine(p.output);
  return out;
}

void Stages::Pairs(int per) {
  Say("collective: ring pairs on " + std::to_string(live_.size()) + " nodes");
  double t0 = Now();
  std::string err;
  r_->pairs = RunPairs(live_, per, &err);
  if (!err.empty()) {
    Note("ring pairs: " + err);
    FindLost(live_, "the ring pairs");
    return;
  }
  // Measure twice before blaming: the pairs of the nodes the rule names run
  // again and each pair keeps its better figure.
  std::vector<collective::PairFigure> pf;
  for (const auto& p : r_->pairs) pf.push_back({p.a, p.b, p.busbw, p.worse});
  auto v = collective::FindStragglers(live_, pf, {}, o_.thresholds.straggler_fraction, 0);
  auto again = collective::NodesToRemeasure(live_, v);
  if (!again.empty() && Budget("the second pair sample")) {
    Say("collective: measuring the ring pairs again (" + std::to_string(again.size()) + " suspect)");
    std::string err2;
    auto second = RunPairs(live_, per, &err2);
    for (auto& p : r_->pairs)
      for (const auto& q : second) {
        if (p.a != q.a || p.b != q.b) continue;
        // The better sample decides the pair, the worse goes to the median
        // (a figure measured once is its own worst sample).
        double worse = std::min(p.worse > 0 ? p.worse : p.busbw, q.worse > 0 ? q.worse : q.busbw);
        if (q.busbw > p.busbw) { p.busbw = q.busbw; p.pass = q.pass; p.message = q.message; }
        p.worse = worse;
      }
  }
  Say("collective: ring pairs done in " + F("%.1f", Now() - t0) + " s");
}

}  // namespace preflight::accept::run_internal
