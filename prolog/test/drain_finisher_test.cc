// The detached drain finisher (drain_finisher.h): its decision per look at
// the node, and its loop against a fake `preflight slurm nodes` (answers
// from a file the test rewrites) and a fake scontrol that logs its
// arguments; the real ones are exercised in tests/system/prolog_drain_test.sh.
#include "preflight/drain_finisher.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "preflight_test/temp_dir.h"
#include "node_state_fixture.h"

namespace preflight {
namespace {

using node_test::Node;

TEST(DrainFinisher, OnlySlurmsOwnFailureReasonIsReplaced) {
  NodeState prolog = Node(true, "Prolog error"), epilog = Node(true, "Epilog error");
  EXPECT_EQ(DecideFinish(&prolog, false, false), FinishAct::kSetReason);
  EXPECT_EQ(DecideFinish(&epilog, false, true), FinishAct::kSetReason);
  for (const char* r : {"admin: reseat GPU tray", "preflight[node] gpu.ecc GPU0: 3 > 0", "Not responding",
                        "Job env setup error", "prolog error", ""}) {
    NodeState n = Node(true, r);
    EXPECT_EQ(DecideFinish(&n, false, false), FinishAct::kLeave) << r;
    EXPECT_EQ(DecideFinish(&n, false, true), FinishAct::kLeave) << r << ": not even once the bound passed";
  }
}

TEST(DrainFinisher, WaitsThenDrainsOnlyWhenSlurmNeverDid) {
  NodeState idle = Node(false, "");
  EXPECT_EQ(DecideFinish(&idle, false, false), FinishAct::kWait);
  EXPECT_EQ(DecideFinish(nullptr, false, false), FinishAct::kWait) << "slurmctld not answering: ask again";
  EXPECT_EQ(DecideFinish(&idle, false, true), FinishAct::kDrain);
  EXPECT_EQ(DecideFinish(nullptr, false, true), FinishAct::kDrain);
}

TEST(DrainFinisher, ANewerClaimWinsOverEverything) {
  NodeState prolog = Node(true, "Prolog error"), idle = Node(false, "");
  EXPECT_EQ(DecideFinish(&prolog, true, false), FinishAct::kSuperseded);
  EXPECT_EQ(DecideFinish(&idle, true, true), FinishAct::kSuperseded) << "a superseded helper never drains";
}

class FinishDrainLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_ + "/calls.log";
    std::string scontrol = dir_ + "/scontrol";
    std::ofstream(scontrol) << "#!/bin/sh\necho \"scontrol $*\" >> " << log_ << "\nexit 0\n";
    ::chmod(scontrol.c_str(), 0755);
    std::string query = dir_ + "/preflight";
    std::ofstream(query) << "#!/bin/sh\necho \"query $*\" >> " << log_ << "\n[ -f " << dir_
                         << "/node.json ] || exit 1\ncat " << dir_ << "/node.json\n";
    ::chmod(query.c_str(), 0755);
    cfg_.scontrol = scontrol;
    cfg_.slurm_query = query;
    cfg_.state_dir = dir_ + "/state";
  }
  void Answer(bool drain, const std::string& reason) {
    std::ofstream(dir_ + "/node.json") << "{\"nodes\":[{\"name\":\"n1\",\"state\":\"" << (drain ? "IDLE+DRAIN" : "IDLE")
                                       << "\",\"drain\":" << (drain ? "true" : "false") << ",\"reason\":\"" << reason
                                       << "\"}]}\n";
  }
  std::string Calls() {
    auto s = ReadWholeFile(log_);
    return s ? *s : "";
  }
  std::string ScontrolCalls() {
    std::istringstream in(Calls());
    std::string line, out;
    while (std::getline(in, line))
      if (line.rfind("scontrol ", 0) == 0) out += line + "\n";
    return out;
  }
  preflight_test::TempDir tmp_{"finisher"};
  std::string dir_ = tmp_.path(), log_;
  Config cfg_;
  const std::string reason_ = "preflight[node] scratch /s: not usable";
};

TEST_F(FinishDrainLoop, SlurmsDrainGetsTheReasonAndTheStateIsNeverSet) {
  Answer(true, "Prolog error");
  auto token = ClaimDrainFinish(cfg_, "n1");
  ASSERT_TRUE(token.ok()) << token.status().message();
  std::string what;
  Status s = FinishDrain(cfg_, "n1", reason_, *token, 5000, &what);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ScontrolCalls(), "scontrol update NodeName=n1 Reason=" + reason_ + "\n")
      << "reason only: an admin's resume meanwhile is never undone";
  EXPECT_NE(what.find("was \"Prolog error\""), std::string::npos) << what;
}

TEST_F(FinishDrainLoop, AnotherReasonIsKept) {
  Answer(true, "admin: memory test");
  std::string what;
  ASSERT_TRUE(FinishDrain(cfg_, "n1", reason_, "", 5000, &what).ok());
  EXPECT_EQ(ScontrolCalls(), "") << "the admin's reason stays";
  EXPECT_NE(what.find("kept: admin: memory test"), std::string::npos) << what;
}

TEST_F(FinishDrainLoop, AnOlderHelperStandsDownForANewerClaim) {
  Answer(true, "Prolog error");
  auto older = ClaimDrainFinish(cfg_, "n1");
  auto newer = ClaimDrainFinish(cfg_, "n1");
  ASSERT_TRUE(older.ok() && newer.ok());
  ASSERT_NE(*older, *newer);
  std::string what;
  ASSERT_TRUE(FinishDrain(cfg_, "n1", "preflight[node] stale", *older, 5000, &what).ok());
  EXPECT_EQ(Calls(), "") << "superseded: neither asks nor updates slurmctld";
  EXPECT_NE(what.find("newer failure"), std::string::npos) << what;
  ASSERT_TRUE(FinishDrain(cfg_, "n1", reason_, *newer, 5000).ok());
  EXPECT_EQ(ScontrolCalls(), "scontrol update NodeName=n1 Reason=" + reason_ + "\n");
}

TEST_F(FinishDrainLoop, AHelperStartedByHandClaimsTheNode) {
  Answer(true, "admin: x");
  ASSERT_TRUE(FinishDrain(cfg_, "n1", reason_, "", 5000).ok());
  auto held = ReadWholeFile(state::NodeFile(cfg_, "n1", state::kDrainFinisher));
  ASSERT_TRUE(held.ok()) << held.status().message();
  EXPECT_FALSE(held->empty());
}

TEST_F(FinishDrainLoop, NoDrainWithinTheBoundDrainsWithTheReason) {
  Answer(false, "");
  std::string what;
  ASSERT_TRUE(FinishDrain(cfg_, "n1", reason_, "", 300, &what).ok());
  EXPECT_EQ(ScontrolCalls(), "scontrol update NodeName=n1 State=DRAIN Reason=" + reason_ + "\n");
  EXPECT_NE(what.find("did not drain"), std::string::npos) << what;
}

TEST_F(FinishDrainLoop, ASupersededHelperNeverDrainsEvenWhenSlurmDidNot) {
  Answer(false, "");
  auto older = ClaimDrainFinish(cfg_, "n1");
  ASSERT_TRUE(older.ok());
  // A newer failure claimed the node; Slurm has not drained it (yet).
  ASSERT_TRUE(ClaimDrainFinish(cfg_, "n1").ok());
  ASSERT_TRUE(FinishDrain(cfg_, "n1", "preflight[node] stale", *older, 2000).ok());
  EXPECT_EQ(ScontrolCalls(), "") << "a superseded helper never drains, even past its bound";
}

}  // namespace
}  // namespace preflight
