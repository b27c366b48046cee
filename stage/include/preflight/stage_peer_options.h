// The peer fan-out's options, its bounds, its report and the tree's shape
// (stage_peer.h: what the fan-out's parts share, apart from its entry point).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace preflight {

struct PeerEndpoint {
  std::string host;  // an IPv4 address or a resolvable name
  uint16_t port = 0;
};

struct PeerOptions {
  std::string job_id;
  std::vector<PeerEndpoint> nodes;  // the job's nodes in order; [0] reads the source
  size_t self = 0;                  // this node's index
  unsigned fanout = 2;
  double wait_parent = 10;     // seconds to reach the parent before reading the source
  double wait_children = 10;   // seconds to wait for a child that has not connected yet
  std::string munge_socket;    // empty: libmunge's default
  int listen_fd = -1;          // a bound, listening socket to serve on (else nodes[self].port)
  // This node's own address (node_addresses.h): it serves on it and
  // connects to its parent from it. Empty: serve on any address.
  std::string bind_host;
  // Test hook: the server drops each stream after sending this many file
  // bytes (0: never), as a parent dying mid-stream would.
  uint64_t test_drop_after = 0;
  bool test_die = false;  // ... and instead SIGKILLs its own process
};

// The slowest stream a peer may keep up, on average, once its grace
// (kPeerRateGrace seconds) is over: well under a shaped 40 Mbit/s link
// shared by two children, far above a reader that only holds a prolog.
constexpr uint64_t kPeerMinRate = 1 << 20;
constexpr double kPeerRateGrace = 10;

struct PeerReport {
  uint64_t source_bytes = 0;  // file bytes this node read from the source
  uint64_t peer_bytes = 0;    // file bytes received from the parent
  uint64_t served_bytes = 0;  // file bytes sent to children
  bool hit = false;           // the cache already held it: no part in reading
  bool fell_back = false;     // read the source because the parent failed
  std::string fallback_reason;
  unsigned refused = 0;       // peers refused (bad or foreign credential)
  unsigned served = 0;        // children served a copy
  unsigned relayed = 0;       // ... of them while this node was still receiving
  std::string serve_error;    // why this node could not serve (its children read the source)
  bool squatted = false;      // ... because a user (not root) held its port: an attack
};

// Tree shape. PeerParent(0) is SIZE_MAX.
inline size_t PeerParent(size_t i, unsigned fanout) { return i == 0 ? SIZE_MAX : (i - 1) / std::max(1u, fanout); }
inline std::vector<size_t> PeerChildren(size_t i, size_t n, unsigned fanout) {
  std::vector<size_t> c;
  unsigned k = std::max(1u, fanout);
  for (size_t j = i * k + 1; j <= i * k + k && j < n; ++j) c.push_back(j);
  return c;
}

}  // namespace preflight
