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
// Authentication: the child sends a munge credential whose payload names
// this job and the dataset's cache key; the parent accepts it only if munge
// decodes it (same munge key, not expired, not replayed), the encoding uid
// is 0 (a prolog, i.e. root on a cluster node) and the payload is this
// job's. A port alone proves nothing. Refused peers get no byte of data.
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
};

// Tree shape. PeerParent(0) is SIZE_MAX.
size_t PeerParent(size_t i, unsigned fanout);
std::vector<size_t> PeerChildren(size_t i, size_t n, unsigned fanout);

// Stage `source` for this node as StageDataset does, reading it only on
// node 0 (or on fallback). Returns once this node's copy is published and
// its children were served (or gave up: wait_children, or the deadline).
Status StageWithPeers(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                      const PeerOptions& p, StagedDataset* out, FaultSide* side, PeerReport* rep);

// munge: the credential a child sends, and the parent's check of it.
std::string PeerPayload(const std::string& job_id, const std::string& key);
Expected<std::string> EncodePeerCredential(const std::string& munge_socket, const std::string& payload);
// Ok only for a credential munge decodes, encoded by uid 0, with exactly
// `payload`. Permission otherwise, with the reason.
Status VerifyPeerCredential(const std::string& munge_socket, const std::string& cred, const std::string& payload);

// Protocol pieces for tests (a forged peer): connect to `ep`, send `cred`
// as the hello and say "need"; true if the server accepted it (and then
// streamed at least the manifest).
bool PeerHelloAccepted(const PeerEndpoint& ep, const std::string& cred, double timeout_s);

}  // namespace preflight
