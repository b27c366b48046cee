#include "preflight/pairs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "preflight/clock.h"
#include "preflight/collective_run.h"

namespace preflight::collective {
namespace {

// One group's verdict, as its first member tells every rank.
struct GroupResult {
  bool ok = false;
  double busbw = 0;
  std::string message;
};

// Every rank: measure its own group (disjoint groups of parent ranks, all
// at once) or stand by. Every rank gets every group's result.
Expected<std::vector<GroupResult>> MeasureGroups(Bootstrap& b, const std::vector<std::vector<int>>& groups,
                                                 const Config& cfg, const PairsOptions& opt, double threshold,
                                                 double deadline) {
  int mine = -1;
  for (size_t g = 0; g < groups.size(); ++g)
    if (std::find(groups[g].begin(), groups[g].end(), b.Rank()) != groups[g].end()) mine = static_cast<int>(g);
  std::string verdict;
  double fig = 0;
  if (mine >= 0) {
    auto sub = MakeSubBootstrap(b, groups[mine]);
    auto be = MakeBackend(opt.backend, *sub, cfg, opt.user_rate_cap, deadline);
    if (!be) {
      verdict = "FAILED: " + be.status().message();
    } else {
      auto res = RunAllReduceSweep(**be, SweepForLevel(opt.level, cfg.nccl.max_bytes));
      if (!res) {
        verdict = "FAILED: " + res.status().message();
      } else {
        Judgement j = Judge(*res, threshold);
        verdict = std::string(j.ok ? "OK: " : "FAILED: ") + j.message;
        fig = j.busbw;
      }
    }
  } else {
    auto stand_by = b.AllGather(kBackendGatherKey, "");  // the groups' one exchange
    if (!stand_by) return stand_by.status();
  }
  char tail[40];
  std::snprintf(tail, sizeof tail, "\t%.17g", fig);
  bool speaker = mine >= 0 && groups[mine].front() == b.Rank();
  auto all = b.AllGather("pair", speaker ? verdict + tail : "");
  if (!all) return all.status();
  std::vector<GroupResult> out;
  for (const auto& g : groups) {
    std::string v = (*all)[g.front()];
    GroupResult r;
    size_t tab = v.rfind('\t');
    if (tab != std::string::npos) {
      r.busbw = std::strtod(v.c_str() + tab + 1, nullptr);
      v.resize(tab);
    }
    r.ok = v.rfind("OK", 0) == 0;
    size_t sp = v.find(' ');
    r.message = sp == std::string::npos ? v : v.substr(sp + 1);
    out.push_back(r);
  }
  return out;
}

std::string Samples(const std::vector<double>& s) {
  std::string out;
  for (double x : s) out += (out.empty() ? "" : ", ") + (x > 0 ? RateText(x) : std::string("none"));
  return out;
}

// Rounds of disjoint pairs from a list of pair indexes (greedy, in order).
std::vector<std::vector<size_t>> Disjoint(const std::vector<size_t>& pairs, size_t n) {
  std::vector<std::vector<size_t>> rounds;
  for (size_t p : pairs) {
    bool placed = false;
    for (auto& r : rounds) {
      bool clash = false;
      for (size_t q : r) {
        size_t a = p, b = (p + 1) % n, c = q, d = (q + 1) % n;
        clash = clash || a == c || a == d || b == c || b == d;
      }
      if (!clash) { r.push_back(p); placed = true; break; }
    }
    if (!placed) rounds.push_back({p});
  }
  return rounds;
}

}  // namespace

std::vector<std::vector<size_t>> PairRounds(size_t n) {
  if (n < 2) return {};
  if (n == 2) return {{0}};
  std::vector<size_t> all;
  for (size_t p = 0; p < n; ++p) all.push_back(p);
  // Even pairs, then odd ones; with odd n the last pair (n-1, 0) meets
  // pair 0 and gets a round of its own.
  std::vector<size_t> order;
  for (size_t p = 0; p < n; p += 2) order.push_back(p);
  for (size_t p = 1; p < n; p += 2) order.push_back(p);
  return Disjoint(order, n);
}

namespace {
// One more sample of a pair or a node's group: the better sample decides
// its figure and verdict (one noisy sample must not fail it); every sample
// is kept (the straggler rule's median takes the worse).
void AddSample(ResultRecord& rec, const GroupResult& g) {
  rec.samples.push_back(g.busbw);
  if (rec.samples.size() == 1 || g.busbw > rec.busbw || (g.ok && !rec.pass)) {
    rec.busbw = std::max(rec.busbw, g.busbw);
    rec.pass = rec.pass || g.ok;
    rec.message = g.message;
  }
}
}  // namespace

namespace {

// The straggler rule over every pair and intra-node record so far.
StragglerVerdict JudgeAll(const PairsOutcome& out, double fraction, double threshold) {
  std::vector<ResultRecord> all = out.pairs;
  all.insert(all.end(), out.intra.begin(), out.intra.end());
  return StragglersFromRecords(out.nodes, all, fraction, threshold);
}

// Rank 0's lines: a line per pair and per node's own group, then the
// rule's verdict, each after "# ".
std::string PairsText(const PairsOutcome& out) {
  std::string text;
  for (const auto& p : out.pairs)
    text += "# pair " + p.nodes[0] + "-" + p.nodes[1] + ": " + (p.pass ? "OK: " : "FAILED: ") + p.message +
            (p.samples.size() > 1 ? " (samples: " + Samples(p.samples) + ")" : "") + "\n";
  for (const auto& r : out.intra)
    text += "# intra-node " + r.nodes[0] + ": " + (r.pass ? "OK: " : "FAILED: ") + r.message +
            (r.samples.size() > 1 ? " (samples: " + Samples(r.samples) + ")" : "") + "\n";
  size_t at = 0;
  const std::string& t = out.verdict.text;
  while (at < t.size()) {
    size_t e = t.find('\n', at);
    text += "# " + t.substr(at, e - at) + "\n";
    at = e == std::string::npos ? t.size() : e + 1;
  }
  return text;
}

}  // namespace

Expected<PairsOutcome> RunPairs(Bootstrap& b, const std::vector<std::string>& rank_nodes, const Config& cfg,
                                const PairsOptions& opt) {
  PairsOutcome out;
  for (const auto& n : rank_nodes)
    if (std::find(out.nodes.begin(), out.nodes.end(), n) == out.nodes.end()) out.nodes.push_back(n);
  const size_t n = out.nodes.size();
  auto ranks_of = [&](const std::vector<std::string>& which) {
    std::vector<int> r;
    for (size_t i = 0; i < rank_nodes.size(); ++i)
      if (std::find(which.begin(), which.end(), rank_nodes[i]) != which.end()) r.push_back(static_cast<int>(i));
    return r;
  };
  std::string src;
  const NodeProfile* prof = PickProfile(cfg, opt.backend, GpuInventory{});
  const double threshold = Threshold(cfg, prof, false, &src);
  const double intra_threshold = Threshold(cfg, prof, true, &src);
  auto rounds = PairRounds(n);
  bool intra = opt.intra && rank_nodes.size() >= 2 * n && n > 0;
  // Every round's share of the budget: the planned rounds, and as many
  // again for second samples.
  size_t planned = (rounds.size() + (intra ? 1 : 0)) * (opt.remeasure ? 2 : 1);
  const double share = planned ? opt.budget_s / static_cast<double>(planned) : 0;

  out.pairs.resize(rounds.empty() ? 0 : (n == 2 ? 1 : n));
  for (size_t p = 0; p < out.pairs.size(); ++p) {
    out.pairs[p].kind = "pair";
    out.pairs[p].nodes = {out.nodes[p], out.nodes[(p + 1) % n]};
    out.pairs[p].threshold = threshold;
  }
  auto run_rounds = [&](const std::vector<std::vector<size_t>>& rs) -> Status {
    for (const auto& round : rs) {
      std::vector<std::vector<int>> groups;
      for (size_t p : round) groups.push_back(ranks_of(out.pairs[p].nodes));
      auto res = MeasureGroups(b, groups, cfg, opt, threshold, MonotonicSeconds() + share);
      if (!res) return res.status();
      for (size_t i = 0; i < round.size(); ++i) {
        AddSample(out.pairs[round[i]], (*res)[i]);
      }
    }
    return Status::Ok();
  };
  Status s = run_rounds(rounds);
  if (!s.ok()) return s;
  // The intra-node round: every node's own ranks at once; a second run
  // adds a sample to each node's record and the better one decides.
  auto run_intra = [&]() -> Status {
    std::vector<std::vector<int>> groups;
    for (const auto& node : out.nodes) groups.push_back(ranks_of({node}));
    auto res = MeasureGroups(b, groups, cfg, opt, intra_threshold, MonotonicSeconds() + share);
    if (!res) return res.status();
    out.intra.resize(n);
    for (size_t i = 0; i < n; ++i) {
      ResultRecord& rec = out.intra[i];
      rec.kind = ScopeName(Scope::kIntraNode);
      rec.nodes = {out.nodes[i]};
      rec.threshold = intra_threshold;
      AddSample(rec, (*res)[i]);
    }
    return Status::Ok();
  };
  if (intra) {
    s = run_intra();
    if (!s.ok()) return s;
  }
  out.verdict = JudgeAll(out, cfg.nccl.straggler_fraction, threshold);
  auto again = NodesToRemeasure(out.nodes, out.verdict);
  bool again_pairs = !again.empty() && n >= 3;
  bool again_intra = intra && IntraToRemeasure(out.verdict);
  if (opt.remeasure && (again_pairs || again_intra)) {
    // Every pair (or every node's intra-node group) a second time, not only
    // the named nodes': the median gets its worse samples too
    // (straggler.h), and groups run in parallel, so all cost what a few
    // would.
    if (again_pairs) {
      s = run_rounds(rounds);
      if (!s.ok()) return s;
    }
    if (again_intra) {
      s = run_intra();
      if (!s.ok()) return s;
    }
    out.verdict = JudgeAll(out, cfg.nccl.straggler_fraction, threshold);
  }
  for (const auto& p : out.pairs) out.all_pass = out.all_pass && p.pass;
  out.text = PairsText(out);
  return out;
}

StragglerVerdict StragglersFromRecords(const std::vector<std::string>& nodes, const std::vector<ResultRecord>& records,
                                       double fraction, double reference) {
  std::vector<PairFigure> pairs;
  std::map<std::string, double> intra, intra_low;
  for (const auto& r : records) {
    if (r.kind == "pair" && r.nodes.size() == 2) {
      pairs.push_back({r.nodes[0], r.nodes[1], r.busbw, r.WorseSample()});
    }
    if (r.kind == ScopeName(Scope::kIntraNode) && r.nodes.size() == 1) {
      intra[r.nodes[0]] = r.busbw;
      double worse = r.WorseSample();
      if (worse > 0) intra_low[r.nodes[0]] = worse;
    }
  }
  return FindStragglers(nodes, pairs, intra, fraction, reference, intra_low);
}

}  // namespace preflight::collective
