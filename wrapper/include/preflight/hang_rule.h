// Which node is behind a hang, from NCCL RAS reports taken a few seconds
// apart once a stall alert fired (hang_probe.h). Pure: tests feed parsed
// reports (ras_status.h) and a host-to-node map.
//
// The rule (man preflight-run(1), HANG ATTRIBUTION), in order:
//  1. A process RAS considers dead, or one it gets no data from
//     (unresponsive, missing ranks), names its node at once.
//  2. A communicator whose ranks launched different counts of a collective,
//     with the same counts in the first and the last report (no progress
//     over the polls), names the nodes of the ranks that are behind.
//     Counts that moved name no one (the job is slow, not hung).
//  3. Equal counts and no progress name no one by RAS: a collective stuck
//     on the GPU looks healthy to it (every rank launched it; NCCL counts
//     launches, NVIDIA/nccl#1730). That hands over to the GPU power watch.
// Only nodes of the job are named; an address that maps to none is said,
// and named as nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "preflight/ras_status.h"

namespace preflight {

enum class HangCause {
  kNoReport,      // no usable report
  kDead,          // rule 1
  kUnresponsive,  // rule 1
  kBehind,        // rule 2
  kProgressing,   // counts moved between the polls
  kEqualCounts,   // rule 3
  kUnlisted,      // counts differ, but RAS listed no rank (too many behind)
};
const char* HangCauseName(HangCause c);  // "dead", "unresponsive", "behind", ...

struct HangFinding {
  HangCause cause = HangCause::kNoReport;
  std::vector<std::string> nodes;  // job nodes named, sorted, unique
  std::string line;                // one line for the job output and the result
};

// node_of: RAS's host (an address) -> a node of this job, "" when none.
// polls: the parsed reports in the order taken (empty: kNoReport).
HangFinding AttributeHang(const std::vector<RasSnapshot>& polls,
                          const std::function<std::string(const std::string& host)>& node_of);

// Rule 1 holds for this report: the probe stops polling.
bool RasNamesAtOnce(const RasSnapshot& s);

}  // namespace preflight
