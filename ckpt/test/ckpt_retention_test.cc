#include "preflight/ckpt_retention.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt_test_util.h"
#include "preflight/ckpt_persist.h"
#include "preflight/ckpt_tier.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::Exists;
using preflight_test::MakeCkpt;

CkptCandidate Ok(const std::string& name, double t, bool ok = true) {
  return CkptCandidate{name, "/t/" + name, CkptWhere::kShared, t, ok, ok ? "" : "broken"};
}

TEST(CkptRetentionPlan, KeepsTheNewestOkOnesAndNeverCountsBrokenOnes) {
  std::vector<CkptCandidate> v{Ok("s4", 4), Ok("s1", 1), Ok("s5", 5, false), Ok("s3", 3), Ok("s2", 2)};
  EXPECT_EQ(PlanTierRetention(v, 2), (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(PlanTierRetention(v, 1), (std::vector<std::string>{"s1", "s2", "s3"}))
      << "the broken newest one does not count: s4, the last loadable, stays";
  EXPECT_TRUE(PlanTierRetention(v, 0).empty()) << "keep 0: retention off";
  EXPECT_TRUE(PlanTierRetention(v, 4).empty());
  EXPECT_TRUE(PlanTierRetention({Ok("s9", 9, false)}, 1).empty());
}

TEST(CkptRetentionPlan, LocalGoesOnlyWhenDurableAndNeverIncomplete) {
  std::vector<LocalCkpt> local{{"s1", true, 1, "COMPLETE", ""}, {"s2", false, 2, "", "torn"},
                               {"s3", true, 3, "COMPLETE", ""}, {"s4", true, 4, "COMPLETE", ""},
                               {"s5", false, 5, "", "being written"}};
  EXPECT_EQ(PlanLocalRetention(local, {"s1", "s3", "s4"}, 1), (std::vector<std::string>{"s1", "s3"}));
  EXPECT_EQ(PlanLocalRetention(local, {"s1", "s4"}, 0), (std::vector<std::string>{"s1", "s4"}));
  EXPECT_EQ(PlanLocalRetention(local, {"s2", "s5"}, 0), std::vector<std::string>{}) << "never an incomplete one";
  EXPECT_TRUE(PlanLocalRetention(local, {"s1", "s3", "s4"}, 3).empty());
}

class CkptRetentionTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt-retention"};
  std::string tier_ = tmp_ / "tier";
  std::string local_ = tmp_ / "local";
  void SetUp() override { std::filesystem::create_directories(tier_); }
  void Persisted(const std::string& name, time_t t) {
    MakeCkpt(local_, name, {{"model.pt", "weights of " + name}}, "COMPLETE", t);
    CkptPersistRequest r;
    r.local_dir = local_;
    r.name = name;
    r.tier = tier_;
    r.run = "4.0";
    r.node = "n1";
    r.nodes = {"n1"};
    r.complete_time = static_cast<double>(t);
    ASSERT_TRUE(PersistCkpt(r, CkptPersistOptions{}).ok());
  }
  std::vector<std::string> Tier() {
    std::vector<std::string> v;
    auto l = ListCkptTier(tier_);  // kept: a range-for over *temporary would dangle
    for (const auto& e : *l) v.push_back(e.entry);
    return v;
  }
};

TEST_F(CkptRetentionTest, TierKeepsTheNewestDurableOnes) {
  for (int i = 1; i <= 4; ++i) Persisted("step_" + std::to_string(i), 1700000000 + i);
  std::filesystem::create_directories(tier_ + "/.trash-step_0.1.2/x");
  preflight_test::Write(tier_ + "/step_4/model.pt", "x");  // newest: no longer verifies
  CkptTierGcOptions o;
  o.keep = 2;
  auto r = CkptTierGc(tier_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->removed, (std::vector<std::string>{"step_1"}));
  EXPECT_EQ(Tier(), (std::vector<std::string>{"step_2", "step_3", "step_4"}))
      << "step_4 does not count, so step_2 stays; trash is gone";
  bool noted = false;
  for (const auto& n : r->notes) noted |= n.find("step_4: kept, not counted") != std::string::npos;
  EXPECT_TRUE(noted);
  o.keep = 1;
  ASSERT_TRUE(CkptTierGc(tier_, o).ok());
  EXPECT_EQ(Tier(), (std::vector<std::string>{"step_3", "step_4"})) << "never the last loadable one";
}

TEST_F(CkptRetentionTest, LocalRemovesOnlyWhatIsDurableHere) {
  Persisted("step_1", 1700000001);
  Persisted("step_2", 1700000002);
  MakeCkpt(local_, "step_3", {{"model.pt", "not persisted"}}, "COMPLETE", 1700000003);
  MakeCkpt(local_, "step_4", {{"model.pt", "being written"}}, "");
  preflight_test::SetMtime(local_ + "/step_4", 1700000004);
  CkptLocalGcOptions o;
  o.tier = tier_;
  o.node = "n1";
  o.keep = 1;
  auto r = CkptLocalGc(local_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{local_ + "/step_1", local_ + "/step_2"}));
  EXPECT_TRUE(Exists(local_ + "/step_3")) << "not durable";
  EXPECT_TRUE(Exists(local_ + "/step_4")) << "may still be written";
  EXPECT_TRUE(Exists(tier_ + "/step_1"));
  for (const auto& e : std::filesystem::directory_iterator(local_))
    EXPECT_NE(e.path().filename().string().rfind(".trash-", 0), 0u) << "trash left: " << e.path();

  // A durable copy another node made does not make this node's copy durable.
  Persisted("step_5", 1700000005);
  o.node = "n2";
  o.keep = 0;
  auto other = CkptLocalGc(local_, o);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
  EXPECT_TRUE(Exists(local_ + "/step_5"));
}

TEST_F(CkptRetentionTest, LocalWaitsForARunningPersist) {
  MakeCkpt(local_, "step_1", {{"a", "1"}});
  int fd = ::open((local_ + "/" + kCkptPersistLock).c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  CkptLocalGcOptions o;
  o.tier = tier_;
  o.node = "n1";
  int rc = preflight_test::InChild([&] {
    auto r = CkptLocalGc(local_, o);
    return !r.ok() && r.status().code() == Status::Code::kUnavailable ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
  ::close(fd);
}

}  // namespace
}  // namespace preflight
