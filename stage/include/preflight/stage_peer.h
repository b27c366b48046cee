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
#include "preflight/stage_peer_auth.h"
#include "preflight/stage_peer_options.h"
#include "preflight/status.h"

namespace preflight {

// Stage `source` for this node as StageDataset does, reading it only on
// node 0 (or on fallback). Returns once this node's copy is published and
// its children were served (or gave up: wait_children, or the deadline).
Status StageWithPeers(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                      const PeerOptions& p, StagedDataset* out, FaultSide* side, PeerReport* rep);

// A forged or replaying peer, for tests: connects to `ep` claiming to be
// node `claim` of the job, takes the parent's answer, sends
// cred_for(parent's nonce) as its credential and says "need"; true if the
// server accepted it (and then streamed at least the manifest). With
// `keep`, an accepted connection is left open there for the caller (the
// rest of the stream follows), else closed.
bool PeerHelloAccepted(const PeerEndpoint& ep, size_t claim,
                       const std::function<std::string(const std::string& parent_nonce)>& cred_for, double timeout_s,
                       int* keep = nullptr);

}  // namespace preflight
