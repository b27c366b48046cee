// Fleet consistency: each node's driver, VBIOS, InfoROM, GPU model, HCA model and
// firmware, and kernel, recorded by the node checks, so nodes can be compared
// (issue 13, item 6).
//
// A node on another driver or HCA firmware than the rest of an allocation
// runs NCCL at the speed of the odd one or hangs it; a VBIOS or kernel that
// differs is a rollout left half done. The check fleet.versions (quick, every
// prolog, epilog and health check) writes <state_dir>/nodes/<node>.versions.json
// and, in the health check only (the prolog must stay fast when a shared
// state_dir holds thousands of records), where state_dir holds other nodes'
// records (a state_dir shared by the partition), compares this node against
// the fresh ones (fleet_max_age) of
// the same hardware (GPU model and HCA model): differing from a strict
// majority on a field in fleet_fail_fields fails (drains), on another field
// warns. `preflight fleet` compares records for an admin (a partition's:
// --nodes "$(sinfo -h -p P -o %N)"), and the --nccl-check batch step names an
// allocation's odd node in the job output (through a user step: names only).
//
// Seams: NVML through nvml_library (tests: the fake NVML's `driver` and
// `vbios` faults), sysfs through FsRoot (fw_ver, board_id), state_dir.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "preflight/checks.h"
#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

struct NodeVersions {
  std::string node;
  double at = 0;           // unix time recorded
  std::string driver;      // NVML driver version ("" no NVML)
  std::string gpu_model;   // distinct GPU names, sorted, ","-joined
  std::string vbios;       // distinct VBIOS versions, sorted, ","-joined
  std::string inforom;     // distinct InfoROM image (GPU firmware) versions
  std::string hca_model;   // distinct HCA board_id values
  std::string hca_fw;      // distinct HCA fw_ver values
  std::string kernel;      // /proc/sys/kernel/osrelease
  // The compared fields, by name: driver, vbios, inforom, hca_fw, kernel (gpu_model
  // and hca_model pick who is compared with whom).
  std::map<std::string, std::string> Fields() const;
  std::string HardwareClass() const { return gpu_model + "|" + hca_model; }
};

inline const std::vector<std::string> kFleetFields = {"driver", "vbios", "inforom", "hca_fw", "kernel"};

std::string VersionsJson(const NodeVersions& v);                    // one line
Expected<NodeVersions> ParseVersionsJson(const std::string& line);  // one line
std::string VersionsPath(const Config& cfg, const std::string& node);

struct VersionsDiff {
  std::string node, field, value, majority;
  size_t others = 0;  // nodes with the majority's value
};
struct FleetComparison {
  bool consistent = true;
  std::vector<VersionsDiff> odd;
  std::vector<std::string> no_majority;  // fields that differ with no majority
  std::string text;  // one line per finding, or a summary line
};
// Per hardware class and field: the value held by more than half of the
// class's nodes is the reference; every node with another value is named.
// Without a strict majority nobody is singled out (the line says so).
FleetComparison CompareVersions(const std::vector<NodeVersions>& nodes);

// fleet.versions (see above).
std::vector<CheckResult> CheckFleetVersions(const CheckEnv& env);

}  // namespace preflight
