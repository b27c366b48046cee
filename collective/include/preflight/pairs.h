// Ring pairs and per-node groups inside one launch: the measurements the
// straggler rule (straggler.h) judges. Every rank of the launch calls the
// same function; the ranks of each group form a sub-group
// (MakeSubBootstrap) and measure while the others measure their own group
// or stand by in the same fences.
//
// Pairs (nodes[i], nodes[i+1 mod n]) run in rounds of disjoint pairs, all
// pairs of a round at once: two rounds for an even node count, three for
// an odd one, one for two nodes, whatever n is (a node is in one pair at a
// time, so pairs of a round share no node). Sequential pairs grew the
// check's wall time with n; rounds do not (preflight(7), SCALE).
//
// Each round has a deadline (an equal share of the budget), which the host
// backend keeps (HostOptions::deadline): a cut link fails its pair in time
// and the other pairs of the round finish. Measure twice before blaming:
// every pair is measured again once the rule names a node by its pairs,
// and every node's own ranks once it names one by its intra-node figure;
// each keeps its better sample and the median its worse (straggler.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "preflight/collective.h"
#include "preflight/collective_records.h"
#include "preflight/config.h"
#include "preflight/options.h"
#include "preflight/straggler.h"

namespace preflight::collective {

// Rounds of disjoint ring pairs for n nodes: pair p is (p, p+1 mod n).
std::vector<std::vector<size_t>> PairRounds(size_t n);

struct PairsOptions {
  Level level = Level::kQuick;
  BackendKind backend = BackendKind::kHost;  // kHost or kNccl (resolved)
  double user_rate_cap = 0;  // $PREFLIGHT_NCCL_HOST_RATE of a user-run rank
  double budget_s = 60;      // wall time for every round, the second samples included
  bool remeasure = true;     // measure the pairs of named nodes a second time
  bool intra = false;        // also one round of every node's own ranks (2+ per node), twice when one is named
};

struct PairsOutcome {
  std::vector<std::string> nodes;       // in ring order
  std::vector<ResultRecord> pairs;      // kind "pair", one per ring pair
  std::vector<ResultRecord> intra;      // kind "intra-node", one per node (opt.intra)
  StragglerVerdict verdict;             // the rule over the final figures
  bool all_pass = true;                 // every pair met its threshold (none: always)
  std::string text;                     // "# pair ..." lines and the rule's, for a person
};

// Collective over `b`; `rank_nodes`: each rank's node (AllGather "node").
// Every rank returns the same outcome. An error is a bootstrap failure
// (the launch is broken); a pair that cannot measure is a failed pair.
Expected<PairsOutcome> RunPairs(Bootstrap& b, const std::vector<std::string>& rank_nodes, const Config& cfg,
                                const PairsOptions& opt);

// The straggler rule over a step's records (the orchestrator's view):
// pair and intra-node records in, verdict out.
StragglerVerdict StragglersFromRecords(const std::vector<std::string>& nodes, const std::vector<ResultRecord>& records,
                                       double fraction, double reference);

}  // namespace preflight::collective
