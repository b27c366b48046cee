// Protocol 3's hello, both ends (private to stage/src): each side proves
// who it is with a munge credential bound to this link of this job and to
// the other side's fresh nonce (stage_peer.h, preflight(7) PEER FAN-OUT
// SECURITY). Definitions in stage_peer_hello.cc.
//
// Wire, after connect (frames: SendFrame):
//   child  -> magic, frame(child's index), frame(child's nonce)
//   parent -> 'P', frame(parent credential), frame(parent's nonce)
//             or 'R', frame(why refused)
//   child  -> frame(child credential)   (or hangs up: the parent is false)
//   parent -> 'A' or 'R', frame(why refused)
#pragma once

#include <cstddef>
#include <string>

#include "preflight/stage_peer_auth.h"
#include "preflight/stage_peer_options.h"
#include "preflight/status.h"

namespace preflight::stage_internal {

// Child side on a socket connected to its parent (PeerParent(p.self)).
// Ok: accepted (the parent waits for "N" or "H"). Permission: the peer did
// not prove it is the parent (a squatter, a misconfigured node), or
// refused this node; the message says which. Unavailable: I/O, timeout.
Status ChildHello(int fd, const PeerOptions& p, const std::string& key, double answer_by);

// Parent side on an accepted socket. Ok: `*child` is a child of this node
// that proved itself, and 'A' was sent. Otherwise the peer got 'R' with
// the reason where it still listened, and no byte of data.
Status ParentHello(int fd, const PeerOptions& p, const std::string& key, double by, size_t* child);

// The socket's remote IPv4 address is one `host` resolves to.
bool PeerAddressIs(int fd, const std::string& host);

}  // namespace preflight::stage_internal
