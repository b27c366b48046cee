// Rail signatures: what each node's compute rails look like, so the nodes
// of one allocation can be compared (issue "topology env v2", item 3).
//
// A node whose rails differ from the rest of the job (a rail missing, down,
// at another rate or link layer, a GPU next to another rail) runs a
// multi-node job at the speed of its worst rail, or hangs NCCL when the HCA
// sets differ (NVIDIA/nccl#1277, #2428). The prolog records each node's
// signature in <state_dir>/nodes/<node>.rails.json; the --nccl-check batch
// step reads every node's through a user step and names the odd node in the
// job's output (the figures pass through the user's step, so they decide
// nothing about the node); `preflight topo --compare` does the same for an
// admin. A rail that is down drains its node from that node's own prolog
// (the root-run check topo.rails), where nothing passes through the user.
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"
#include "preflight/topo.h"

namespace preflight {

struct RailInfo {
  std::string name;        // mlx5_0
  std::string kind;        // ib, efa, cxi
  std::string link_layer;  // of its first port ("" unknown)
  std::string rate;        // of its first port, as sysfs prints it
  std::string state;       // "usable", "down", "unknown"
  bool operator==(const RailInfo& o) const;
};

struct NodeRails {
  std::string node;
  std::vector<RailInfo> rails;  // compute rails only, by name
  std::string gpu_map;          // placement, topo_expect form: "0:mlx5_0,1:mlx5_1"
  // Everything but the node name, comparable as text.
  std::string Key() const;
  // "4 rails (4 x InfiniBand 100 Gb/sec (4X EDR)), GPU map 0:mlx5_0,..."
  std::string Summary() const;
};

// `topo` after ClassifyRails.
NodeRails RailsOf(const std::string& node, const Topology& topo);

std::string RailsJson(const NodeRails& r);                       // one line
Expected<NodeRails> ParseRailsJson(const std::string& line);     // one line

// <state_dir>/nodes/<node>.rails.json (0644: the job's user reads it).
std::string RailsPath(const Config& cfg, const std::string& node);
Status WriteRailsRecord(const Config& cfg, const NodeRails& r);

struct RailsDiff {
  std::string node;
  std::string what;          // "mlx5_3 down (others: usable); ..."
  bool missing_or_down = false;
};
struct RailsComparison {
  bool consistent = true;
  std::string reference;     // the majority's Summary(), or "" without majority
  size_t majority = 0;       // nodes that agree with it
  std::vector<RailsDiff> odd;  // nodes that differ from the majority
  std::string text;          // lines for the job output / preflight topo --compare
};
// The majority is the largest group of identical signatures holding more
// than half of the nodes; without one (e.g. two nodes that differ) every
// group is named and nobody is singled out.
RailsComparison CompareRails(const std::vector<NodeRails>& nodes);


}  // namespace preflight
