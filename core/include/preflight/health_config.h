// The vocabulary of the node checks (checks/: gpu.*, ib.*, gpu.xid,
// fleet.versions, gpu.bandwidth, gpu.dcgm): the value types of their
// config keys and the parsers that read them. Here, below checks/, because
// config.cc must parse every key while it reads the file to name file, line
// and key; the key table itself stays in config.cc.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// The persistence mode every GPU must have (gpu_persistence).
enum class GpuPersistence { kAny, kOn, kOff };
const char* GpuPersistenceName(GpuPersistence p);  // "any", "on", "off"
Expected<GpuPersistence> ParsePersistence(const std::string& s);

// The link layer every IB/RoCE port must have (ib_link_layer).
enum class LinkLayer { kAny, kInfiniBand, kEthernet };
const char* LinkLayerName(LinkLayer l);  // "any", "InfiniBand", "Ethernet" (sysfs's words)
Expected<LinkLayer> ParseLinkLayer(const std::string& s);

// What a node check does with an Xid (xid_actions; the catalogue is xid.h).
enum class XidAction : int { kDrainReset, kDrain, kWarn, kUser, kIgnore };
const char* XidActionName(XidAction a);  // "drain_reset", "drain", "warn", "user", "ignore"
bool ParseXidAction(const std::string& s, XidAction* a);
// xid_actions: "79:drain_reset,13:ignore".
using XidActions = std::vector<std::pair<int, XidAction>>;
Expected<XidActions> ParseXidActions(const std::string& s);
std::string XidActionsText(const XidActions& l);
// xid_ignore: "13,31".
Expected<std::vector<std::string>> ParseXidList(const std::string& s);

// gpu_throttle_fail: NVML's clock throttle reasons ("hw_slowdown,hw_thermal").
Expected<std::vector<std::string>> ParseThrottleList(const std::string& s);
// gpu_compute_mode: any, default, exclusive_process, prohibited.
Expected<std::string> ParseComputeMode(const std::string& s);

// ib_counter_warn / ib_counter_fail: "symbol_error:10,port_xmit_discards:100",
// counter names as sysfs spells them.
using CounterLimits = std::vector<std::pair<std::string, uint64_t>>;
Expected<CounterLimits> ParseCounterLimits(const std::string& s);
std::string CounterLimitsText(const CounterLimits& l);

// fleet_fail_fields: driver, vbios, inforom, hca_fw, kernel.
Expected<std::vector<std::string>> ParseFleetFields(const std::string& s);
// bw_profile: auto or a GPU the bandwidth tier has a profile for.
Expected<std::string> ParseBwProfile(const std::string& s);
// dcgm_level / dcgm_health_level: 0 to 4.
Expected<uint64_t> ParseDcgmLevel(const std::string& s);

}  // namespace preflight
