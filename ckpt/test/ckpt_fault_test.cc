// Kills and failures at every named point of the protocol (ckpt_fault.h):
// afterwards nothing on the tier may look complete without verifying, and
// the next attempt completes the checkpoint.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>

#include "ckpt_test_util.h"
#include "preflight/ckpt_persist.h"
#include "preflight/ckpt_resume.h"
#include "preflight/ckpt_retention.h"
#include "preflight/ckpt_tier.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::Exists;
using preflight_test::Read;

constexpr int kKilled = 42;
const std::vector<std::string> kNodes{"n1", "n2", "n3"};

class CkptFaultTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt-fault"};
  std::string tier_ = tmp_ / "tier";
  std::map<std::string, std::string> expect_;  // the whole checkpoint, as the tier must hold it

  void SetUp() override {
    std::filesystem::create_directories(tier_);
    for (const auto& n : kNodes) {
      std::map<std::string, std::string> files{{"rank-" + n + "-a.pt", std::string(300000, n.back())},
                                               {"rank-" + n + "-b.pt", "b of " + n},
                                               {"opt/" + n + ".pt", "opt of " + n},
                                               {"shared.json", "{}"}};
      preflight_test::MakeCkpt(Local(n), "step_10", files);
      for (const auto& [k, v] : files) expect_[k] = v;
    }
    expect_["COMPLETE"] = "";
  }
  std::string Local(const std::string& n) { return tmp_ / ("local-" + n); }
  CkptPersistRequest Req(const std::string& n, const std::string& run = "9.0") {
    CkptPersistRequest r;
    r.local_dir = Local(n);
    r.name = "step_10";
    r.tier = tier_;
    r.run = run;
    r.node = n;
    r.nodes = kNodes;
    r.complete_time = 1700000000;
    return r;
  }
  Expected<CkptPersistResult> Persist(const std::string& n, CkptFaultHook hook = nullptr) {
    CkptPersistOptions o;
    o.threads = 2;
    o.fault = std::move(hook);
    return PersistCkpt(Req(n), o);
  }
  // Runs node n's persist in a child killed at `at` (the n-th file for kPartFileDone).
  int KillAt(const std::string& n, CkptFaultPoint at, uint64_t file = 0) {
    return preflight_test::InChild([&] {
      auto r = Persist(n, [&](CkptFaultPoint p, uint64_t k) {
        if (p == at && (at != CkptFaultPoint::kPartFileDone || k == file)) ::_exit(kKilled);
        return 0;
      });
      return r.ok() ? 0 : 1;
    });
  }
  // The invariant: whatever carries the marker verifies in full and holds
  // exactly the checkpoint; resume offers nothing else.
  void ExpectNothingTorn(const std::string& when) {
    SCOPED_TRACE(when);
    CkptVerifyOptions full;
    full.level = CkptVerify::kFull;
    auto entries = ListCkptTier(tier_);
    ASSERT_TRUE(entries.ok());
    for (const auto& e : *entries) {
      if (e.kind != CkptTierKind::kMarked) continue;
      auto m = CheckCkptDurable(tier_, e.name, full);
      ASSERT_TRUE(m.ok()) << "marked but does not verify: " << m.status().ToString();
    }
    CkptResumeInputs in;
    in.tier = tier_;
    in.verify = full;
    auto choice = ChooseCkptResume(in);
    ASSERT_TRUE(choice.ok());
    if (choice->found) ExpectComplete();
  }
  void ExpectComplete() {
    CkptVerifyOptions full;
    full.level = CkptVerify::kFull;
    auto m = CheckCkptDurable(tier_, "step_10", full);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->Files(), expect_.size());
    for (const auto& [k, v] : expect_) EXPECT_EQ(Read(tier_ + "/step_10/" + k), v) << k;
  }
};

struct KillCase {
  CkptFaultPoint at;
  uint64_t file;
  const char* name;
};

class CkptKillTest : public CkptFaultTest, public ::testing::WithParamInterface<KillCase> {};

// The last node's persist copies its part and commits: killed at each
// point, then run again.
TEST_P(CkptKillTest, CommitterKilledThenRunAgain) {
  const KillCase& c = GetParam();
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(KillAt("n3", c.at, c.file), kKilled) << "the point was never reached";
  ExpectNothingTorn(std::string("after a kill at ") + c.name);
  bool renamed = c.at == CkptFaultPoint::kCommitRenamed || c.at == CkptFaultPoint::kCommitMarked;
  EXPECT_EQ(Exists(tier_ + "/step_10"), renamed);
  if (c.at == CkptFaultPoint::kCommitRenamed) {
    auto d = CheckCkptDurable(tier_, "step_10", CkptVerifyOptions{});
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("no .preflight-durable"), std::string::npos);
  }
  auto again = Persist("n3");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->state, CkptCommitState::kDurable);
  ExpectComplete();
  auto names = ListCkptTier(tier_);
  ASSERT_EQ(names->size(), 1u) << "a partial folder or trash left behind";
  // A node that was waiting finds it durable.
  auto first = Persist("n1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->state, CkptCommitState::kDurable);
}

INSTANTIATE_TEST_SUITE_P(
    EveryPoint, CkptKillTest,
    ::testing::Values(KillCase{CkptFaultPoint::kPartFileDone, 1, "file1"},
                      KillCase{CkptFaultPoint::kPartFileDone, 3, "file3"},
                      KillCase{CkptFaultPoint::kPartFileDone, 4, "file4"},
                      KillCase{CkptFaultPoint::kPartDataSynced, 0, "data_synced"},
                      KillCase{CkptFaultPoint::kPartManifestDone, 0, "part_manifest"},
                      KillCase{CkptFaultPoint::kCommitVerified, 0, "verified"},
                      KillCase{CkptFaultPoint::kCommitManifestDone, 0, "combined_manifest"},
                      KillCase{CkptFaultPoint::kCommitRenamed, 0, "renamed"},
                      KillCase{CkptFaultPoint::kCommitMarked, 0, "marked"}),
    [](const ::testing::TestParamInfo<KillCase>& i) { return std::string(i.param.name); });

TEST_F(CkptFaultTest, ANodeKilledMidCopyBlocksTheCommitUntilItCopiesAgain) {
  ASSERT_EQ(KillAt("n1", CkptFaultPoint::kPartFileDone, 2), kKilled);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  auto c = Persist("n3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state, CkptCommitState::kWaiting);
  EXPECT_EQ(c->missing, (std::vector<std::string>{"n1"}));
  ExpectNothingTorn("n1 dead, n2 and n3 done");
  auto a = Persist("n1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->state, CkptCommitState::kDurable);
  EXPECT_TRUE(a->committed_here);
  ExpectComplete();
}

TEST_F(CkptFaultTest, AFullOrFailingTierFailsTheStepAndTheNextAttemptCompletes) {
  auto full = Persist("n1", [](CkptFaultPoint p, uint64_t n) { return p == CkptFaultPoint::kPartFileDone && n == 2 ? ENOSPC : 0; });
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().sys_errno(), ENOSPC);
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  auto eio = Persist("n3", [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kCommitManifestDone ? EIO : 0; });
  ASSERT_FALSE(eio.ok());
  EXPECT_EQ(eio.status().sys_errno(), EIO);
  ExpectNothingTorn("EIO before the rename");
  EXPECT_FALSE(Exists(tier_ + "/step_10"));
  ASSERT_EQ(Persist("n3")->state, CkptCommitState::kDurable);
  ExpectComplete();
}

TEST_F(CkptFaultTest, GcRepairsARenameWithoutItsMarker) {
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  auto r = Persist("n3", [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kCommitRenamed ? EIO : 0; });
  ASSERT_FALSE(r.ok());
  CkptResumeInputs in;
  in.tier = tier_;
  auto before = ChooseCkptResume(in);
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->found);
  ASSERT_EQ(before->passed_over.size(), 1u);
  EXPECT_NE(before->passed_over[0].why.find("torn: committed but not marked"), std::string::npos);
  auto gc = CkptTierGc(tier_, CkptTierGcOptions{});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->repaired, (std::vector<std::string>{"step_10"}));
  ExpectComplete();
}

TEST_F(CkptFaultTest, GcNeverMarksARenamedFolderThatDoesNotVerify) {
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  ASSERT_FALSE(Persist("n3", [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kCommitRenamed ? EIO : 0; }).ok());
  ASSERT_EQ(::truncate((tier_ + "/step_10/rank-n2-a.pt").c_str(), 10), 0);
  auto gc = CkptTierGc(tier_, CkptTierGcOptions{});
  ASSERT_TRUE(gc.ok());
  EXPECT_TRUE(gc->repaired.empty());
  ASSERT_EQ(gc->notes.size(), 1u);
  EXPECT_NE(gc->notes[0].find("rank-n2-a.pt: size 10"), std::string::npos) << gc->notes[0];
  EXPECT_FALSE(Exists(tier_ + "/step_10/" + kCkptDurableMarker));
  ExpectNothingTorn("a damaged renamed folder");
  auto again = Persist("n3");
  ASSERT_FALSE(again.ok()) << "a damaged copy is never marked";
  EXPECT_EQ(again.status().code(), Status::Code::kFailed);
}

TEST_F(CkptFaultTest, ConcurrentCommittersBothSucceedAndOneRenames) {
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  // n3's part arrives but its commit fails: every part is there, nobody committed.
  ASSERT_FALSE(Persist("n3", [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kPartManifestDone ? EIO : 0; }).ok());
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    CkptCommitOptions o;
    o.fault = [&](CkptFaultPoint p, uint64_t) {
      if (p == CkptFaultPoint::kCommitManifestDone) {  // verified, about to rename: wait
        char c = 'r';
        if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(3);
      }
      return 0;
    };
    auto r = CommitCkpt(tier_, "9.0", "step_10", o);
    ::_exit(r.ok() && r->state == CkptCommitState::kDurable && !r->committed_here ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto mine = CommitCkpt(tier_, "9.0", "step_10", CkptCommitOptions{});
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_TRUE(mine->committed_here);
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "the slower committer did not find the checkpoint durable";
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  ExpectComplete();
}

TEST_F(CkptFaultTest, ADeadRunsPartialIsRemovedOnlyWhenSaidDeadAndACompleteOneIsCommitted) {
  ASSERT_EQ(KillAt("n1", CkptFaultPoint::kPartFileDone, 1), kKilled);
  std::vector<std::string> asked;
  CkptTierGcOptions alive;
  alive.run_dead = [&](const std::string& run) {
    asked.push_back(run);
    return false;
  };
  auto g1 = CkptTierGc(tier_, CkptTierGcOptions{});
  ASSERT_TRUE(g1.ok());
  auto g2 = CkptTierGc(tier_, alive);
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(asked, (std::vector<std::string>{"9.0"}));
  EXPECT_TRUE(Exists(tier_ + "/.partial-9.0-step_10"));
  ASSERT_EQ(g2->notes.size(), 1u);
  EXPECT_NE(g2->notes[0].find("left alone"), std::string::npos);
  CkptTierGcOptions dead;
  dead.run_dead = [](const std::string& run) { return run == "9.0"; };
  auto g3 = CkptTierGc(tier_, dead);
  ASSERT_TRUE(g3.ok());
  EXPECT_EQ(g3->stale, (std::vector<std::string>{".partial-9.0-step_10"}));
  EXPECT_TRUE(ListCkptTier(tier_)->empty()) << "nothing left past gc";

  // A run whose parts all arrived but never committed: gc commits it
  // (after verifying it), even when the run is dead.
  ASSERT_EQ(Persist("n1")->state, CkptCommitState::kWaiting);
  ASSERT_EQ(Persist("n2")->state, CkptCommitState::kWaiting);
  ASSERT_FALSE(Persist("n3", [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kPartManifestDone ? EIO : 0; }).ok());
  auto g4 = CkptTierGc(tier_, dead);
  ASSERT_TRUE(g4.ok());
  EXPECT_EQ(g4->committed, (std::vector<std::string>{".partial-9.0-step_10"}));
  ExpectComplete();
}

}  // namespace
}  // namespace preflight
