// Peer fan-out for --stage: the prologs of one allocation share one read of
// the source.
//
// The job's nodes, in node-list order, form a tree (node i's parent is
// (i-1)/fanout). Node 0 stages from the source as the job user (the usual
// StageDataset). Every other node stages from its parent instead: its
// cache's copier (StageCopier) connects to the parent, proves who it is,
// and receives the parent's published copy with its manifests; each file
// is checked against the parent's manifest (size) and a per-file hash of
// the bytes sent, written, given its mtime, and the build is published by
// the cache as usual, only when every file arrived and matched. Children
// that connected before a node's own stream began get that stream relayed
// byte for byte as it arrives (pipelined: a chain copies at once); later
// ones, and any whose relay broke (they ask once more), get the node's
// published copy. Node 0 serves from its published copy.
//
// Authentication (protocol 3, both ways; the argument in preflight(7),
// PEER FAN-OUT SECURITY): the child connects from its own address to the
// parent's, on a privileged port (only root listens there), and sends its
// index and a fresh nonce. The parent checks that the connection comes
// from that child's address (the job's node list) and answers with a munge
// credential of root naming job, dataset, parent node, child node and the
// child's nonce (ParentPayload), and a nonce of its own; the child checks
// it (munge decodes it, uid 0, exactly that payload) and answers with its
// own credential naming the same link and the parent's nonce
// (ChildPayload), which the parent checks likewise. A credential is bound
// to one link of one job and one connection: replayed to another node, or
// again, it names the wrong nodes or nonce. Refused peers get no byte of
// data. The stream that follows (manifest, per-file sizes and hashes)
// comes over that connection, so its origin is the proven parent; a copy
// is published only when every file matched it.
//
// Bounds: a stream that moves less than kPeerMinRate bytes a second on
// average after its first kPeerRateGrace seconds is dropped (a child then
// reads the source), and no stream outlives the cache's deadline.
//
// Fallback: a parent that can't be reached within wait_parent, refuses, or
// fails mid-stream (dead, hash mismatch, short data) makes the child remove
// what it received and read the source itself, as the user, within the
// cache's deadline (stage_timeout). A node whose cache already holds the
// dataset (warm hit) reads nothing: it tells its parent so, and serves its
// children from its copy.
//
// The warm check of a node that received its copy is the same as anywhere
// (stage_manifest.h): against the source, as the job user.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "preflight/stage_cache.h"
#include "preflight/status.h"

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
size_t PeerParent(size_t i, unsigned fanout);
std::vector<size_t> PeerChildren(size_t i, size_t n, unsigned fanout);

// Stage `source` for this node as StageDataset does, reading it only on
// node 0 (or on fallback). Returns once this node's copy is published and
// its children were served (or gave up: wait_children, or the deadline).
Status StageWithPeers(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                      const PeerOptions& p, StagedDataset* out, FaultSide* side, PeerReport* rep);

// ---- protocol 3 credentials (stage_peer_auth.cc) ----
// One link of the tree: which nodes are at its ends, for which job and
// dataset. Hosts as the job's node list names them (PeerEndpoint::host).
struct PeerLink {
  std::string job_id;
  std::string key;  // StageCacheKey of the source
  size_t parent = 0, child = 0;
  std::string parent_host, child_host;
};
PeerLink MakePeerLink(const PeerOptions& p, const std::string& key, size_t parent, size_t child);
// What the parent's credential says (echoing the child's nonce), and the
// child's (echoing the parent's). Different prefixes: one side's
// credential is never the other's.
std::string ParentPayload(const PeerLink& l, const std::string& child_nonce);
std::string ChildPayload(const PeerLink& l, const std::string& parent_nonce);
// 128 bits from getrandom(2), as 32 hex digits.
std::string PeerNonce();

Expected<std::string> EncodePeerCredential(const std::string& munge_socket, const std::string& payload);
// Ok only for a credential munge decodes, encoded by uid 0, with exactly
// `payload`. Permission otherwise, with the reason.
Status VerifyPeerCredential(const std::string& munge_socket, const std::string& cred, const std::string& payload);

// A forged or replaying peer, for tests: connects to `ep` claiming to be
// node `claim` of the job, takes the parent's answer, sends
// cred_for(parent's nonce) as its credential and says "need"; true if the
// server accepted it (and then streamed at least the manifest). With
// `keep`, an accepted connection is left open there for the caller (the
// rest of the stream follows), else closed.
bool PeerHelloAccepted(const PeerEndpoint& ep, size_t claim,
                       const std::function<std::string(const std::string& parent_nonce)>& cred_for, double timeout_s,
                       int* keep = nullptr);

// The uid owning a listening IPv4 TCP socket on `port` (any address), from
// /proc/net/tcp's text; -1 when none listens there. Used to tell a port
// held by another prolog (root) from one a user took (an attack).
long ListenerUid(const std::string& proc_net_tcp, uint16_t port);

}  // namespace preflight
