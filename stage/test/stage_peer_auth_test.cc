// The fan-out's trust boundary (stage_peer.h, protocol 3; preflight(7) PEER
// FAN-OUT SECURITY): credentials bound to one link of one job and one
// connection, forged and replaying peers refused, a user squatting a
// parent's port refused by the child and named an attack by the parent.
#include "stage_peer_test_util.h"

namespace preflight {
namespace {

using namespace peer_test;

const std::string kNonceA(32, 'a'), kNonceB(32, 'b');

// A credential as `who` (uid 0: this process) would encode it, made in a
// child process dropped to `who` when that is a user.
std::string EncodeAs(const StageIdentity* who, const std::string& socket, const std::string& payload) {
  if (!who) {
    auto c = EncodePeerCredential(socket, payload);
    return c ? *c : std::string();
  }
  int p[2];
  if (::pipe(p) != 0) return "";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string err;
    if (!DropToStageUser(*who, &err)) ::_exit(2);
    auto c = EncodePeerCredential(socket, payload);
    if (c.ok()) { ssize_t w = ::write(p[1], c->data(), c->size()); (void)w; }
    ::_exit(c.ok() ? 0 : 1);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, n);
  ::close(p[0]);
  int st;
  ::waitpid(pid, &st, 0);
  return out;
}

TEST(PeerCredential, BoundToOneJobOneLinkAndOneNonce) {
  if (!CanRunMunged()) GTEST_SKIP() << "skipped: needs root and munged";
  TempDir t;
  Munged m(t.path() + "/munge");
  ASSERT_TRUE(m.ok()) << "munged did not start";
  PeerLink link{"77", "00112233aabbccdd", 1, 3, "10.0.0.2", "10.0.0.4"};
  std::string want = ChildPayload(link, kNonceA);
  // Each check decodes a fresh credential: munged refuses a second decode
  // of any credential (below), so one credential tells one thing.
  auto refused = [&](const std::string& payload) {
    Status s = VerifyPeerCredential(m.socket(), EncodeAs(nullptr, m.socket(), payload), want);
    return s.code() == Status::Code::kPermission;
  };
  std::string good = EncodeAs(nullptr, m.socket(), want);
  EXPECT_TRUE(VerifyPeerCredential(m.socket(), good, want).ok());
  EXPECT_EQ(VerifyPeerCredential(m.socket(), good, want).code(), Status::Code::kPermission) << "replayed";
  PeerLink other = link;
  other.job_id = "78";
  EXPECT_TRUE(refused(ChildPayload(other, kNonceA))) << "another job";
  other = link;
  other.key = "ffffffffffffffff";
  EXPECT_TRUE(refused(ChildPayload(other, kNonceA))) << "another dataset";
  other = link;
  other.parent = 0;
  other.parent_host = "10.0.0.1";
  EXPECT_TRUE(refused(ChildPayload(other, kNonceA))) << "for another parent (replayed to node 0)";
  other = link;
  other.child = 4;
  other.child_host = "10.0.0.5";
  EXPECT_TRUE(refused(ChildPayload(other, kNonceA))) << "another child's";
  other = link;
  other.child_host = "10.0.0.9";
  EXPECT_TRUE(refused(ChildPayload(other, kNonceA))) << "the same index at another address";
  EXPECT_TRUE(refused(ChildPayload(link, kNonceB))) << "another connection's nonce";
  EXPECT_TRUE(refused(ParentPayload(link, kNonceA))) << "the parent's credential as the child's";
  EXPECT_EQ(VerifyPeerCredential(m.socket(), "MUNGE:forged:", want).code(), Status::Code::kPermission);
  // A user's genuine credential with the right payload: not a prolog.
  StageIdentity who;
  ASSERT_TRUE(NobodyReader(&who)) << kNoNobody;
  std::string user_cred = EncodeAs(&who, m.socket(), want);
  ASSERT_FALSE(user_cred.empty());
  Status s = VerifyPeerCredential(m.socket(), user_cred, want);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("uid " + std::to_string(who.uid)), std::string::npos) << s.message();
}

TEST_F(PeerFanOut, ForgedPeersGetNoDataAndTheRealChildDoes) {
  auto& nodes = Nodes(2, "920");
  std::thread parent([&] {
    Node& n = *nodes[0];
    n.status = StageWithPeers(n.cache, src_, {}, n.peer, &n.out, &n.side, &n.rep);
  });
  PeerEndpoint ep = nodes[1]->peer.nodes[0];
  std::string key = StageCacheKey(src_);
  PeerLink link = MakePeerLink(nodes[1]->peer, key, 0, 1);
  auto fixed = [](std::string c) { return [c](const std::string&) { return c; }; };
  EXPECT_FALSE(PeerHelloAccepted(ep, 1, fixed("MUNGE:not-a-credential:"), 5));
  // Another job's genuine credential, with this connection's nonce.
  PeerLink other = link;
  other.job_id = "921";
  EXPECT_FALSE(PeerHelloAccepted(ep, 1, [&](const std::string& pn) {
    return EncodeAs(nullptr, munged_->socket(), ChildPayload(other, pn));
  }, 5));
  // A credential from another munge key (another cluster).
  Munged foreign(t_.path() + "/munge2", 'q');
  ASSERT_TRUE(foreign.ok());
  EXPECT_FALSE(PeerHelloAccepted(ep, 1, [&](const std::string& pn) {
    return EncodeAs(nullptr, foreign.socket(), ChildPayload(link, pn));
  }, 5));
  // A node that is no child of node 0 gets not even node 0's credential.
  EXPECT_FALSE(PeerHelloAccepted(ep, 5, fixed("x"), 5));
  Node& c = *nodes[1];
  c.status = StageWithPeers(c.cache, src_, {}, c.peer, &c.out, &c.side, &c.rep);
  parent.join();
  ASSERT_TRUE(nodes[0]->status.ok()) << nodes[0]->status.message();
  ExpectGoodCopy(1);
  EXPECT_EQ(nodes[0]->rep.refused, 4u);
  EXPECT_EQ(nodes[0]->rep.served, 1u);
  EXPECT_EQ(nodes[0]->rep.served_bytes, bytes_);  // nothing went to the forged peers
  EXPECT_EQ(c.rep.peer_bytes, bytes_);
  EXPECT_EQ(c.fs.read.load(), 0u);
}

// What a squatter on node 1's port gets from node 3 (node 3's genuine root
// credential, for the link 1 -> 3 and the squatter's nonce) replayed to
// node 0, which serves the same job, and to node 1 itself: refused both
// times, and the job's real nodes are served as ever.
TEST_F(PeerFanOut, ACredentialReplayedToAnotherServingNodeIsRefused) {
  auto& nodes = Nodes(5, "925");
  std::string key = StageCacheKey(src_);
  auto stolen = [&] { return EncodeAs(nullptr, munged_->socket(), ChildPayload(MakePeerLink(nodes[3]->peer, key, 1, 3), kNonceA)); };
  std::vector<std::thread> ts;
  for (size_t i : {0, 1})
    ts.emplace_back([&, i] {
      Node& n = *nodes[i];
      n.status = StageWithPeers(n.cache, src_, {}, n.peer, &n.out, &n.side, &n.rep);
    });
  const auto& eps = nodes[0]->peer.nodes;
  std::string s1 = stolen(), s2 = stolen(), s3 = stolen();
  EXPECT_FALSE(PeerHelloAccepted(eps[0], 1, [&](const std::string&) { return s1; }, 5)) << "as node 1 to node 0";
  EXPECT_FALSE(PeerHelloAccepted(eps[0], 3, [&](const std::string&) { return s2; }, 5)) << "as node 3 to node 0";
  EXPECT_FALSE(PeerHelloAccepted(eps[1], 3, [&](const std::string&) { return s3; }, 5)) << "to node 1, another nonce";
  RunAll(nodes, src_, 2);
  for (auto& t : ts) t.join();
  for (size_t i = 0; i < nodes.size(); ++i) ExpectGoodCopy(i);
  EXPECT_EQ(nodes[0]->rep.refused, 2u);
  EXPECT_EQ(nodes[1]->rep.refused, 1u);
  EXPECT_EQ(nodes[0]->rep.served_bytes, 2 * bytes_);
  EXPECT_EQ(nodes[1]->rep.served, 2u);
  for (size_t i = 1; i < nodes.size(); ++i) EXPECT_EQ(nodes[i]->fs.read.load(), 0u) << "node " << i;
}

// A user's process holds node 0's port (where the kernel lets users bind
// it) and answers as node 0 would, with a credential the user made. Node
// 0 names it an attack; node 1 refuses it before sending its own
// credential, and reads the source.
TEST_F(PeerFanOut, AUserSquattingTheParentsPortIsRefusedAndNamedAnAttack) {
  StageIdentity who;
  ASSERT_TRUE(NobodyReader(&who)) << kNoNobody;
  auto& nodes = Nodes(2, "935");
  std::string key = StageCacheKey(src_);
  PeerLink link = MakePeerLink(nodes[1]->peer, key, 0, 1);
  int portp[2], gotp[2];
  ASSERT_EQ(::pipe(portp), 0);
  ASSERT_EQ(::pipe(gotp), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string err;
    if (!DropToStageUser(who, &err)) ::_exit(2);
    uint16_t port = 0;
    int l = Listen(&port);
    if (l < 0 || ::write(portp[1], &port, sizeof port) != sizeof port) ::_exit(3);
    int fd = ::accept(l, nullptr, nullptr);
    struct timeval tv = {10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    auto frame = [&](std::string* s) {
      uint32_t n = 0;
      if (::recv(fd, &n, sizeof n, MSG_WAITALL) != sizeof n || n > 65536) return false;
      s->resize(n);
      return ::recv(fd, s->data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
    };
    auto send_frame = [&](const std::string& s) {
      uint32_t n = static_cast<uint32_t>(s.size());
      return ::send(fd, &n, sizeof n, MSG_NOSIGNAL) == sizeof n && ::send(fd, s.data(), n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
    };
    char magic[8];
    std::string index, nonce, theirs;
    auto mine = EncodePeerCredential(munged_->socket(), ParentPayload(link, ""));
    bool ok = ::recv(fd, magic, sizeof magic, MSG_WAITALL) == sizeof magic && frame(&index) && frame(&nonce);
    if (ok) mine = EncodePeerCredential(munged_->socket(), ParentPayload(link, nonce));
    ok = ok && mine.ok() && ::send(fd, "P", 1, MSG_NOSIGNAL) == 1 && send_frame(*mine) && send_frame(kNonceB);
    bool got = ok && frame(&theirs) && !theirs.empty();
    ssize_t w = ::write(gotp[1], got ? "G" : "N", 1);
    (void)w;
    ::_exit(0);
  }
  ::close(portp[1]);
  ::close(gotp[1]);
  uint16_t port = 0;
  ASSERT_EQ(::read(portp[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(portp[0]);
  ::close(nodes[0]->lfd);
  nodes[0]->lfd = -1;
  nodes[0]->peer.listen_fd = -1;
  nodes[0]->peer.bind_host = "127.0.0.1";
  for (auto& n : nodes) n->peer.nodes[0].port = port;
  nodes[1]->peer.wait_parent = 2;
  RunAll(nodes, src_);
  char got = 0;
  EXPECT_EQ(::read(gotp[0], &got, 1), 1);
  ::close(gotp[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_EQ(got, 'N') << "the squatter received the child's credential";
  ASSERT_TRUE(nodes[0]->status.ok()) << nodes[0]->status.message();
  EXPECT_TRUE(nodes[0]->rep.squatted);
  EXPECT_NE(nodes[0]->rep.serve_error.find("ATTACK"), std::string::npos) << nodes[0]->rep.serve_error;
  EXPECT_NE(nodes[0]->rep.serve_error.find("uid " + std::to_string(who.uid)), std::string::npos) << nodes[0]->rep.serve_error;
  EXPECT_NE(nodes[0]->out.note.find("ATTACK"), std::string::npos) << nodes[0]->out.note;
  ExpectGoodCopy(1);
  EXPECT_TRUE(nodes[1]->rep.fell_back);
  EXPECT_NE(nodes[1]->rep.fallback_reason.find("did not prove it is the parent"), std::string::npos)
      << nodes[1]->rep.fallback_reason;
  EXPECT_EQ(nodes[1]->rep.peer_bytes, 0u);
  EXPECT_EQ(nodes[1]->fs.read.load(), bytes_);
}

// A child that proved itself and then reads a trickle (16 KiB every
// 0.25 s, which keeps a per-send timeout happy) is dropped by the rate
// floor: the parent's prolog finishes instead of serving it for ~25
// minutes, and the child is not counted as served.
TEST_F(PeerFanOut, AChildThatTricklesIsDroppedByTheRateFloor) {
  Write(src_ + "/huge", Blob(24 << 20, 'h'));
  auto& nodes = Nodes(2, "940");
  std::string key = StageCacheKey(src_);
  std::atomic<bool> done{false};
  std::thread parent([&] {
    Node& n = *nodes[0];
    n.status = StageWithPeers(n.cache, src_, {}, n.peer, &n.out, &n.side, &n.rep);
    done = true;
  });
  PeerLink link = MakePeerLink(nodes[1]->peer, key, 0, 1);
  int fd = -1;
  ASSERT_TRUE(PeerHelloAccepted(nodes[1]->peer.nodes[0], 1, [&](const std::string& pn) {
    return EncodeAs(nullptr, munged_->socket(), ChildPayload(link, pn));
  }, 30, &fd));
  uint64_t got = 0;
  std::vector<char> buf(16 << 10);
  // Until the parent's prolog is done with us (what the socket buffers
  // still hold would take minutes to trickle out).
  while (!done) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0) break;
    if (n > 0) got += static_cast<uint64_t>(n);
    ::usleep(250000);
  }
  ::close(fd);
  parent.join();
  ASSERT_TRUE(nodes[0]->status.ok()) << nodes[0]->status.message();
  EXPECT_LT(got, bytes_ + (24u << 20)) << "the trickle got the whole copy";
  EXPECT_EQ(nodes[0]->rep.served, 0u);
}

TEST(PeerPort, ListenerUidReadsProcNetTcp) {
  std::string text =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:0385 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n"
      "   1: 6501017F:0386 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 2 1 0 100 0 0 10 0\n"
      "   2: 6501017F:0387 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1002        0 3 1 0 100 0 0 10 0\n";
  EXPECT_EQ(ListenerUid(text, 901), 0);
  EXPECT_EQ(ListenerUid(text, 902), 1001);
  EXPECT_EQ(ListenerUid(text, 903), -1);  // connected, not listening
  EXPECT_EQ(ListenerUid(text, 904), -1);
}

}  // namespace
}  // namespace preflight
