#include "stage_peer_hello.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "preflight/clock.h"
#include "stage_peer_net.h"

namespace preflight::stage_internal {

namespace {

constexpr uint32_t kMaxHelloFrame = 16384;  // a munge credential is ~200 bytes

Status Io(const std::string& what) { return Status::Unavailable(what + ": " + std::strerror(errno)); }

void Refuse(int fd, const std::string& why) {
  if (WriteFull(fd, "R", 1)) SendFrame(fd, why);
}

// Reads 'A'/'P' (Ok) or 'R' and its reason (Permission).
Status Verdict(int fd, char want, double by) {
  char c = 0;
  if (!ReadFull(fd, &c, 1, by, 0)) return Io("parent hello");
  if (c == want) return Status::Ok();
  std::string reason;
  if (c != 'R' || !RecvFrame(fd, &reason, by, 0, kMaxHelloFrame)) return Status::Permission("parent hello: protocol");
  return Status::Permission("parent refused us: " + reason);
}

}  // namespace

bool PeerAddressIs(int fd, const std::string& host) {
  struct sockaddr_in a {};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) return false;
  std::vector<uint32_t> addrs;
  return ResolveIPv4(host, &addrs) && std::find(addrs.begin(), addrs.end(), a.sin_addr.s_addr) != addrs.end();
}

Status ChildHello(int fd, const PeerOptions& p, const std::string& key, double answer_by) {
  size_t parent = PeerParent(p.self, p.fanout);
  PeerLink link = MakePeerLink(p, key, parent, p.self);
  std::string mine = PeerNonce(), theirs, cred;
  if (!WriteFull(fd, kMagic, sizeof kMagic) || !SendFrame(fd, std::to_string(p.self)) || !SendFrame(fd, mine))
    return Io("parent hello");
  Status v = Verdict(fd, 'P', answer_by);
  if (!v.ok()) return v;
  if (!RecvFrame(fd, &cred, answer_by, 0, kMaxHelloFrame) || !RecvFrame(fd, &theirs, answer_by, 0, 64))
    return Io("parent hello");
  // The answer must come from the parent's own address, with root's
  // credential for exactly this link and this node's nonce: anything else
  // is a squatter or a replay, and gets nothing of ours.
  if (!PeerAddressIs(fd, link.parent_host))
    return Status::Permission("the peer at " + link.parent_host + " answered from another address");
  v = VerifyPeerCredential(p.munge_socket, cred, ParentPayload(link, mine));
  if (!v.ok()) return Status::Permission("the peer did not prove it is the parent (" + v.message() + ")");
  if (theirs.size() != 32) return Status::Permission("the parent's nonce is malformed");
  auto answer = EncodePeerCredential(p.munge_socket, ChildPayload(link, theirs));
  if (!answer) return answer.status();
  if (!SendFrame(fd, *answer)) return Io("parent hello");
  return Verdict(fd, 'A', answer_by);
}

Status ParentHello(int fd, const PeerOptions& p, const std::string& key, double by, size_t* child) {
  char magic[sizeof kMagic];
  std::string index, nonce, cred;
  if (!ReadFull(fd, magic, sizeof magic, by, 0) || std::memcmp(magic, kMagic, sizeof magic) != 0)
    return Status::Permission("peer refused: not protocol 3");
  if (!RecvFrame(fd, &index, by, 0, 16) || !RecvFrame(fd, &nonce, by, 0, 64))
    return Status::Permission("peer refused: incomplete hello");
  char* end = nullptr;
  unsigned long c = std::strtoul(index.c_str(), &end, 10);
  if (index.empty() || *end || c == 0 || c >= p.nodes.size() || PeerParent(c, p.fanout) != p.self) {
    Refuse(fd, "node '" + index + "' is not a child of node " + std::to_string(p.self) + " in job " + p.job_id);
    return Status::Permission("peer refused: claims to be node '" + index + "', not a child of this node");
  }
  if (nonce.size() != 32) {
    Refuse(fd, "malformed nonce");
    return Status::Permission("peer refused: malformed nonce");
  }
  PeerLink link = MakePeerLink(p, key, p.self, c);
  if (!PeerAddressIs(fd, link.child_host)) {
    Refuse(fd, "not connected from node " + std::to_string(c) + "'s address " + link.child_host);
    return Status::Permission("peer refused: claims node " + std::to_string(c) + " but connects from another address");
  }
  auto mine = EncodePeerCredential(p.munge_socket, ParentPayload(link, nonce));
  if (!mine) {
    Refuse(fd, mine.status().message());
    return mine.status();
  }
  std::string pnonce = PeerNonce();
  if (!WriteFull(fd, "P", 1) || !SendFrame(fd, *mine) || !SendFrame(fd, pnonce) ||
      !RecvFrame(fd, &cred, by, 0, kMaxHelloFrame))
    return Status::Permission("peer refused: no credential (it did not take this node for its parent)");
  Status v = VerifyPeerCredential(p.munge_socket, cred, ChildPayload(link, pnonce));
  if (!v.ok()) {
    Refuse(fd, v.message());
    return v;
  }
  if (!WriteFull(fd, "A", 1)) return Io("child hello");
  *child = c;
  return Status::Ok();
}

}  // namespace preflight::stage_internal
