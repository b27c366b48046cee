#include "preflight/ckpt_persist.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt_test_util.h"
#include "preflight/ckpt_tier.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

namespace fs = std::filesystem;
using preflight_test::Exists;
using preflight_test::MakeCkpt;
using preflight_test::Read;
using preflight_test::Write;

class CkptPersistTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt-persist"};
  std::string tier_ = tmp_ / "tier";
  void SetUp() override { fs::create_directories(tier_); }
  std::string Local(const std::string& node) { return tmp_ / ("local-" + node); }

  CkptPersistRequest Req(const std::string& node, const std::vector<std::string>& nodes,
                         const std::string& name = "step_10", const std::string& run = "77.0") {
    CkptPersistRequest r;
    r.local_dir = Local(node);
    r.name = name;
    r.tier = tier_;
    r.run = run;
    r.node = node;
    r.nodes = nodes;
    r.complete_time = 1700000000;
    return r;
  }
  std::vector<std::string> TierNames() {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(tier_)) v.push_back(e.path().filename());
    std::sort(v.begin(), v.end());
    return v;
  }
};

TEST_F(CkptPersistTest, OneNodeCopiesEverythingAndCommits) {
  std::string big(3u << 20, 'b');
  MakeCkpt(Local("n1"), "step_10",
           {{"model.pt", "weights"}, {"optim/state.pt", "adam"}, {"empty", ""}, {"big", big}, {"deep/a/b/c", "c"}});
  ASSERT_EQ(::symlink("optim/state.pt", (Local("n1") + "/step_10/latest-optim").c_str()), 0);
  ASSERT_EQ(::chmod((Local("n1") + "/step_10/model.pt").c_str(), 0600), 0);
  auto r = PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, CkptCommitState::kDurable);
  EXPECT_TRUE(r->copied);
  EXPECT_TRUE(r->committed_here);
  EXPECT_EQ(r->files, 5u);
  EXPECT_EQ(r->bytes, 7u + 4 + big.size() + 1);
  EXPECT_EQ(r->path, tier_ + "/step_10");
  EXPECT_EQ(TierNames(), (std::vector<std::string>{"step_10"})) << "no partial folder left";

  std::string d = tier_ + "/step_10";
  EXPECT_EQ(Read(d + "/model.pt"), "weights");
  EXPECT_EQ(Read(d + "/big"), big);
  EXPECT_EQ(Read(d + "/deep/a/b/c"), "c");
  EXPECT_EQ(fs::read_symlink(d + "/latest-optim"), "optim/state.pt");
  struct stat st;
  ASSERT_EQ(::stat((d + "/model.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The marker convention's file: written empty by the commit, not copied.
  EXPECT_EQ(Read(d + "/COMPLETE"), "");
  EXPECT_TRUE(Exists(d + "/" + kCkptDurableMarker));
  CkptVerifyOptions full;
  full.level = CkptVerify::kFull;
  auto m = CheckCkptDurable(tier_, "step_10", full);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->nodes, (std::vector<std::string>{"n1"}));
  EXPECT_EQ(m->Files(), 6u);
  EXPECT_DOUBLE_EQ(m->time, 1700000000);
  EXPECT_TRUE(LocalPartDurable(Local("n1"), "step_10", tier_, "n1", CkptConventionSpec{}, full).ok());

  // Again: nothing copied, still durable.
  auto again = PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->state, CkptCommitState::kDurable);
  EXPECT_FALSE(again->copied);
  EXPECT_FALSE(again->committed_here);

  // A file added locally afterwards is not durable.
  Write(Local("n1") + "/step_10/late.pt", "x");
  Status s = LocalPartDurable(Local("n1"), "step_10", tier_, "n1", CkptConventionSpec{}, full);
  EXPECT_EQ(s.code(), Status::Code::kFailed);
  EXPECT_NE(s.message().find("late.pt"), std::string::npos);
}

TEST_F(CkptPersistTest, ThreeNodesCommitOnceTheLastPartArrives) {
  for (const char* n : {"n1", "n2", "n3"})
    MakeCkpt(Local(n), "step_10", {{std::string("rank-") + n + ".pt", std::string("data of ") + n}, {"shared/config.json", "{}"}});
  std::vector<std::string> nodes{"n3", "n1", "n2"};  // any order
  auto a = PersistCkpt(Req("n1", nodes), CkptPersistOptions{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->state, CkptCommitState::kWaiting);
  EXPECT_EQ(a->missing, (std::vector<std::string>{"n2", "n3"}));
  EXPECT_FALSE(Exists(tier_ + "/step_10"));
  auto b = PersistCkpt(Req("n2", nodes), CkptPersistOptions{});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->missing, (std::vector<std::string>{"n3"}));
  auto c = PersistCkpt(Req("n3", nodes), CkptPersistOptions{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->state, CkptCommitState::kDurable);
  EXPECT_TRUE(c->committed_here);
  for (const char* n : {"n1", "n2", "n3"})
    EXPECT_EQ(Read(tier_ + "/step_10/rank-" + n + ".pt"), std::string("data of ") + n);
  EXPECT_EQ(Read(tier_ + "/step_10/shared/config.json"), "{}") << "byte-identical paths from several nodes are fine";
  auto m = CheckCkptDurable(tier_, "step_10", CkptVerifyOptions{});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  for (const char* n : {"n1", "n2", "n3"}) EXPECT_TRUE(Exists(tier_ + "/step_10/.preflight-parts/" + n));
  // The nodes that were waiting see it durable on their next attempt.
  auto a2 = PersistCkpt(Req("n1", nodes), CkptPersistOptions{});
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ(a2->state, CkptCommitState::kDurable);
  EXPECT_FALSE(a2->copied);
}

TEST_F(CkptPersistTest, TheCommitRemovesWhatNoManifestLists) {
  MakeCkpt(Local("n1"), "step_10", {{"a", "1"}});
  MakeCkpt(Local("n2"), "step_10", {{"b", "2"}});
  ASSERT_EQ(PersistCkpt(Req("n1", {"n1", "n2"}), CkptPersistOptions{})->state, CkptCommitState::kWaiting);
  // What dead attempts leave: a file since deleted locally, a half-written
  // part manifest.
  std::string partial = tier_ + "/.partial-77.0-step_10";
  Write(partial + "/old/junk", "x");
  Write(partial + "/.preflight-parts/.n2.tmp.1.0", "half");
  ASSERT_EQ(PersistCkpt(Req("n2", {"n1", "n2"}), CkptPersistOptions{})->state, CkptCommitState::kDurable);
  EXPECT_FALSE(Exists(tier_ + "/step_10/old"));
  EXPECT_FALSE(Exists(tier_ + "/step_10/.preflight-parts/.n2.tmp.1.0"));
  EXPECT_EQ(Read(tier_ + "/step_10/b"), "2");
}

TEST_F(CkptPersistTest, TwoNodesWithDifferentBytesAtOnePathIsAConflict) {
  MakeCkpt(Local("n1"), "step_10", {{"config.json", "{\"a\":1}"}});
  MakeCkpt(Local("n2"), "step_10", {{"config.json", "{\"a\":2}"}});
  ASSERT_TRUE(PersistCkpt(Req("n1", {"n1", "n2"}), CkptPersistOptions{}).ok());
  auto r = PersistCkpt(Req("n2", {"n1", "n2"}), CkptPersistOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailed);
  EXPECT_NE(r.status().message().find("n1 and n2 both hold config.json"), std::string::npos) << r.status().message();
  EXPECT_FALSE(Exists(tier_ + "/step_10"));
}

TEST_F(CkptPersistTest, RefusesWhatCouldLeadOutOfTheTreeBeforeWritingAnything) {
  struct Case {
    const char* what;
    std::function<void(const std::string&)> make;
    const char* needle;
  };
  std::vector<Case> cases = {
      {"absolute symlink", [](const std::string& d) { ASSERT_EQ(::symlink("/etc/passwd", (d + "/pw").c_str()), 0); }, "pw is a symlink to '/etc/passwd'"},
      {"dotdot symlink", [](const std::string& d) { ASSERT_EQ(::symlink("../../x", (d + "/up").c_str()), 0); }, "up is a symlink"},
      {"inner dotdot", [](const std::string& d) { ASSERT_EQ(::symlink("a/../../x", (d + "/in").c_str()), 0); }, "in is a symlink"},
      {"fifo", [](const std::string& d) { ASSERT_EQ(::mkfifo((d + "/pipe").c_str(), 0600), 0); }, "pipe is a FIFO"},
      {"reserved name", [](const std::string& d) { Write(d + "/.preflight-manifest", "x"); }, ".preflight-manifest is a name preflight reserves"},
  };
  for (const auto& c : cases) {
    fs::remove_all(Local("n1"));
    MakeCkpt(Local("n1"), "step_10", {{"ok.pt", "fine"}});
    c.make(Local("n1") + "/step_10");
    auto r = PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{});
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << c.what;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << c.what << ": " << r.status().message();
    EXPECT_TRUE(TierNames().empty()) << c.what << ": something was written to the tier";
  }
}

TEST_F(CkptPersistTest, BoundsHaveTheirOwnErrors) {
  std::string deep;
  for (size_t i = 0; i <= kCkptMaxDepth; ++i) deep += "d/";
  MakeCkpt(Local("n1"), "step_10", {{deep + "f", "x"}});
  auto r = PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kCkptMaxDepth"), std::string::npos) << r.status().message();
  EXPECT_TRUE(TierNames().empty());

  auto bad = Req("n1", {"n1"}, std::string(kCkptMaxNameBytes + 1, 's'));
  EXPECT_NE(PersistCkpt(bad, CkptPersistOptions{}).status().message().find("kCkptMaxNameBytes"), std::string::npos);
  auto stranger = Req("n9", {"n1"});
  EXPECT_EQ(PersistCkpt(stranger, CkptPersistOptions{}).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(CkptPersistTest, OnePersistPerNodeAtATime) {
  MakeCkpt(Local("n1"), "step_10", {{"a", "1"}});
  int fd = ::open((Local("n1") + "/" + kCkptPersistLock).c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  // flock locks belong to the open file description: a child's attempt
  // through its own open must fail while this one holds it.
  int rc = preflight_test::InChild([&] {
    auto r = PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{});
    return !r.ok() && r.status().code() == Status::Code::kUnavailable ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
  ::close(fd);
  EXPECT_TRUE(PersistCkpt(Req("n1", {"n1"}), CkptPersistOptions{}).ok());
}

TEST_F(CkptPersistTest, AFileChangingDuringTheCopyFailsIt) {
  MakeCkpt(Local("n1"), "step_10", {{"a", "1"}, {"b", "2"}});
  CkptPersistOptions o;
  o.threads = 1;  // a before b
  o.fault = [&](CkptFaultPoint p, uint64_t n) {
    if (p == CkptFaultPoint::kPartFileDone && n == 1) Write(Local("n1") + "/step_10/b", "grown");
    return 0;
  };
  auto r = PersistCkpt(Req("n1", {"n1"}), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailed);
  EXPECT_NE(r.status().message().find("step_10/b: changed"), std::string::npos) << r.status().message();
  EXPECT_FALSE(Exists(tier_ + "/step_10"));
}

TEST_F(CkptPersistTest, ANameAlreadyOnTheTierIsNeverReplaced) {
  MakeCkpt(Local("n1"), "step_10", {{"a", "same"}});
  ASSERT_TRUE(PersistCkpt(Req("n1", {"n1"}, "step_10", "1.0"), CkptPersistOptions{}).ok());
  // Another run with the same bytes: durable, nothing copied.
  auto same = PersistCkpt(Req("n1", {"n1"}, "step_10", "2.0"), CkptPersistOptions{});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->state, CkptCommitState::kDurable);
  EXPECT_FALSE(same->copied);
  // A run that saved other bytes under that name: a conflict, the tier's copy stays.
  Write(Local("n1") + "/step_10/a", "different");
  auto other = PersistCkpt(Req("n1", {"n1"}, "step_10", "3.0"), CkptPersistOptions{});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Status::Code::kFailed);
  EXPECT_EQ(Read(tier_ + "/step_10/a"), "same");
  EXPECT_TRUE(CheckCkptDurable(tier_, "step_10", CkptVerifyOptions{}).ok());
}

TEST_F(CkptPersistTest, ManyFilesWithManyInFlight) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 300; ++i) files["shard" + std::to_string(i % 20) + "/f" + std::to_string(i)] = std::to_string(i);
  MakeCkpt(Local("n1"), "step_10", files);
  CkptPersistOptions o;
  o.threads = 16;
  o.verify.level = CkptVerify::kFull;
  auto r = PersistCkpt(Req("n1", {"n1"}), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 300u);
  EXPECT_EQ(Read(tier_ + "/step_10/shard7/f287"), "287");
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

// Two nodes commit at once: node B has verified the partial folder when
// node A's commit renames it away; B must find NAME durable with its part
// and say durable, not failed. (The race seen on the cluster, "commit ...:
// .partial-.../COMPLETE: missing", was a committer removing and remaking
// the marker while another verified: WriteCommitMarkerFile now keeps one
// that is there.)
TEST(CkptPersistRace, TheNodeThatLosesTheRenameStillSaysDurable) {
  preflight_test::TempDir tmp("ckpt-race");
  std::string tier = tmp / "tier";
  std::filesystem::create_directories(tier);
  auto req = [&](const std::string& node) {
    CkptPersistRequest r;
    r.local_dir = tmp / ("local-" + node);
    r.name = "step_5";
    r.tier = tier;
    r.run = "9.0";
    r.node = node;
    r.nodes = {"a", "b"};
    r.complete_time = 1700000000;
    return r;
  };
  preflight_test::MakeCkpt(tmp / "local-a", "step_5", {{"ra.pt", "AAAA"}});
  preflight_test::MakeCkpt(tmp / "local-b", "step_5", {{"rb.pt", "BBBB"}});
  auto a = PersistCkpt(req("a"), CkptPersistOptions{});  // a's part arrives; waits for b
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->state, CkptCommitState::kWaiting);
  CkptPersistOptions ob;
  bool raced = false;
  ob.fault = [&](CkptFaultPoint p, uint64_t) {
    if (p == CkptFaultPoint::kCommitVerified && !raced) {
      raced = true;
      auto other = CommitCkpt(tier, "9.0", "step_5", CkptCommitOptions{});  // node a's commit wins the rename
      EXPECT_TRUE(other.ok() && other->state == CkptCommitState::kDurable);
    }
    return 0;
  };
  auto b = PersistCkpt(req("b"), ob);
  EXPECT_TRUE(raced);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->state, CkptCommitState::kDurable);
  EXPECT_TRUE(CheckCkptDurable(tier, "step_5", CkptVerifyOptions{}).ok());
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

// Two jobs of one chain write step_20 to one tier, same names, same sizes,
// other bytes (seen on the cluster: system.ckpt_faults_tier). The second
// run's part is not durable, whatever the tier's step_20 says, and the
// reason names the file; its local copy is therefore kept.
class CkptTwoRunsTest : public CkptPersistTest {};

TEST_F(CkptTwoRunsTest, AnotherRunsCheckpointOfTheSameNameIsNotThisOnesDurableCopy) {
  // Same header, other tensors at the end (as two runs' safetensors are).
  std::string a = std::string(100 << 10, 'h') + std::string(100 << 10, 'a');
  std::string b = std::string(100 << 10, 'h') + std::string(100 << 10, 'b');
  MakeCkpt(Local("n1"), "step_20", {{"model.safetensors", a}, {"meta.json", "{}"}});
  auto first = PersistCkpt(Req("n1", {"n1"}, "step_20", "7.0"), CkptPersistOptions{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->state, CkptCommitState::kDurable);

  MakeCkpt(Local("n2"), "step_20", {{"model.safetensors", b}, {"meta.json", "{}"}});
  CkptVerifyOptions sizes;
  Status s = LocalPartDurable(Local("n2"), "step_20", tier_, "n1", CkptConventionSpec{}, sizes);
  EXPECT_EQ(s.code(), Status::Code::kFailed);
  EXPECT_NE(s.message().find("model.safetensors holds other bytes than the local checkpoint's"), std::string::npos)
      << s.message();
  // The first run's own part still is.
  EXPECT_TRUE(LocalPartDurable(Local("n1"), "step_20", tier_, "n1", CkptConventionSpec{}, sizes).ok());
  // The second run's persist: the tier's step_20 stays the first run's, and this one is not durable.
  CkptPersistRequest r2 = Req("n1", {"n1"}, "step_20", "8.0");
  r2.local_dir = Local("n2");
  auto second = PersistCkpt(r2, CkptPersistOptions{});
  ASSERT_FALSE(second.ok() && second->state == CkptCommitState::kDurable) << "another run's step_20 taken as this one's";
  if (!second.ok()) {
    EXPECT_NE(second.status().message().find("other bytes"), std::string::npos) << second.status().message();
  }
  EXPECT_EQ(Read(tier_ + "/step_20/model.safetensors"), a);
}

}  // namespace
}  // namespace preflight
