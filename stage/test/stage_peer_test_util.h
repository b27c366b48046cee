// The peer fan-out tests' emulated nodes (stage_peer_test.cc,
// stage_peer_auth_test.cc): one process, a separate cache folder per node,
// real TCP on 127.0.0.1, real munge credentials from a private munged (its
// own key and socket).
#pragma once

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

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_peer.h"
#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

namespace preflight::peer_test {


// The shared scratch directory (preflight_test/temp_dir.h), readable by nobody.
struct TempDir : preflight_test::TempDir {
  TempDir() : preflight_test::TempDir("stage_peer", 0755) {}
};

using preflight_test::Blob;
using preflight_test::kNoNobody;
using preflight_test::NobodyReader;
using preflight_test::Write;

inline uint64_t MakeDataset(const std::string& root) {
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
inline bool SameTree(const std::string& a, const std::string& b, std::string* why) {
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

inline bool CanRunMunged() {
  return ::geteuid() == 0 && (::access("/usr/sbin/munged", X_OK) == 0 || ::access("/usr/bin/munged", X_OK) == 0);
}

inline int Listen(uint16_t* port) {
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
inline std::vector<std::unique_ptr<Node>> MakeNodes(const std::string& root, size_t n, const std::string& job,
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

inline void RunAll(std::vector<std::unique_ptr<Node>>& nodes, const std::string& src, size_t from = 0) {
  std::vector<std::thread> ts;
  for (size_t i = from; i < nodes.size(); ++i)
    ts.emplace_back([&, i] {
      Node& n = *nodes[i];
      n.status = StageWithPeers(n.cache, src, {}, n.peer, &n.out, &n.side, &n.rep);
    });
  for (auto& t : ts) t.join();
}

inline void CloseAll(std::vector<std::unique_ptr<Node>>& nodes) {
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
}  // namespace preflight::peer_test
