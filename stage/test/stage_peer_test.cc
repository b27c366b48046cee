// Peer fan-out (stage_peer.h) on emulated nodes (stage_peer_test_util.h):
// the tree, the copies, the fallbacks, a real SIGKILL of a parent. The
// credentials and hostile peers: stage_peer_auth_test.cc.
#include "stage_peer_test_util.h"

namespace preflight {
namespace {

using namespace peer_test;

TEST(PeerTree, ShapeIsAFanoutTree) {
  EXPECT_EQ(PeerParent(0, 2), SIZE_MAX);
  EXPECT_EQ(PeerParent(1, 2), 0u);
  EXPECT_EQ(PeerParent(2, 2), 0u);
  EXPECT_EQ(PeerParent(3, 2), 1u);
  EXPECT_EQ(PeerParent(6, 2), 2u);
  EXPECT_EQ(PeerChildren(0, 8, 2), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(PeerChildren(3, 8, 2), (std::vector<size_t>{7}));
  EXPECT_TRUE(PeerChildren(4, 8, 2).empty());
}

TEST_F(PeerFanOut, ThreeNodesReadTheSourceOnceAndEveryCopyIsIdentical) {
  auto& nodes = Nodes(3, "900");
  const std::string& src = src_;
  const uint64_t bytes = bytes_;
  RunAll(nodes, src);
  uint64_t read_total = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = *nodes[i];
    ExpectGoodCopy(i);
    EXPECT_FALSE(n.out.hit);
    EXPECT_FALSE(n.rep.fell_back) << n.rep.fallback_reason;
    read_total += n.fs.read;
  }
  EXPECT_EQ(read_total, bytes);  // the source was read once, by node 0
  EXPECT_EQ(nodes[0]->fs.read.load(), bytes);
  EXPECT_EQ(nodes[0]->rep.source_bytes, bytes);
  EXPECT_EQ(nodes[0]->rep.served, 2u);
  EXPECT_EQ(nodes[0]->rep.served_bytes, 2 * bytes);
  EXPECT_EQ(nodes[1]->rep.peer_bytes, bytes);
  EXPECT_EQ(nodes[2]->rep.peer_bytes, bytes);
  // A received copy is a full cache entry: the next job's warm check (as
  // anywhere, against the source) serves it on every node, reading nothing.
  for (auto& n : nodes) { n->peer.job_id = "901"; n->fs.read = 0; }
  RunAll(nodes, src);
  for (size_t i = 0; i < nodes.size(); ++i) {
    ASSERT_TRUE(nodes[i]->status.ok()) << nodes[i]->status.message();
    EXPECT_TRUE(nodes[i]->out.hit) << "node " << i;
    EXPECT_TRUE(nodes[i]->rep.hit);
    EXPECT_EQ(nodes[i]->fs.read.load(), 0u);
    EXPECT_EQ(nodes[i]->rep.peer_bytes, 0u);
  }
}

// Five nodes, two levels: node 1 relays to 3 and 4 while it receives.
TEST_F(PeerFanOut, FiveNodesTwoLevelsRelayWhileReceiving) {
  auto& nodes = Nodes(5, "940");
  const std::string& src = src_;
  const uint64_t bytes = bytes_;
  // Node 0 starts a second late, so 3 and 4 have surely joined node 1
  // before node 1's stream begins (its parent answers later; it waits).
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Node& n = *nodes[0];
    n.status = StageWithPeers(n.cache, src, {}, n.peer, &n.out, &n.side, &n.rep);
  });
  RunAll(nodes, src, 1);
  late.join();
  uint64_t read_total = 0;
  unsigned relayed = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = *nodes[i];
    ExpectGoodCopy(i);
    EXPECT_FALSE(n.rep.fell_back) << n.rep.fallback_reason;
    read_total += n.fs.read;
    relayed += n.rep.relayed;
    if (i > 0) {
      EXPECT_EQ(n.rep.peer_bytes, bytes) << "node " << i;
    }
  }
  EXPECT_EQ(read_total, bytes);
  EXPECT_EQ(nodes[1]->rep.served, 2u);
  EXPECT_EQ(nodes[2]->rep.served, 0u);  // 5 nodes: 2's children would be 5 and 6
  EXPECT_EQ(nodes[1]->rep.relayed, 2u);
  EXPECT_EQ(relayed, 2u);
}

TEST_F(PeerFanOut, KilledParentMakesChildrenReadTheSourceThemselves) {
  auto& nodes = Nodes(3, "910");
  RunWithDyingParent(0);
  for (size_t i = 1; i < nodes.size(); ++i) {
    Node& n = *nodes[i];
    ExpectGoodCopy(i);
    EXPECT_TRUE(n.rep.fell_back) << "node " << i;
    EXPECT_NE(n.rep.fallback_reason.find("parent"), std::string::npos) << n.rep.fallback_reason;
    EXPECT_EQ(n.fs.read.load(), bytes_);
    // Only the verified copy is published: one version, no leftovers.
    std::string keydir = n.cache.dir + "/" + n.out.key;
    int versions = 0, tmps = 0;
    DIR* d = ::opendir(keydir.c_str());
    while (auto* e = ::readdir(d)) {
      versions += std::string(e->d_name).rfind("v-", 0) == 0;
      tmps += std::string(e->d_name).rfind("tmp-", 0) == 0;
    }
    ::closedir(d);
    EXPECT_EQ(versions, 1);
    EXPECT_EQ(tmps, 0);
  }
}

// Node 0 dies while node 1 relays to 3 and 4: node 1 and 2 read the
// source; 3 and 4 ask node 1 again and get its copy, reading nothing.
TEST_F(PeerFanOut, ABrokenRelayIsRetriedFromTheRelayingNode) {
  auto& nodes = Nodes(5, "950");
  const uint64_t bytes = bytes_;
  RunWithDyingParent(1);  // 3 and 4 join node 1's relay first
  for (size_t i = 1; i < nodes.size(); ++i) ExpectGoodCopy(i);
  EXPECT_TRUE(nodes[1]->rep.fell_back);
  EXPECT_TRUE(nodes[2]->rep.fell_back);
  EXPECT_EQ(nodes[1]->fs.read.load(), bytes);
  for (size_t i : {3, 4}) {
    EXPECT_FALSE(nodes[i]->rep.fell_back) << "node " << i << ": " << nodes[i]->rep.fallback_reason;
    EXPECT_EQ(nodes[i]->fs.read.load(), 0u) << "node " << i;
    EXPECT_EQ(nodes[i]->rep.peer_bytes, bytes) << "node " << i;
  }
  EXPECT_EQ(nodes[1]->rep.served, 2u);
  EXPECT_EQ(nodes[1]->rep.relayed, 0u);  // the relay broke; both got the published copy
}

// A parent that can't listen (its port taken, say by another job's
// prolog) is not a failure: it stages, and its child reads the source.
TEST_F(PeerFanOut, AParentThatCannotServeStillStagesAndItsChildFallsBack) {
  auto& nodes = Nodes(2, "930");
  // Node 0 must bind its own port, which a stranger holds: that stranger
  // accepts nothing for this job.
  ::close(nodes[0]->lfd);
  uint16_t taken = 0;
  int stranger = Listen(&taken);
  ASSERT_GE(stranger, 0);
  for (auto& n : nodes) n->peer.nodes[0].port = taken;
  nodes[0]->lfd = -1;
  nodes[0]->peer.listen_fd = -1;
  nodes[1]->peer.wait_parent = 1;
  RunAll(nodes, src_);
  ::close(stranger);
  ASSERT_TRUE(nodes[0]->status.ok()) << nodes[0]->status.message();
  EXPECT_FALSE(nodes[0]->rep.serve_error.empty());
  ExpectGoodCopy(1);
  EXPECT_TRUE(nodes[1]->rep.fell_back);
  EXPECT_EQ(nodes[1]->fs.read.load(), bytes_);
}

// A source that keeps node 0 busy: the first read waits `delay_s` (a
// parallel filesystem's slow open, a big first file), then reads.
class SlowFirstReadFs : public CountingStageFs {
 public:
  explicit SlowFirstReadFs(unsigned delay_s) : delay_s_(delay_s) {}
  ssize_t Pread(int fd, void* buf, size_t n, off_t off) override {
    Hold();
    return CountingStageFs::Pread(fd, buf, n, off);
  }
  ssize_t CopyFileRange(int in, off_t* in_off, int out, size_t n) override {
    Hold();
    return CountingStageFs::CopyFileRange(in, in_off, out, n);
  }

 private:
  void Hold() { std::call_once(once_, [this] { ::sleep(delay_s_); }); }
  unsigned delay_s_;
  std::once_flag once_;
};

// Node 0 takes longer to read the source than its children's wait_parent:
// it beats while it stages, so they wait for it (and node 1's relay beats
// to 3 and 4 while node 1 itself waits) and nobody reads the source twice.
TEST_F(PeerFanOut, AParentStillStagingIsWaitedForPastWaitParent) {
  auto& nodes = Nodes(5, "960");
  // 5 s of staging against a 2 s wait_parent: the children must outwait
  // their own bound, with 8 beats of slack for a loaded machine.
  SlowFirstReadFs slow(5);
  nodes[0]->cache.fs = &slow;
  for (size_t i = 1; i < nodes.size(); ++i) nodes[i]->peer.wait_parent = 2;
  RunAll(nodes, src_);
  for (size_t i = 0; i < nodes.size(); ++i) ExpectGoodCopy(i);
  EXPECT_EQ(slow.read.load(), bytes_);
  for (size_t i = 1; i < nodes.size(); ++i) {
    EXPECT_FALSE(nodes[i]->rep.fell_back) << "node " << i << ": " << nodes[i]->rep.fallback_reason;
    EXPECT_EQ(nodes[i]->fs.read.load(), 0u) << "node " << i;
    EXPECT_EQ(nodes[i]->rep.peer_bytes, bytes_) << "node " << i;
  }
  EXPECT_EQ(nodes[0]->rep.served, 2u);
  EXPECT_EQ(nodes[1]->rep.served, 2u);
}

// A parent whose link still carries the connect and the hello but nothing
// after (a cut cable with a little buffer, a down-trained NIC: the system
// test's `cluster.sh cut`) is emulated here by a fake parent that accepts
// the hello and then holds the connection open in silence. The child reads
// the source after wait_parent; before the beats it waited for the
// parent's first byte until stage_timeout, past the batch launch.
TEST_F(PeerFanOut, AParentSilentAfterTheHelloIsLeftAfterWaitParent) {
  auto& nodes = Nodes(2, "970");
  int lfd = nodes[0]->lfd;
  std::atomic<bool> hello_seen{false};
  std::string key = StageCacheKey(src_);
  const PeerOptions& parent = nodes[0]->peer;
  std::thread fake([&] {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    // A parent that proves itself (protocol 3, stage_peer_hello.h) and
    // takes the child's "need", then falls silent.
    auto frame = [&](std::string* s) {
      uint32_t n = 0;
      if (::recv(fd, &n, sizeof n, MSG_WAITALL) != sizeof n || n > 65536) return false;
      s->resize(n);
      return ::recv(fd, s->data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
    };
    auto send_frame = [&](const std::string& s) {
      uint32_t n = static_cast<uint32_t>(s.size());
      return ::send(fd, &n, sizeof n, MSG_NOSIGNAL) == sizeof n &&
             ::send(fd, s.data(), n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
    };
    char magic[8], need = 0, sink[256];
    std::string index, nonce, cred, pnonce = PeerNonce();
    bool ok = ::recv(fd, magic, sizeof magic, MSG_WAITALL) == sizeof magic && frame(&index) && frame(&nonce);
    auto mine = EncodePeerCredential(munged_->socket(), ParentPayload(MakePeerLink(parent, key, 0, 1), nonce));
    ok = ok && mine.ok() && ::send(fd, "P", 1, MSG_NOSIGNAL) == 1 && send_frame(*mine) && send_frame(pnonce) &&
         frame(&cred) && ::send(fd, "A", 1, MSG_NOSIGNAL) == 1 && ::recv(fd, &need, 1, MSG_WAITALL) == 1 && need == 'N';
    hello_seen = ok;
    while (::recv(fd, sink, sizeof sink, 0) > 0) {}  // silent until the child hangs up
    ::close(fd);
  });
  Node& c = *nodes[1];
  c.peer.wait_parent = 1;
  c.cache.deadline = MonotonicSeconds() + 60;  // stage_timeout
  c.status = StageWithPeers(c.cache, src_, {}, c.peer, &c.out, &c.side, &c.rep);
  fake.join();
  EXPECT_TRUE(hello_seen.load());
  ExpectGoodCopy(1);
  EXPECT_TRUE(c.rep.fell_back);
  EXPECT_NE(c.rep.fallback_reason.find("waiting for its stream"), std::string::npos) << c.rep.fallback_reason;
  EXPECT_EQ(c.fs.read.load(), bytes_);
}

}  // namespace
}  // namespace preflight
