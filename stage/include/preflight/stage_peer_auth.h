// Protocol 3 of the peer fan-out (stage_peer.h, PEER FAN-OUT SECURITY in
// preflight(7)): a link's credentials, made and checked with munge
// (stage_peer_auth.cc), and the check of who holds a listening port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "preflight/stage_peer_options.h"
#include "preflight/status.h"

namespace preflight {

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

// The uid owning a listening IPv4 TCP socket on `port` (any address), from
// /proc/net/tcp's text; -1 when none listens there. Used to tell a port
// held by another prolog (root) from one a user took (an attack).
long ListenerUid(const std::string& proc_net_tcp, uint16_t port);

}  // namespace preflight
