#include "preflight/straggler.h"

#include <algorithm>
#include <cstdio>

#include "preflight/collective.h"
#include "preflight/stats.h"

namespace preflight::collective {
namespace {

std::string Fraction(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", f);
  return b;
}

std::string Line(const Straggler& s) {
  std::string fig = s.figure > 0 ? RateText(s.figure) + (s.basis == "ring pairs" ? " (its better pair)" : "")
                                 : std::string(s.basis == "ring pairs" ? "none (both pairs failed)" : "none");
  return "straggler " + s.node + ": " + s.basis + " " + fig + " < " + Fraction(s.fraction) +
         " x the allocation's median " + RateText(s.median) + "\n";
}

// Stragglers of one basis: figure < fraction x median of the reference
// figures (`refs`, in the same order; empty: the figures themselves).
void Judge(const std::vector<std::pair<std::string, double>>& figs, double fraction, const char* basis,
           StragglerVerdict& v, double* median_out, const std::vector<double>& refs = {}) {
  std::vector<double> xs = refs;
  if (xs.empty())
    for (const auto& f : figs) xs.push_back(f.second);
  double med = Median(xs);
  if (median_out) *median_out = med;
  if (med <= 0) return;
  for (const auto& f : figs)
    if (f.second < fraction * med) v.stragglers.push_back({f.first, f.second, med, fraction, basis});
}

}  // namespace

StragglerVerdict FindStragglers(const std::vector<std::string>& nodes, const std::vector<PairFigure>& pairs,
                                const std::map<std::string, double>& intra, double fraction, double reference,
                                const std::map<std::string, double>& intra_low) {
  StragglerVerdict v;
  const size_t n = nodes.size();
  auto pair_of = [&](const std::string& a, const std::string& b, bool low = false) {
    double best = 0;
    for (const auto& p : pairs)
      if ((p.a == a && p.b == b) || (p.a == b && p.b == a))
        best = std::max(best, low && p.low > 0 ? std::min(p.low, p.busbw) : p.busbw);
    return best;
  };
  if (n >= 3) {
    std::vector<std::pair<std::string, double>> figs;
    std::vector<double> refs;
    for (size_t i = 0; i < n; ++i) {
      const std::string& l = nodes[(i + n - 1) % n];
      const std::string& r = nodes[(i + 1) % n];
      figs.push_back({nodes[i], std::max(pair_of(l, nodes[i]), pair_of(nodes[i], r))});
      refs.push_back(std::max(pair_of(l, nodes[i], true), pair_of(nodes[i], r, true)));
    }
    Judge(figs, fraction, "ring pairs", v, &v.median, refs);
    if (reference > 0 && v.median > 0 && v.median < fraction * reference) {
      // Every node slow alike: the fabric (or a wrong profile), not a node.
      v.fabric_wide = true;
      v.text += "every node is slow alike: the allocation's median ring pair " + RateText(v.median) + " < " +
                Fraction(fraction) + " x the profile's " + RateText(reference) +
                "; that is the fabric or the profile, not one node: nobody is named\n";
      v.stragglers.clear();
    }
  } else if (n == 2) {
    double fig = pair_of(nodes[0], nodes[1]);
    if (reference > 0 && fig < fraction * reference) {
      v.slow_link = nodes[0] + "-" + nodes[1];
      v.text += "slow link " + v.slow_link + ": " + (fig > 0 ? RateText(fig) : std::string("no figure")) + " < " +
                Fraction(fraction) + " x the profile's " + RateText(reference) +
                "; with two nodes neither can be told from the other: nobody is named\n";
    }
  }
  // A node's intra-node reference: its worse sample when it has two.
  auto intra_ref = [&](const std::string& name, double fig) {
    auto it = intra_low.find(name);
    return it != intra_low.end() && it->second > 0 ? std::min(it->second, fig) : fig;
  };
  if (intra.size() >= 3) {
    std::vector<std::pair<std::string, double>> figs;
    std::vector<double> refs;
    for (const auto& name : nodes) {
      auto it = intra.find(name);
      if (it == intra.end()) continue;
      figs.push_back(*it);
      refs.push_back(intra_ref(name, it->second));
    }
    Judge(figs, fraction, "intra-node", v, nullptr, refs);
  } else if (intra.size() == 2) {
    // Two nodes: the slower one against the faster's worse sample (there
    // is no median).
    auto lo = intra.begin(), hi = std::next(lo);
    if (lo->second > hi->second) std::swap(lo, hi);
    double bar = intra_ref(hi->first, hi->second);
    if (bar > 0 && lo->second < fraction * bar) v.stragglers.push_back({lo->first, lo->second, bar, fraction, "intra-node"});
  }
  for (const auto& s : v.stragglers) v.text += Line(s);
  return v;
}

std::vector<size_t> NodesToRemeasure(const std::vector<std::string>& nodes, const StragglerVerdict& v) {
  std::vector<size_t> out;
  for (const auto& s : v.stragglers) {
    if (s.basis != "ring pairs") continue;
    auto it = std::find(nodes.begin(), nodes.end(), s.node);
    if (it != nodes.end()) out.push_back(static_cast<size_t>(it - nodes.begin()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool IntraToRemeasure(const StragglerVerdict& v) {
  for (const auto& s : v.stragglers)
    if (s.basis == "intra-node") return true;
  return false;
}

}  // namespace preflight::collective
