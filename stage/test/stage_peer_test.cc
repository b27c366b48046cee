// Peer fan-out (stage_peer.h) on emulated nodes: one process, a separate
// cache folder per node, real TCP on 127.0.0.1, real munge credentials from
// a private munged (its own key and socket), a real SIGKILL of a parent.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_peer.h"

namespace preflight {
namespace {

// The shared scratch directory (preflight_test/temp_dir.h), readable by nobody.
struct TempDir : preflight_test::TempDir {
  TempDir() : preflight_test::TempDir("stage_peer", 0755) {}
};

using preflight_test::Blob;
using preflight_test::kNoNobody;
using preflight_test::NobodyReader;
using preflight_test::Write;

uint64_t MakeDataset(const std::string& root) {
  MakeDirs(root + "/a/b");
  uint64_t bytes = 0;
  for (int i = 0; i < 40; ++i) {
    Write(root + "/a/f" + std::to_string(i), Blob(8192 + i, static_cast<char>(i)));
    bytes += 8192 + i;
  }
  Write(root + "/a/b/big", Blob(3 << 20, 'x'));
  bytes += 3 << 20;
  Write(root + "/run.sh", "#!/bin/sh\n", 0755);
  bytes += 10;
  Write(root + "/empty", "");
  EXPECT_EQ(::symlink("a/f1", (root + "/link").c_str()), 0);
  return bytes;
}

// Byte-for-byte, type and link target, both ways.
bool SameTree(const std::string& a, const std::string& b, std::string* why) {
  struct stat sa, sb;
  if (::lstat(a.c_str(), &sa) != 0 || ::lstat(b.c_str(), &sb) != 0) { *why = "missing " + b; return false; }
  if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) { *why = "type of " + b; return false; }
  if (S_ISREG(sa.st_mode)) {
    auto ta = ReadWholeFile(a), tb = ReadWholeFile(b);
    if (!ta || !tb || *ta != *tb) { *why = "content of " + b; return false; }
    if (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec) { *why = "mtime of " + b; return false; }
    return true;
  }
  if (S_ISLNK(sa.st_mode)) {
    char x[4096], y[4096];
    ssize_t n = ::readlink(a.c_str(), x, sizeof x), m = ::readlink(b.c_str(), y, sizeof y);
    if (n != m || std::string(x, n) != std::string(y, m)) { *why = "link " + b; return false; }
    return true;
  }
  std::vector<std::string> na, nb;
  for (auto* v : {&na, &nb}) {
    DIR* d = ::opendir((v == &na ? a : b).c_str());
    if (!d) { *why = "open " + b; return false; }
    while (auto* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") v->push_back(e->d_name);
    ::closedir(d);
    std::sort(v->begin(), v->end());
  }
  if (na != nb) { *why = "entries of " + b; return false; }
  for (const auto& n : na)
    if (!SameTree(a + "/" + n, b + "/" + n, why)) return false;
  return true;
}

using CountingFs = CountingStageFs;  // stage_copy.h

// A private munged, as tests/harness/cluster.sh starts one.
class Munged {
 public:
  explicit Munged(const std::string& dir, char key_seed = 'k') : dir_(dir) {
    MakeDirs(dir_);
    ::chmod(dir_.c_str(), 0755);
    Write(dir_ + "/munge.key", Blob(1024, key_seed), 0400);
    std::string cmd = "munged --force --socket=" + socket() + " --key-file=" + dir_ + "/munge.key --pid-file=" + dir_ +
                      "/munged.pid --log-file=" + dir_ + "/munged.log --seed-file=" + dir_ + "/munged.seed";
    ok_ = std::system(cmd.c_str()) == 0;
    for (int i = 0; ok_ && i < 100 && ::access(socket().c_str(), F_OK) != 0; ++i) ::usleep(50000);
    ok_ = ok_ && ::access(socket().c_str(), F_OK) == 0;
  }
  ~Munged() {
    auto pid = ReadWholeFile(dir_ + "/munged.pid");
    if (pid) ::kill(std::atoi(pid->c_str()), SIGTERM);
    for (int i = 0; pid && i < 100 && ::kill(std::atoi(pid->c_str()), 0) == 0; ++i) ::usleep(20000);
  }
  bool ok() const { return ok_; }
  std::string socket() const { return dir_ + "/munge.sock"; }

 private:
  std::string dir_;
  bool ok_ = false;
};

bool CanRunMunged() {
  return ::geteuid() == 0 && (::access("/usr/sbin/munged", X_OK) == 0 || ::access("/usr/bin/munged", X_OK) == 0);
}

int Listen(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

struct Node {
  StageCacheOptions cache;
  PeerOptions peer;
  CountingFs fs;
  StagedDataset out;
  FaultSide side = FaultSide::kNone;
  PeerReport rep;
  Status status;
  int lfd = -1;
};

// n emulated nodes, each with its own cache folder and listening socket.
std::vector<std::unique_ptr<Node>> MakeNodes(const std::string& root, size_t n, const std::string& job,
                                             const std::string& munge) {
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<PeerEndpoint> eps;
  for (size_t i = 0; i < n; ++i) {
    auto nd = std::make_unique<Node>();
    uint16_t port = 0;
    nd->lfd = Listen(&port);
    eps.push_back({"127.0.0.1", port});
    nd->cache.dir = root + "/node" + std::to_string(i) + "/cache";
    nd->cache.workers = 2;
    nd->cache.fs = &nd->fs;
    nodes.push_back(std::move(nd));
  }
  for (size_t i = 0; i < n; ++i) {
    PeerOptions& p = nodes[i]->peer;
    p.job_id = job;
    p.nodes = eps;
    p.self = i;
    p.fanout = 2;
    p.wait_parent = 5;
    p.wait_children = 5;
    p.munge_socket = munge;
    p.listen_fd = nodes[i]->lfd;
  }
  return nodes;
}

void RunAll(std::vector<std::unique_ptr<Node>>& nodes, const std::string& src, size_t from = 0) {
  std::vector<std::thread> ts;
  for (size_t i = from; i < nodes.size(); ++i)
    ts.emplace_back([&, i] {
      Node& n = *nodes[i];
      n.status = StageWithPeers(n.cache, src, {}, n.peer, &n.out, &n.side, &n.rep);
    });
  for (auto& t : ts) t.join();
}

void CloseAll(std::vector<std::unique_ptr<Node>>& nodes) {
  for (auto& n : nodes)
    if (n->lfd >= 0) ::close(n->lfd);
}

// Every fan-out test: root and munged, a private munged, the dataset,
// `nodes` made by Nodes(), and their sockets closed at the end.
class PeerFanOut : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanRunMunged()) GTEST_SKIP() << "skipped: needs root and munged";
    munged_ = std::make_unique<Munged>(t_.path() + "/munge");
    ASSERT_TRUE(munged_->ok()) << "munged did not start";
    src_ = t_.path() + "/src";
    bytes_ = MakeDataset(src_);
  }
  void TearDown() override { CloseAll(nodes_); }
  std::vector<std::unique_ptr<Node>>& Nodes(size_t n, const std::string& job) {
    nodes_ = MakeNodes(t_.path(), n, job, munged_->socket());
    return nodes_;
  }
  // Node `i` staged without error and holds the source byte for byte.
  void ExpectGoodCopy(size_t i) {
    Node& n = *nodes_[i];
    ASSERT_TRUE(n.status.ok()) << "node " << i << ": " << n.status.message();
    std::string why;
    EXPECT_TRUE(SameTree(src_, n.out.data_path, &why)) << "node " << i << ": " << why;
  }
  // Node 0 in its own process, SIGKILLed by its test hook once it has
  // streamed 64 KiB; it starts after `delay_s`. The others run here.
  void RunWithDyingParent(unsigned delay_s) {
    nodes_[0]->peer.test_drop_after = 64 << 10;
    nodes_[0]->peer.test_die = true;
    pid_t pid = ::fork();
    if (pid == 0) {
      if (delay_s) ::sleep(delay_s);
      Node& n = *nodes_[0];
      n.status = StageWithPeers(n.cache, src_, {}, n.peer, &n.out, &n.side, &n.rep);
      ::_exit(3);  // not reached when the hook fired
    }
    ::close(nodes_[0]->lfd);
    nodes_[0]->lfd = -1;
    RunAll(nodes_, src_, 1);
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "node 0 was not killed mid-stream";
  }

  TempDir t_;
  std::unique_ptr<Munged> munged_;
  std::string src_;
  uint64_t bytes_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;
};

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

TEST(PeerCredential, OnlyRootCredentialsForThisJobAreAccepted) {
  if (!CanRunMunged()) GTEST_SKIP() << "skipped: needs root and munged";
  TempDir t;
  Munged m(t.path() + "/munge");
  ASSERT_TRUE(m.ok()) << "munged did not start";
  std::string payload = PeerPayload("77", "00112233aabbccdd");
  auto cred = EncodePeerCredential(m.socket(), payload);
  ASSERT_TRUE(cred.ok()) << cred.status().message();
  EXPECT_TRUE(VerifyPeerCredential(m.socket(), *cred, payload).ok());
  // The same credential again: munged refuses replays.
  EXPECT_EQ(VerifyPeerCredential(m.socket(), *cred, payload).code(), Status::Code::kPermission);
  // Another job's credential.
  auto other = EncodePeerCredential(m.socket(), PeerPayload("78", "00112233aabbccdd"));
  ASSERT_TRUE(other.ok());
  Status s = VerifyPeerCredential(m.socket(), *other, payload);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("not this job"), std::string::npos) << s.message();
  // Not a credential at all.
  EXPECT_EQ(VerifyPeerCredential(m.socket(), "MUNGE:forged:", payload).code(), Status::Code::kPermission);
  // A user's genuine credential, with the right payload: not a prolog.
  StageIdentity who;
  ASSERT_TRUE(NobodyReader(&who));
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string err;
    if (!DropToStageUser(who, &err)) ::_exit(2);
    auto c = EncodePeerCredential(m.socket(), payload);
    if (c.ok()) { ssize_t w = ::write(p[1], c->data(), c->size()); (void)w; }
    ::_exit(c.ok() ? 0 : 1);
  }
  ::close(p[1]);
  std::string user_cred;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) user_cred.append(buf, n);
  ::close(p[0]);
  int st;
  ::waitpid(pid, &st, 0);
  ASSERT_FALSE(user_cred.empty());
  s = VerifyPeerCredential(m.socket(), user_cred, payload);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("uid " + std::to_string(who.uid)), std::string::npos) << s.message();
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

TEST_F(PeerFanOut, ForgedPeersGetNoDataAndTheRealChildDoes) {
  auto& nodes = Nodes(2, "920");
  const std::string& src = src_;
  const uint64_t bytes = bytes_;
  Munged& m = *munged_;
  std::thread parent([&] {
    Node& n = *nodes[0];
    n.status = StageWithPeers(n.cache, src, {}, n.peer, &n.out, &n.side, &n.rep);
  });
  PeerEndpoint ep = nodes[1]->peer.nodes[0];
  std::string key = StageCacheKey(src);
  EXPECT_FALSE(PeerHelloAccepted(ep, "MUNGE:not-a-credential:", 5));
  auto other_job = EncodePeerCredential(m.socket(), PeerPayload("921", key));
  ASSERT_TRUE(other_job.ok());
  EXPECT_FALSE(PeerHelloAccepted(ep, *other_job, 5));
  // A credential from another munge key (another cluster) is refused too.
  Munged foreign(t_.path() + "/munge2", 'q');
  ASSERT_TRUE(foreign.ok());
  auto alien = EncodePeerCredential(foreign.socket(), PeerPayload("920", key));
  ASSERT_TRUE(alien.ok());
  EXPECT_FALSE(PeerHelloAccepted(ep, *alien, 5));
  // The genuine child.
  Node& c = *nodes[1];
  c.status = StageWithPeers(c.cache, src, {}, c.peer, &c.out, &c.side, &c.rep);
  parent.join();
  ASSERT_TRUE(nodes[0]->status.ok()) << nodes[0]->status.message();
  ExpectGoodCopy(1);
  EXPECT_EQ(nodes[0]->rep.refused, 3u);
  EXPECT_EQ(nodes[0]->rep.served, 1u);
  EXPECT_EQ(nodes[0]->rep.served_bytes, bytes);  // nothing went to the forged peers
  EXPECT_EQ(c.rep.peer_bytes, bytes);
  EXPECT_EQ(c.fs.read.load(), 0u);
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
  std::thread fake([&] {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    char magic[8], need = 0, sink[256];
    uint32_t n = 0;
    std::string cred;
    bool ok = ::recv(fd, magic, sizeof magic, MSG_WAITALL) == sizeof magic &&
              ::recv(fd, &n, sizeof n, MSG_WAITALL) == sizeof n && n < 65536;
    cred.resize(n);
    ok = ok && ::recv(fd, cred.data(), n, MSG_WAITALL) == static_cast<ssize_t>(n) && ::send(fd, "A", 1, MSG_NOSIGNAL) == 1 &&
         ::recv(fd, &need, 1, MSG_WAITALL) == 1 && need == 'N';
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
