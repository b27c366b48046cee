#include "preflight/ckpt_job.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "ckpt_test_util.h"
#include "preflight/ckpt_commit.h"
#include "preflight/ckpt_tier.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

namespace fs = std::filesystem;
using preflight_test::Exists;
using preflight_test::MakeCkpt;
using preflight_test::Write;

CkptPlan Plan(const std::string& tier, std::vector<std::string> nodes) {
  CkptPlan p;
  p.tier = tier;
  p.run = "41.2";
  p.nodes = std::move(nodes);
  p.keep_local = 0;
  return p;
}

TEST(CkptPlanTest, RoundTripsAndRefusesBadFields) {
  CkptPlan p = Plan("/shared/ckpt", {"n1", "n2"});
  p.convention = CkptConvention::kNemo;
  p.keep_shared = 3;
  p.verify = CkptVerify::kSample;
  auto back = ParseCkptPlan(CkptPlanJson(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tier, "/shared/ckpt");
  EXPECT_EQ(back->run, "41.2");
  EXPECT_EQ(back->nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(back->convention, CkptConvention::kNemo);
  EXPECT_EQ(back->keep_shared, 3u);
  EXPECT_EQ(back->verify, CkptVerify::kSample);
  EXPECT_TRUE(back->ConventionFor("n1").coordinator);
  EXPECT_FALSE(back->ConventionFor("n2").coordinator);

  for (const char* bad : {R"({"tier":"rel/dir","run":"1.0","nodes":["n1"]})",
                          R"({"tier":"/t","run":"1-0","nodes":["n1"]})",
                          R"({"tier":"/t","run":"1.0","nodes":[]})",
                          R"({"tier":"/t","run":"1.0","nodes":["../x"]})",
                          R"({"tier":"/t","run":"1.0","nodes":["n1"],"convention":"tensorflow"})",
                          R"({"tier":"/t","run":"1.0","nodes":["n1"],"keep_shared":-1})",
                          R"({"tier":"/t","run":"1.0","nodes":["n1"],"marker":"a/b"})", "[]", "{"}) {
    auto r = ParseCkptPlan(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("persist plan"), std::string::npos) << r.status().message();
  }
}

TEST(CkptPlanTest, FileIsPrivateAndBounded) {
  preflight_test::TempDir tmp("ckpt-plan");
  ASSERT_TRUE(WriteCkptPlan(tmp.path(), Plan("/t", {"n1"})).ok());
  struct stat st;
  ASSERT_EQ(::stat((tmp / kCkptPlanFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(ReadCkptPlan(tmp.path()).ok());
  Write(tmp / kCkptPlanFile, std::string(kCkptPlanMaxBytes + 1, ' '));
  auto big = ReadCkptPlan(tmp.path());
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than 1 MiB"), std::string::npos);
  fs::remove(tmp / kCkptPlanFile);
  EXPECT_EQ(ReadCkptPlan(tmp.path()).status().code(), Status::Code::kNotFound);
}

class CkptRoundTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt-round"};
  std::string tier_ = tmp_ / "tier";
  void SetUp() override { fs::create_directories(tier_); }
  std::string Local(const std::string& node) { return tmp_ / ("local-" + node); }
};

// Node n2 died while writing step_20: its part never arrives. n1's round
// persists step_20 (waits), then step_10, which n2 had sent: step_10 is
// committed and is what a resume finds, though n1's newest never commits.
TEST_F(CkptRoundTest, OlderCheckpointCommitsWhenTheNewestWaits) {
  CkptPlan plan = Plan(tier_, {"n1", "n2"});
  MakeCkpt(Local("n1"), "step_10", {{"r0.pt", "a10"}}, "COMPLETE", 1700000010);
  MakeCkpt(Local("n1"), "step_20", {{"r0.pt", "a20"}}, "COMPLETE", 1700000020);
  MakeCkpt(Local("n2"), "step_10", {{"r1.pt", "b10"}}, "COMPLETE", 1700000011);
  MakeCkpt(Local("n2"), "step_20", {{"r1.pt", "b2"}}, "");  // torn: no marker

  auto r2 = PersistRound(Local("n2"), plan, "n2", CkptRoundOptions{});
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(r2->records.size(), 1u);
  EXPECT_EQ(r2->records[0].name, "step_10");
  EXPECT_EQ(r2->records[0].state, CkptState::kPersisting);
  EXPECT_EQ(r2->newest_durable, "");
  EXPECT_EQ(r2->bytes_not_durable, 3u);

  auto r1 = PersistRound(Local("n1"), plan, "n1", CkptRoundOptions{});
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_EQ(r1->records.size(), 2u);
  EXPECT_EQ(r1->records[0].name, "step_20");
  EXPECT_EQ(r1->records[0].state, CkptState::kPersisting);
  EXPECT_EQ(r1->records[0].missing, std::vector<std::string>{"n2"});
  EXPECT_EQ(r1->records[1].name, "step_10");
  EXPECT_EQ(r1->records[1].state, CkptState::kDurable);
  EXPECT_EQ(r1->newest_durable, "step_10");
  EXPECT_EQ(r1->bytes_not_durable, 3u);  // step_20's part
  EXPECT_TRUE(CheckCkptDurable(tier_, "step_10", CkptVerifyOptions{}).ok());
  EXPECT_FALSE(Exists(tier_ + "/step_20"));

  // The next round of n2 finds step_10 durable and copies nothing.
  auto again = PersistRound(Local("n2"), plan, "n2", CkptRoundOptions{});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->records.empty());
  EXPECT_EQ(again->newest_durable, "step_10");
}

TEST_F(CkptRoundTest, LocalRetentionRemovesOnlyWhatIsDurable) {
  CkptPlan plan = Plan(tier_, {"n1"});
  MakeCkpt(Local("n1"), "step_1", {{"m", "1"}}, "COMPLETE", 1700000001);
  MakeCkpt(Local("n1"), "step_2", {{"m", "2"}}, "COMPLETE", 1700000002);
  MakeCkpt(Local("n1"), "step_3", {{"m", "3"}}, "");  // being written
  auto r = PersistRound(Local("n1"), plan, "n1", CkptRoundOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->newest_durable, "step_2");
  // step_2 is durable and goes (keep_local 0); step_1 never reached the
  // tier and stays; step_3 is incomplete and stays.
  EXPECT_FALSE(Exists(Local("n1") + "/step_2"));
  EXPECT_TRUE(Exists(Local("n1") + "/step_1"));
  EXPECT_TRUE(Exists(Local("n1") + "/step_3"));
  // The next round: step_2 is gone locally, but step_1 (older than a
  // durable checkpoint) is not taken for the newest still to persist.
  auto again = PersistRound(Local("n1"), plan, "n1", CkptRoundOptions{});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->records.empty());
  EXPECT_EQ(again->newest_durable, "step_2");
  EXPECT_EQ(again->bytes_not_durable, 0u);
  EXPECT_FALSE(Exists(tier_ + "/step_1"));
  // A newer one is persisted as usual.
  MakeCkpt(Local("n1"), "step_4", {{"m", "4"}}, "COMPLETE", 1700000004);
  auto next = PersistRound(Local("n1"), plan, "n1", CkptRoundOptions{});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->newest_durable, "step_4");
}

// n1 sent its part of step_10 and waited for n2's; n2 skipped step_10 for
// step_20, which then committed. Nobody completes step_10's partial folder
// (seen on the cluster: a finished 3-node run left 31, each one node's part
// of a checkpoint): at the run's end it goes; a newer one an epilog may
// still send, and another run's, stay.
TEST_F(CkptRoundTest, CopiesOvertakenByANewerCommitGoAtTheRunsEnd) {
  CkptPlan plan = Plan(tier_, {"n1", "n2"});
  plan.keep_local = 1;
  MakeCkpt(Local("n1"), "step_10", {{"r0.pt", "a10"}}, "COMPLETE", 1700000010);
  auto r = PersistRound(Local("n1"), plan, "n1", CkptRoundOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), 1u);
  EXPECT_EQ(r->records[0].state, CkptState::kPersisting);
  const std::string overtaken = tier_ + "/" + CkptPartialName(plan.run, "step_10");
  ASSERT_TRUE(Exists(overtaken));
  EXPECT_TRUE(RemoveOvertakenCopies(Local("n1"), plan, "n1")->empty()) << "nothing durable yet: nothing overtaken";

  MakeCkpt(Local("n1"), "step_20", {{"r0.pt", "a20"}}, "COMPLETE", 1700000020);
  MakeCkpt(Local("n2"), "step_20", {{"r1.pt", "b20"}}, "COMPLETE", 1700000021);
  // n1 sends first and waits; n2's round commits step_20. n1's own
  // watermark never saw it durable (seen on the cluster: the last commit was
  // another node's), so the tier decides what is overtaken.
  MakeCkpt(Local("n1"), "step_30", {{"r0.pt", "a30"}}, "COMPLETE", 1700000030);
  CkptRoundOptions two;
  two.max_attempts = 2;
  ASSERT_TRUE(PersistRound(Local("n1"), plan, "n1", two).ok());  // step_30 and step_20 wait for n2
  auto r2 = PersistRound(Local("n2"), plan, "n2", CkptRoundOptions{});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->newest_durable, "step_20");
  const std::string newer = tier_ + "/" + CkptPartialName(plan.run, "step_30");
  const std::string other = tier_ + "/" + CkptPartialName("40.0", "step_10");
  ASSERT_TRUE(Exists(newer));
  fs::create_directories(other + "/n1");

  auto gone = RemoveOvertakenCopies(Local("n1"), plan, "n1");
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(*gone, std::vector<std::string>{CkptPartialName(plan.run, "step_10")});
  EXPECT_FALSE(Exists(overtaken));
  EXPECT_TRUE(Exists(newer)) << "an epilog may still send n2's part";
  EXPECT_TRUE(Exists(other)) << "another run's";
  EXPECT_TRUE(CheckCkptDurable(tier_, "step_20", CkptVerifyOptions{}).ok());
  for (const auto& e : fs::directory_iterator(tier_))
    EXPECT_NE(e.path().filename().string().rfind(kCkptTrashPrefix, 0), 0u) << e.path();
}

// low: nice 10 for the thread and the threads it starts (the copy's);
// normal leaves it; nice is never lowered back.
TEST(CkptIoClassTest, LowAndIdleLowerTheCpuPriorityOfTheCopyThreads) {
  EXPECT_EQ(preflight_test::InChild([] {
              const int base = ::getpriority(PRIO_PROCESS, 0);  // the test may run niced already
              const int low = std::max(base, kCkptLowNice), idle = std::max(base, kCkptIdleNice);
              if (!SetCkptIoClass(CkptIoClass::kNormal).ok() || ::getpriority(PRIO_PROCESS, 0) != base) return 1;
              if (!SetCkptIoClass(CkptIoClass::kLow).ok() || ::getpriority(PRIO_PROCESS, 0) != low) return 2;
              int in_thread = -100;
              std::thread([&] { in_thread = ::getpriority(PRIO_PROCESS, 0); }).join();
              if (in_thread != low) return 3;
              if (!SetCkptIoClass(CkptIoClass::kIdle).ok() || ::getpriority(PRIO_PROCESS, 0) != idle) return 4;
              if (!SetCkptIoClass(CkptIoClass::kLow).ok() || ::getpriority(PRIO_PROCESS, 0) != idle) return 5;
              return 0;
            }),
            0);
}

TEST_F(CkptRoundTest, FailedPersistIsARecordNotAnError) {
  CkptPlan plan = Plan(tier_, {"n1"});
  MakeCkpt(Local("n1"), "step_1", {{"m", "1"}});
  CkptRoundOptions o;
  o.fault = [](CkptFaultPoint p, uint64_t) { return p == CkptFaultPoint::kPartDataSynced ? ENOSPC : 0; };
  auto r = PersistRound(Local("n1"), plan, "n1", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), 1u);
  EXPECT_EQ(r->records[0].state, CkptState::kFailed);
  EXPECT_FALSE(r->records[0].error.empty());
  EXPECT_EQ(r->newest_durable, "");
  EXPECT_TRUE(Exists(Local("n1") + "/step_1/m"));  // nothing local is lost
}

}  // namespace
}  // namespace preflight
