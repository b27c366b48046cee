#include "preflight/stage_peer.h"

#include <xxhash.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "preflight/stage_spec.h"
#include "stage_peer_net.h"
#include "stage_peer_receive.h"
#include "stage_peer_serve.h"

namespace preflight {

using namespace stage_internal;

bool PeerHelloAccepted(const PeerEndpoint& ep, size_t claim,
                       const std::function<std::string(const std::string& parent_nonce)>& cred_for, double timeout_s,
                       int* keep) {
  double until = MonotonicSeconds() + timeout_s;
  int fd = Connect(ep, until);
  if (fd < 0) return false;
  // The forger's side of ChildHello (stage_peer_hello.h), without checking
  // the parent's credential.
  char c = 0;
  std::string parent_cred, pnonce;
  bool accepted = WriteFull(fd, kMagic, sizeof kMagic) && SendFrame(fd, std::to_string(claim)) &&
                  SendFrame(fd, PeerNonce()) && ReadFull(fd, &c, 1, until, 0) && c == 'P' &&
                  RecvFrame(fd, &parent_cred, until, 0, 16384) && RecvFrame(fd, &pnonce, until, 0, 64) &&
                  SendFrame(fd, cred_for(pnonce)) && ReadFull(fd, &c, 1, until, 0) && c == 'A';
  if (accepted) {
    std::string manifest;
    accepted = WriteFull(fd, "N", 1) && AwaitStream(fd, until, 0) && RecvFrame(fd, &manifest, until, 0) &&
               !manifest.empty();
  }
  if (accepted && keep) *keep = fd;
  else ::close(fd);
  return accepted;
}

Status StageWithPeers(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                      const PeerOptions& p, StagedDataset* out, FaultSide* side, PeerReport* rep) {
  *rep = PeerReport();
  if (p.self >= p.nodes.size()) { *side = FaultSide::kNode; return Status::InvalidArgument("peer: node index out of range"); }
  std::string key = StageCacheKey(source);
  std::vector<size_t> children = PeerChildren(p.self, p.nodes.size(), p.fanout);
  Relay relay;
  relay.deadline = o.deadline;
  PeerServer server(p, key, o.deadline, p.self > 0 ? &relay : nullptr);
  bool serving = false;
  if (!children.empty()) {
    // Not serving (the port taken, e.g. by another job's prolog) is no
    // fault of this node: its children fall back to the source. A port a
    // user holds is an attack (PeerServer::Start says whose it is); the
    // children refuse that listener, since it can't prove it is this node.
    Status s = server.Start(&rep->squatted);
    serving = s.ok();
    if (!serving) rep->serve_error = s.message();
  }
  CopyOptions co;
  co.workers = o.workers;
  co.remote_workers = o.remote_workers;
  co.max_entries = o.max_entries;
  co.deadline = o.deadline;
  co.fs = o.fs;
  co.who = who;
  StageCacheOptions mine = o;
  Receiver rx(p, key, o.deadline, &relay);
  mine.copier = [&](int dfd, BuiltCopy* b, FaultSide* sd) -> Status {
    if (p.self > 0) {
      uint64_t got = 0;
      Status r = rx.Receive(dfd, b, &got);
      relay.End(r.ok());
      if (!r.ok() && rx.streamed()) {
        // Broken mid-stream: the parent may be alive (its own relay broke);
        // ask once more, briefly, for its published copy.
        RemoveTreeAt(dfd, "data", "data");
        *b = BuiltCopy();
        PeerOptions again = p;
        again.wait_parent = 1;
        Receiver rx2(again, key, o.deadline, nullptr);
        Status r2 = rx2.Receive(dfd, b, &got);
        if (r2.ok()) r = r2;
      }
      if (r.ok()) {
        rep->peer_bytes = got;
        b->peer_bytes = got;
        b->note = "received from peer " + p.nodes[PeerParent(p.self, p.fanout)].host + ":" +
                  std::to_string(p.nodes[PeerParent(p.self, p.fanout)].port);
        return r;
      }
      RemoveTreeAt(dfd, "data", "data");
      *b = BuiltCopy();
      rep->fell_back = true;
      rep->fallback_reason = r.message();
    }
    LimitToFreeRoom(dfd, &co);  // as StageDataset's own copier: bytes and inodes checked before writing
    Status s = CopySourceInto(source, co, dfd, b, sd);
    if (s.ok()) rep->source_bytes = b->stats.bytes;
    if (rep->fell_back) b->note = "read the source: " + rep->fallback_reason;
    return s;
  };
  Status s = StageDataset(mine, source, who, p.job_id, out, side);
  if (s.ok()) {
    rep->hit = out->hit;
    if (!rep->serve_error.empty())  // into stage.json and the prolog's summary
      out->note += std::string(out->note.empty() ? "" : "; ") + "not serving its children: " + rep->serve_error;
    server.SetReady(out->data_path.substr(0, out->data_path.size() - 5));  // <key>/<version>
    if (out->hit && p.self > 0) rx.SayHave();
  } else {
    server.SetFailed();
  }
  relay.End(false);  // no-op after a relay; frees children that joined a node that never received
  if (serving) {
    server.WaitChildren(children.size(), o.deadline);
    server.Stop();
    rep->refused = server.refused;
    rep->served = server.served;
    rep->relayed = server.relayed;
    rep->served_bytes = server.served_bytes;
  }
  return s;
}

}  // namespace preflight
