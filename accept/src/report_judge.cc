// The acceptance report's verdicts (Judge, accept_report.h): each node's
// checks, the collective curves, scaling and stragglers, the storage
// figures and the training run, judged against the thresholds; the nodes
// blamed and why.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>

#include "preflight/accept_report.h"
#include "preflight/hostlist.h"
#include "preflight/stats.h"
#include "preflight/straggler.h"
#include "report_fmt.h"
#include "report_judge.h"

namespace preflight::accept {

namespace judge_internal {

NodeRow& RowOf(Report* r, const std::string& node) {
  for (auto& row : r->node_rows)
    if (row.node == node) return row;
  r->node_rows.push_back({node, Verdict::kPass, {}});
  return r->node_rows.back();
}

void Blame(Report* r, const std::string& node, Verdict v, const std::string& why) {
  NodeRow& row = RowOf(r, node);
  row.verdict = Worse(row.verdict, v);
  row.reasons.push_back(why);
}

Stage* StageOf(Report* r, const std::string& name) {
  for (auto& s : r->stages)
    if (s.name == name) return &s;
  return nullptr;
}

void StageVerdict(Report* r, const std::string& name, Verdict v) {
  if (Stage* s = StageOf(r, name)) s->verdict = Worse(s->verdict, v);
}

}  // namespace judge_internal

namespace {

using namespace judge_internal;

std::string CountWords(double v, const std::string& unit) {
  char b[64];
  if (v >= 1e6) std::snprintf(b, sizeof b, "%.2fM %s", v / 1e6, unit.c_str());
  else if (v >= 1e3) std::snprintf(b, sizeof b, "%.1fk %s", v / 1e3, unit.c_str());
  else std::snprintf(b, sizeof b, "%.0f %s", v, unit.c_str());
  return b;
}

std::string ValueWords(double v, const std::string& unit) {
  if (unit == "B/s") return RateWords(v);
  if (unit == "ratio") return Fmt("%.2f", v);
  return CountWords(v, unit);
}


std::string SizeWords(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// Data first: any wrong element fails, whatever the bandwidth. The other
// collectives are judged the same way, against the same threshold (busbw is
// per link whatever the operation, as nccl-tests defines it).
void JudgeCurves(Report* r) {
  std::vector<const Curve*> all;
  for (const auto& c : r->curves) all.push_back(&c);
  for (const auto& c : r->op_curves) all.push_back(&c);
  for (const Curve* cp : all) {
    const Curve& c = *cp;
    std::string label = (c.op == "all_reduce" ? std::string() : c.op + " ") +
                        (c.nodes == 1 ? "intra-node" : std::to_string(c.nodes) + " nodes");
    Figure f;
    f.stage = "collective";
    f.name = "busbw " + label;
    f.node = c.nodes == 1 && !c.node_names.empty() ? c.node_names[0] : "";
    f.unit = "B/s";
    f.value = c.Busbw();
    f.reproduce = c.reproduce;
    f.threshold = c.profile_threshold;
    f.threshold_source = c.profile_threshold > 0 ? c.threshold_source
                                                 : "none: no profile applies" +
                                                       (c.threshold_source.empty() ? std::string() : " (" + c.threshold_source + ")");
    uint64_t wrong = 0, wrong_at = 0;
    for (const auto& s : c.sizes)
      if (s.wrong) { wrong += s.wrong; if (!wrong_at) wrong_at = s.bytes; }
    if (!c.error.empty()) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": " + c.error;
      f.rule = f.reason;
    } else if (wrong) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": " + std::to_string(wrong) + " wrong elements (first at " + SizeWords(wrong_at) +
                 "): data corrupted, whatever the bandwidth";
      f.rule = label + ": wrong elements: data corrupted, whatever the bandwidth";
    } else if (c.profile_threshold > 0 && f.value < c.profile_threshold) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": busbw " + RateWords(f.value) + " < " + RateWords(c.profile_threshold) + " (" +
                 c.threshold_source + ")";
      f.rule = label + ": busbw below " + RateWords(c.profile_threshold) + " (" + c.threshold_source + ")";
      f.ranged = true;
    } else {
      f.verdict = Verdict::kPass;
      f.reason = label + ": busbw " + RateWords(f.value) + ", data verified";
    }
    if (f.verdict == Verdict::kFail && c.nodes == 1 && !f.node.empty()) Blame(r, f.node, Verdict::kFail, f.reason);
    r->figures.push_back(f);
    StageVerdict(r, "collective", f.verdict);
  }
}

// Scaling against the 2-node figure.
void JudgeScaling(Report* r) {
  const Thresholds& t = r->thresholds;
  const Curve* two = nullptr;
  for (const auto& c : r->curves) {
    if (c.nodes == 2 && c.error.empty() && c.Busbw() > 0) two = &c;
  }
  r->scaling_text.clear();
  bool any_multi = false;
  for (const auto& c : r->curves) any_multi = any_multi || c.nodes >= 2;
  if (!any_multi) {
    r->scaling_text = "one node: the curve is intra-node only, no scaling measured";
  } else if (!two) {
    r->scaling_text = "no 2-node figure: scaling not judged";
  } else {
    double ref = two->Busbw();
    const Curve* prev = two;
    std::string broke;
    for (const auto& c : r->curves) {
      if (c.nodes <= 2 || !c.error.empty() || c.Busbw() <= 0) continue;
      double eff = c.Busbw() / ref;
      Figure f;
      f.stage = "collective";
      f.name = "scaling " + std::to_string(c.nodes) + " nodes";
      f.unit = "ratio";
      f.value = eff;
      f.reference = ref;
      f.threshold = t.scaling_fail;
      f.threshold_source = "busbw at " + std::to_string(c.nodes) + " nodes / 2-node figure " + RateWords(ref) +
                           ", fail < " + Fmt("%.2f", t.scaling_fail) + ", warn < " + Fmt("%.2f", t.scaling_warn);
      f.reproduce = c.reproduce;
      f.verdict = eff < t.scaling_fail ? Verdict::kFail : eff < t.scaling_warn ? Verdict::kWarn : Verdict::kPass;
      f.reason = std::to_string(c.nodes) + " nodes: busbw " + RateWords(c.Busbw()) + " = " + Fmt("%.0f", eff * 100) +
                 "% of the 2-node figure";
      if (f.verdict != Verdict::kPass && broke.empty()) {
        broke = "the curve broke between " + std::to_string(prev->nodes) + " and " + std::to_string(c.nodes) +
                " nodes: busbw " + RateWords(prev->Busbw()) + " -> " + RateWords(c.Busbw()) + " (" +
                Fmt("%.0f", eff * 100) + "% of the 2-node figure " + RateWords(ref) + ")";
        f.reason = broke;
      }
      r->figures.push_back(f);
      StageVerdict(r, "collective", f.verdict);
      prev = &c;
    }
    r->scaling_text = broke.empty() ? "busbw held from 2 to " + std::to_string(prev->nodes) + " nodes (each at least " +
                                          Fmt("%.2f", t.scaling_warn) + " x the 2-node figure " + RateWords(ref) + ")"
                                    : broke;
  }
}

// Ring pairs: the straggler rule.
void JudgeStragglers(Report* r) {
  const Thresholds& t = r->thresholds;
  r->stragglers.clear();
  r->straggler_text.clear();
  if (!r->pairs.empty()) {
    std::vector<collective::PairFigure> pf;
    for (const auto& p : r->pairs) pf.push_back({p.a, p.b, p.busbw, p.worse});
    std::map<std::string, double> intra, intra_low;
    for (const auto& c : r->curves)
      if (c.nodes == 1 && c.error.empty() && !c.node_names.empty()) {
        intra[c.node_names[0]] = c.Busbw();
        if (c.worse_busbw > 0) intra_low[c.node_names[0]] = c.worse_busbw;
      }
    double reference = 0;  // a profile's inter-node figure, when one applied
    for (const auto& c : r->curves)
      if (c.nodes == 2 && c.profile_threshold > 0) reference = c.profile_threshold;
    auto v = collective::FindStragglers(r->nodes, pf, intra, t.straggler_fraction, reference, intra_low);
    r->straggler_text = v.text;
    for (const auto& s : v.stragglers) {
      r->stragglers.push_back(s.node);
      Figure f;
      f.stage = "collective";
      f.name = "straggler";
      f.node = s.node;
      f.unit = "B/s";
      f.value = s.figure;
      f.reference = s.median;
      f.threshold = s.fraction * s.median;
      f.threshold_source = Fmt("%.2f", s.fraction) + " x median of the " + s.basis + " " + RateWords(s.median);
      f.verdict = Verdict::kFail;
      f.reason = "straggler " + s.node + ": " + s.basis + " busbw " + RateWords(s.figure) + " < " + Fmt("%.2f", s.fraction) +
                 " x median " + RateWords(s.median);
      f.rule = "straggler: " + s.basis + " busbw below " + Fmt("%.2f", s.fraction) + " x median " + RateWords(s.median);
      f.ranged = true;
      f.reproduce = "srun --mpi=pmix -N" + std::to_string(r->nodes.size()) + " --ntasks-per-node=1 preflight-nccl --scope pairs --records";
      Blame(r, s.node, Verdict::kFail, f.reason);
      r->figures.push_back(f);
      StageVerdict(r, "collective", Verdict::kFail);
    }
    if (v.fabric_wide || !v.slow_link.empty()) StageVerdict(r, "collective", Verdict::kWarn);
  }
}

void JudgeCollective(Report* r) {
  JudgeCurves(r);
  JudgeScaling(r);
  JudgeStragglers(r);
}

struct StorageMetric {
  const char* name;
  double StorageFigures::*field;
  const char* unit;
  double Thresholds::*threshold;  // nullptr: none
  // Compared node against node on one path: only the throughput figures. The
  // rates of 4 KiB operations from files the page cache may hold are, at the
  // quick level's sizes, milliseconds of work: one scheduling hiccup makes a
  // node look 10x slower (seen on the emulated cluster).
  bool node_compare;
};
const StorageMetric kStorageMetrics[] = {
    {"seq_write", &StorageFigures::seq_write, "B/s", &Thresholds::seq_write, true},
    {"seq_read", &StorageFigures::seq_read, "B/s", &Thresholds::seq_read, true},
    {"rand_read_4k", &StorageFigures::rand_read_iops, "IOPS", &Thresholds::rand_read_iops, false},
    {"ckpt_write", &StorageFigures::ckpt_write, "B/s", &Thresholds::ckpt_write, true},
    {"create", &StorageFigures::create_per_s, "files/s", &Thresholds::create_per_s, false},
    {"read_files", &StorageFigures::read_files_per_s, "files/s", nullptr, false},
    {"stat", &StorageFigures::stat_per_s, "ops/s", nullptr, false},
};

// The median over the nodes' figures for `path` when they all ran at once.
double NodeMedian(const Report& r, const std::string& path, double StorageFigures::*field) {
  std::vector<double> v;
  for (const auto& s : r.storage)
    if (s.path == path && s.scope == "all nodes" && !s.node.empty() && s.error.empty()) v.push_back(s.*field);
  if (v.size() < 3) return 0;  // two nodes cannot tell which one is slow
  return Median(std::move(v));
}

void JudgeStorage(Report* r) {
  const Thresholds& t = r->thresholds;
  // The best one-node figure over the paths, per metric: a tier far below the
  // others is named even where no threshold is set.
  std::map<std::string, double> best;
  for (const auto& s : r->storage)
    if (s.scope == "one node" && s.error.empty())
      for (const auto& m : kStorageMetrics) best[m.name] = std::max(best[m.name], s.*(m.field));
  int one_node_paths = 0;
  for (const auto& s : r->storage) one_node_paths += s.scope == "one node" && s.error.empty();
  for (const auto& s : r->storage) {
    std::string where = s.path + " (" + s.scope + (s.node.empty() ? "" : ", " + s.node) + ")";
    std::string all = s.path + " (" + s.scope + ")";  // the words of a rule: every node's
    if (!s.error.empty()) {
      Figure f;
      f.stage = "storage";
      f.name = "storage";
      f.node = s.node;
      f.path = s.path;
      f.unit = "B/s";
      f.verdict = Verdict::kFail;
      f.reason = where + ": " + s.error;
      f.rule = all + ": " + s.error;
      r->figures.push_back(f);
      StageVerdict(r, "storage", Verdict::kFail);
      continue;
    }
    for (const auto& m : kStorageMetrics) {
      Figure f;
      f.stage = "storage";
      f.name = m.name;
      f.node = s.node;
      f.path = s.path;
      f.unit = m.unit;
      f.value = s.*(m.field);
      for (const auto& cmd : s.reproduce)
        if (cmd.find(std::string("--name=") + m.name) != std::string::npos) f.reproduce = cmd;
      if (f.reproduce.empty() && !s.reproduce.empty()) f.reproduce = s.reproduce.back();
      double th = m.threshold ? t.*(m.threshold) : 0;
      // Per-node figures are judged per node; the all-nodes row sums the nodes.
      double per_node_value = f.value;
      if (s.scope == "all nodes" && s.node.empty() && !r->nodes.empty()) per_node_value = f.value / r->nodes.size();
      f.verdict = Verdict::kPass;
      if (th > 0) {
        f.threshold = th;
        f.threshold_source = std::string("--threshold ") + m.name + " (per node)";
        if (per_node_value < th) {
          f.verdict = Verdict::kFail;
          f.reason = where + ": " + m.name + " " + ValueWords(per_node_value, m.unit) + " per node < " + ValueWords(th, m.unit);
          f.rule = all + ": " + m.name + " below " + ValueWords(th, m.unit) + " per node";
          f.ranged = true;
        }
      } else {
        f.threshold_source = "none set";
      }
      if (f.verdict == Verdict::kPass && s.scope == "one node" && one_node_paths > 1 && best[m.name] > 0 &&
          f.value < t.storage_fraction * best[m.name]) {
        f.verdict = Verdict::kWarn;
        f.reference = best[m.name];
        f.reason = where + ": " + m.name + " " + ValueWords(f.value, m.unit) + " < " + Fmt("%.2f", t.storage_fraction) +
                   " x the best path's " + ValueWords(best[m.name], m.unit);
        f.rule = all + ": " + m.name + " below " + Fmt("%.2f", t.storage_fraction) + " x the best path's " +
                 ValueWords(best[m.name], m.unit);
        f.ranged = true;
      }
      if (f.reason.empty()) f.reason = where + ": " + m.name + " " + ValueWords(f.value, m.unit);
      // A node is blamed only for being slow against the other nodes on the
      // same path at the same time; a path slow for everyone is the path's.
      if (m.node_compare && s.scope == "all nodes" && !s.node.empty()) {
        double med = NodeMedian(*r, s.path, m.field);
        if (med > 0 && f.value < t.storage_fraction * med) {
          std::string why = where + ": " + m.name + " " + ValueWords(f.value, m.unit) + " < " +
                            Fmt("%.2f", t.storage_fraction) + " x the nodes' median " + ValueWords(med, m.unit);
          Blame(r, s.node, Verdict::kWarn, why);
          if (f.verdict == Verdict::kPass) {
            f.verdict = Verdict::kWarn;
            f.reason = why;
            f.reference = med;
            f.rule = all + ": " + m.name + " below " + Fmt("%.2f", t.storage_fraction) + " x the nodes' median " +
                     ValueWords(med, m.unit);
            f.ranged = true;
          }
        }
      }
      StageVerdict(r, "storage", f.verdict);
      r->figures.push_back(f);
    }
  }
}

void JudgeNodes(Report* r) {
  for (const auto& [node, why] : r->node_checks) {
    Figure f;
    f.stage = "nodes";
    f.name = "node checks";
    f.node = node;
    f.unit = "ratio";
    f.verdict = why.empty() ? Verdict::kPass : Verdict::kFail;
    f.reason = why.empty() ? "node checks passed" : why;
    if (!why.empty()) f.rule = "node checks: " + why;
    f.reproduce = "srun -N1 -w " + node + " preflight-prolog --level " + r->level + " --set set_drain_reason=no";
    if (!why.empty()) Blame(r, node, Verdict::kFail, "node checks: " + why);
    r->figures.push_back(f);
    StageVerdict(r, "nodes", f.verdict);
  }
}

// The figures that broke one rule on one path, and the nodes they belong to.
struct Group {
  Verdict verdict;
  std::string rule;
  std::vector<const Figure*> figures;
};

// One finding's words: a figure's own reason when it stands alone, else the
// rule on the nodes as one hostlist, with the range of their figures.
std::string FindingText(const Group& g) {
  const Figure& first = *g.figures.front();
  if (g.figures.size() == 1) return first.reason;
  std::vector<std::string> nodes;
  double lo = first.value, hi = first.value;
  for (const Figure* f : g.figures) {
    nodes.push_back(f->node);
    lo = std::min(lo, f->value);
    hi = std::max(hi, f->value);
  }
  std::string text = g.rule + " on " + CompressHostlist(nodes);
  if (first.ranged)
    text += ": " + ValueWords(lo, first.unit) + (hi > lo ? " to " + ValueWords(hi, first.unit) : std::string());
  return text;
}

// Every fail, then every warn, one line per finding (accept_report.h:
// Report::reasons), in the order the figures first broke them.
std::vector<std::string> Findings(const Report& r) {
  std::vector<Group> groups;
  for (Verdict v : {Verdict::kFail, Verdict::kWarn})
    for (const auto& f : r.figures) {
      if (f.verdict != v) continue;
      Group* g = nullptr;
      if (!f.node.empty() && !f.rule.empty())
        for (auto& x : groups)
          if (x.verdict == v && x.rule == f.rule && x.figures.front()->stage == f.stage) g = &x;
      if (!g) g = &groups.emplace_back(Group{v, f.node.empty() ? "" : f.rule, {}});
      g->figures.push_back(&f);
    }
  std::vector<std::string> out;
  for (const auto& g : groups) out.push_back(std::string(ReportWord(g.verdict)) + ": " + FindingText(g));
  // Lost nodes: one line per way of being lost.
  std::map<std::string, std::vector<std::string>> lost;
  for (const auto& [node, what] : r.lost_nodes) lost[what].push_back(node);
  for (const auto& [what, nodes] : lost)
    out.push_back("fail: " + (nodes.size() == 1 ? nodes[0] + " lost mid-run: " + what
                                                : "lost mid-run " + what + " on " + CompressHostlist(nodes)));
  return out;
}

}  // namespace

void Judge(Report* r) {
  r->figures.clear();
  r->node_rows.clear();
  r->reasons.clear();
  for (auto& s : r->stages) s.verdict = Verdict::kSkip;
  for (const auto& n : r->nodes) RowOf(r, n);
  JudgeNodes(r);
  JudgeCollective(r);
  JudgeStorage(r);
  judge_internal::JudgeTrain(r);
  for (const auto& [node, what] : r->lost_nodes) Blame(r, node, Verdict::kFail, "lost mid-run: " + what);
  for (auto& s : r->stages)
    if (s.verdict == Verdict::kSkip && !s.notes.empty()) s.verdict = Verdict::kWarn;
  r->verdict = Verdict::kSkip;
  for (const auto& s : r->stages) r->verdict = Worse(r->verdict, s.verdict);
  for (const auto& row : r->node_rows) r->verdict = Worse(r->verdict, row.verdict);
  r->reasons = Findings(*r);
}

}  // namespace preflight::accept
