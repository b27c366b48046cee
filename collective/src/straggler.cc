#include "preflight/straggler.h"

#include <algorithm>
#include <cstdio>

#include "preflight/collective.h"

namespace preflight::collective {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

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

// Stragglers of one basis: figure < fraction x median of all figures.
void Judge(const std::vector<std::pair<std::string, double>>& figs, double fraction, const char* basis,
           StragglerVerdict& v, double* median_out) {
  std::vector<double> xs;
  for (const auto& f : figs) xs.push_back(f.second);
  double med = Median(xs);
  if (median_out) *median_out = med;
  if (med <= 0) return;
  for (const auto& f : figs)
    if (f.second < fraction * med) v.stragglers.push_back({f.first, f.second, med, fraction, basis});
}

}  // namespace

StragglerVerdict FindStragglers(const std::vector<std::string>& nodes, const std::vector<PairFigure>& pairs,
                                const std::map<std::string, double>& intra, double fraction, double reference) {
  StragglerVerdict v;
  const size_t n = nodes.size();
  auto pair_of = [&](const std::string& a, const std::string& b) {
    double best = 0;
    for (const auto& p : pairs)
      if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) best = std::max(best, p.busbw);
    return best;
  };
  if (n >= 3) {
    std::vector<std::pair<std::string, double>> figs;
    for (size_t i = 0; i < n; ++i) {
      double left = pair_of(nodes[(i + n - 1) % n], nodes[i]);
      double right = pair_of(nodes[i], nodes[(i + 1) % n]);
      figs.push_back({nodes[i], std::max(left, right)});
    }
    Judge(figs, fraction, "ring pairs", v, &v.median);
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
  if (intra.size() >= 3) {
    std::vector<std::pair<std::string, double>> figs;
    for (const auto& name : nodes) {
      auto it = intra.find(name);
      if (it != intra.end()) figs.push_back(*it);
    }
    Judge(figs, fraction, "intra-node", v, nullptr);
  } else if (intra.size() == 2) {
    // Two nodes: the slower one against the faster (there is no median).
    auto lo = intra.begin(), hi = std::next(lo);
    if (lo->second > hi->second) std::swap(lo, hi);
    if (hi->second > 0 && lo->second < fraction * hi->second)
      v.stragglers.push_back({lo->first, lo->second, hi->second, fraction, "intra-node"});
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

}  // namespace preflight::collective
