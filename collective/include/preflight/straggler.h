// The straggler rule: a slow node is a fault as much as a dead one, and
// most clusters (cloud VMs, new SKUs) have no threshold table to judge it
// by. So each node is compared with its own allocation: a node whose ring
// pairs are both slow, or whose intra-node figure is low, against the
// allocation's median, is named. Pure: figures in, verdict out; the
// measurement (pairs.cc, intra-node rounds) and the action (allocation.cc:
// warn, requeue without the node, drain when the site trusts job figures)
// live elsewhere.
//
// The rule, for nodes n0..n(k-1) in ring order and pairs (ni, ni+1 mod k):
//   - a node's pair figure is the BETTER of its two ring pairs (one pair
//     for k = 2): a node is only as suspect as its best link. A node slow
//     on both sides has a low figure; its neighbours keep the figure of
//     their other, healthy pair. A pair without a figure (it failed or
//     timed out, a cut link) counts 0.
//   - median over the nodes' reference figures, built the same way from
//     each pair's WORSE sample; a node whose figure (from the better
//     samples) is below fraction x median is a straggler, named with its
//     figure, the median and the fraction. Benefit of the doubt both ways:
//     the suspect keeps its best sample, and one lucky sample elsewhere
//     (on a shared machine a pair once ran 4 GB/s among pairs of 1.5) does
//     not raise the bar it is held to.
//   - k = 2: the two nodes share the one pair, so no node can be told from
//     the other by it: a slow pair is compared with the reference (a
//     profile's inter-node figure) and named as a link, never as a node.
//   - the same rule over the intra-node figures (one per node, when a node
//     runs 2+ ranks), with their own median, built from each node's worse
//     intra-node sample when it has two (`intra_low`).
//   - when the median itself is below fraction x reference, every node is
//     equally slow: that is the fabric (or the profile), not a node; said
//     once, nobody named.
// Callers measure twice before blaming (pairs.cc re-measures the pairs of
// every node this rule names and keeps each pair's better sample, and the
// intra-node round when a node is named by it). A second sample can only
// lower the median: nobody is named by the second verdict who was not by
// the first.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace preflight::collective {

struct PairFigure {
  std::string a, b;   // ring pair (a, b)
  double busbw = 0;   // bytes/s, the better of its samples; 0: none (failed, timed out)
  double low = 0;     // bytes/s, the worse of its samples (0: only one, the same as busbw)
};

struct Straggler {
  std::string node;
  double figure = 0;    // bytes/s: its better ring pair, or its intra-node figure
  double median = 0;    // of the allocation's figures of that basis
  double fraction = 0;
  std::string basis;    // "ring pairs" or "intra-node"
};

struct StragglerVerdict {
  std::vector<Straggler> stragglers;
  double median = 0;         // of the nodes' pair figures (0: fewer than 3 nodes)
  bool fabric_wide = false;  // the median itself is below fraction x reference
  std::string slow_link;     // k = 2: "n1-n2" when the one pair is below fraction x reference
  std::string text;          // lines for the job output ("" when there is nothing to say)
};

// nodes in ring order; pairs (nodes[i], nodes[i+1 mod n]) in any order
// (missing pairs count 0); intra: node -> intra-node figure, its better
// sample (may be empty); intra_low: node -> its worse sample, for the
// nodes measured twice; fraction in (0, 1); reference: a profile's
// inter-node figure in bytes/s, or 0 when none applies.
StragglerVerdict FindStragglers(const std::vector<std::string>& nodes, const std::vector<PairFigure>& pairs,
                                const std::map<std::string, double>& intra, double fraction, double reference,
                                const std::map<std::string, double>& intra_low = {});

// The nodes whose pairs should be measured again before anyone is blamed:
// the stragglers by pairs, as indexes into `nodes`.
std::vector<size_t> NodesToRemeasure(const std::vector<std::string>& nodes, const StragglerVerdict& v);

// Whether anyone is named by the intra-node rule (the intra-node round
// runs again before anyone is blamed).
bool IntraToRemeasure(const StragglerVerdict& v);

}  // namespace preflight::collective
