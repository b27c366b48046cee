#include "preflight/job.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

TEST(JobContext, FromPrologEnvironment) {
  Config cfg;
  EnvMap env = {{"SLURM_JOB_ID", "42"}, {"SLURMD_NODENAME", "gpu3"}, {"SLURM_JOB_USER", "alice"},
                {"SLURM_JOB_UID", "1001"}, {"SLURM_JOB_GPUS", "0-2,5"},
                {"SPANK_PREFLIGHT_NCCL_CHECK", "(null)"}};
  auto j = JobContextFromEnv(env, cfg, false);
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->job_id, "42");
  EXPECT_EQ(j->node, "gpu3");
  EXPECT_EQ(j->uid, 1001u);
  EXPECT_EQ(j->gpus, (std::vector<int>{0, 1, 2, 5}));
  EXPECT_TRUE(j->level_given);
  EXPECT_EQ(j->level, Level::kQuick);
}

TEST(JobContext, SiteDefaultWhenNotAsked) {
  Config cfg;
  cfg.default_level = Level::kFull;
  auto j = JobContextFromEnv({{"SLURM_JOB_ID", "1"}}, cfg, false);
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(j->level_given);
  EXPECT_EQ(j->level, Level::kFull);
}

TEST(JobContext, BadValuesNameTheVariable) {
  Config cfg;
  auto j = JobContextFromEnv({{"SLURM_JOB_ID", "1"}, {"SPANK_PREFLIGHT_NCCL_CHECK", "bogus"}}, cfg, false);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("SPANK_PREFLIGHT_NCCL_CHECK='bogus'"), std::string::npos);
  auto g = JobContextFromEnv({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_GPUS", "0,x"}}, cfg, false);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("SLURM_JOB_GPUS"), std::string::npos);
}

TEST(JobContext, JobIdRequiredUnlessByHand) {
  Config cfg;
  EXPECT_FALSE(JobContextFromEnv({}, cfg, false).ok());
  EXPECT_TRUE(JobContextFromEnv({}, cfg, true).ok());
}

TEST(IdList, Forms) {
  EXPECT_EQ(*ParseIdList("3"), std::vector<int>{3});
  EXPECT_EQ(*ParseIdList("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(ParseIdList("").ok());
  EXPECT_FALSE(ParseIdList("3-1").ok());
  EXPECT_FALSE(ParseIdList("1,,2").ok());
}

}  // namespace
}  // namespace preflight
