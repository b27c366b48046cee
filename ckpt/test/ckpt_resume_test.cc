#include "preflight/ckpt_resume.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt_test_util.h"
#include "preflight/ckpt_persist.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::MakeCkpt;
using preflight_test::Write;

CkptCandidate C(const std::string& name, CkptWhere w, double t, bool ok, const std::string& why = "") {
  return CkptCandidate{name, "/p/" + name, w, t, ok, why};
}

TEST(CkptResumePick, NewestOkWinsAndEveryNewerOneSaysWhy) {
  auto r = PickCkptResume({C("s100", CkptWhere::kShared, 100, true), C("s300", CkptWhere::kShared, 300, false, "parts missing"),
                           C("s200", CkptWhere::kShared, 200, true), C("s400", CkptWhere::kLocal, 400, false, "torn"),
                           C("s50", CkptWhere::kLocal, 50, true)});
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.name, "s200");
  ASSERT_EQ(r.passed_over.size(), 2u);
  EXPECT_EQ(r.passed_over[0].name, "s400");
  EXPECT_EQ(r.passed_over[1].name, "s300");
  auto lines = r.Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "preflight: resume from s200 on the shared tier (/p/s200)");
  EXPECT_EQ(lines[1], "preflight: not resuming from s400 (local disk): torn");
  EXPECT_EQ(lines[2], "preflight: not resuming from s300 (shared tier): parts missing");
}

TEST(CkptResumePick, ANameOkOnBothTiersComesFromLocalDisk) {
  auto r = PickCkptResume({C("s100", CkptWhere::kShared, 100.000001, true), C("s100", CkptWhere::kLocal, 100, true)});
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.where, CkptWhere::kLocal);
  EXPECT_TRUE(r.passed_over.empty());
}

TEST(CkptResumePick, NothingOk) {
  auto r = PickCkptResume({C("s1", CkptWhere::kShared, 1, false, "no marker")});
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.Lines().front(), "preflight: no checkpoint to resume from");
  EXPECT_EQ(r.passed_over.size(), 1u);
  EXPECT_TRUE(PickCkptResume({}).passed_over.empty());
}

class CkptResumeTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt-resume"};
  std::string tier_ = tmp_ / "tier";
  std::string local_ = tmp_ / "local";
  void SetUp() override { std::filesystem::create_directories(tier_); }
  void Persisted(const std::string& name, double t, const std::vector<std::string>& nodes = {"n1"}) {
    MakeCkpt(local_, name, {{"model.pt", "weights of " + name}});
    CkptPersistRequest r;
    r.local_dir = local_;
    r.name = name;
    r.tier = tier_;
    r.run = "3.0";
    r.node = "n1";
    r.nodes = nodes;
    r.complete_time = t;
    auto p = PersistCkpt(r, CkptPersistOptions{});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
  }
};

TEST_F(CkptResumeTest, SkipsEachKindOfNewerBrokenOneWithItsReason) {
  Persisted("step_100", 100);
  Persisted("step_200", 200);
  Persisted("step_250", 250);
  Persisted("step_300", 300, {"n1", "n2"});  // n2's part never came
  Write(tier_ + "/step_200/model.pt", "cut");  // size mismatch
  Write(tier_ + "/step_250/model.pt", std::string("weights of step_250").replace(0, 1, "W"));  // same size
  std::filesystem::create_directories(tier_ + "/step_999/x");  // not preflight's
  CkptResumeInputs in;
  in.tier = tier_;
  auto r = ChooseCkptResume(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->found);
  EXPECT_EQ(r->chosen.name, "step_250") << "sizes alone do not see a same-size change";
  in.verify.level = CkptVerify::kFull;
  r = ChooseCkptResume(in);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->found);
  EXPECT_EQ(r->chosen.name, "step_100");
  EXPECT_EQ(r->chosen.path, tier_ + "/step_100");
  std::map<std::string, std::string> why;
  for (const auto& c : r->passed_over) why[c.name] = c.why;
  EXPECT_NE(why["step_200"].find("size 3, manifest says 19"), std::string::npos) << why["step_200"];
  EXPECT_NE(why["step_250"].find("checksum"), std::string::npos) << why["step_250"];
  EXPECT_NE(why["step_300"].find("parts missing (run 3.0): 1 arrived (n1), waiting for n2"), std::string::npos)
      << why["step_300"];
  EXPECT_NE(why["step_999"].find("not written by preflight"), std::string::npos) << why["step_999"];
  std::string all;
  for (const auto& l : r->Lines()) all += l + "\n";
  EXPECT_NE(all.find("resume from step_100 on the shared tier"), std::string::npos) << all;
}

TEST_F(CkptResumeTest, LocalDiskOnlyWhenAllowedAndOnlyComplete) {
  Persisted("step_100", 100);
  MakeCkpt(local_, "step_500", {{"model.pt", "x"}}, "COMPLETE", 1700000500);
  MakeCkpt(local_, "step_600", {{"model.pt", "x"}}, "");  // being written
  preflight_test::SetMtime(local_ + "/step_600", 1700000600);
  CkptResumeInputs in;
  in.tier = tier_;
  in.local_dir = local_;
  auto shared_only = ChooseCkptResume(in);
  ASSERT_TRUE(shared_only.ok());
  EXPECT_EQ(shared_only->chosen.name, "step_100");
  in.allow_local = true;
  auto r = ChooseCkptResume(in);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->found);
  EXPECT_EQ(r->chosen.name, "step_500");
  EXPECT_EQ(r->chosen.where, CkptWhere::kLocal);
  ASSERT_EQ(r->passed_over.size(), 1u);
  EXPECT_EQ(r->passed_over[0].name, "step_600");
  EXPECT_NE(r->passed_over[0].why.find("torn or being written"), std::string::npos);
}

TEST_F(CkptResumeTest, NoTierAndNoLocalIsNothing) {
  CkptResumeInputs in;
  in.tier = tmp_ / "absent";
  auto r = ChooseCkptResume(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->found);
}

}  // namespace
}  // namespace preflight
