// Each node's address for preflight's own traffic between nodes: the host
// backend's ring (collective/) and the stage fan-out (stage/) listen on it
// and connect from it, so that traffic takes the network the site names
// (its fabric's IPoIB or RoCE address, not the management Ethernet) and
// a shaped or cut link in the emulated fabric (tests/harness/cluster.sh)
// is the link that traffic crosses.
//
// The file (config key node_addresses) is hosts(5)-shaped: "ADDRESS NODE
// [NODE...]" per line, '#' comments. Root's config, read by root and by the
// job's own steps; bounded at kMaxNodeAddressesBytes, every line checked
// (an IPv4 or IPv6 literal; node names as ValidNodeName). Unset: every
// caller keeps its default (the node name resolved, or the host's first
// IPv4 address).
#pragma once

#include <map>
#include <string>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr size_t kMaxNodeAddressesBytes = 1 << 20;

// node -> address. Errors read "FILE:LINE: ..."; a node named on two lines
// (or twice on one) is one, naming both lines.
Expected<std::map<std::string, std::string>> LoadNodeAddresses(const std::string& path);

// The address of `node` from cfg.node_addresses: "" when the key is unset
// or the file does not name the node; an unreadable or malformed file is
// an error (a site config error).
Expected<std::string> NodeAddress(const Config& cfg, const std::string& node);

}  // namespace preflight
