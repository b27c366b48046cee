// A node record as slurmctld's JSON gives it, for the node binaries' tests.
#pragma once

#include <string>

#include "preflight/slurmctl.h"

namespace preflight::node_test {

// n1, idle or drained, with `reason`.
inline NodeState Node(bool drain, const std::string& reason) {
  NodeState n;
  n.name = "n1";
  n.state = drain ? "IDLE+DRAIN" : "IDLE";
  n.drain = drain;
  n.reason = reason;
  return n;
}

}  // namespace preflight::node_test
