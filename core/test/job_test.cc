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
  EXPECT_TRUE(j->options.nccl_check_given);
  EXPECT_EQ(j->level, Level::kQuick);
}

TEST(JobContext, SiteDefaultWhenNotAsked) {
  Config cfg;
  cfg.default_level = Level::kFull;
  auto j = JobContextFromEnv({{"SLURM_JOB_ID", "1"}}, cfg, false);
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(j->options.nccl_check_given);
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

// The job's options travel in the context, parsed once: --stage's sources,
// or the reason it did not parse (which fails the job's tasks, not the
// context), and the effective level.
TEST(JobContext, CarriesTheParsedJobOptions) {
  Config cfg;
  cfg.default_level = Level::kFull;
  auto j = JobContextFromEnv({{"SLURM_JOB_ID", "1"}, {"SPANK_PREFLIGHT_STAGE", "/data/a:a,/data/b"},
                              {"SPANK_PREFLIGHT_ENV", "off"}},
                             cfg, false);
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_TRUE(StageRequested(*j));
  EXPECT_TRUE(j->stage_error.ok());
  ASSERT_EQ(j->options.stage.size(), 2u);
  EXPECT_EQ(j->options.stage[0].path, "/data/a");
  EXPECT_EQ(j->options.stage[0].name, "a");
  EXPECT_TRUE(j->options.env_given);
  EXPECT_EQ(j->options.env, EnvMode::kOff);
  EXPECT_EQ(j->level, Level::kFull);
  EXPECT_EQ(EffectiveLevel(j->options, cfg), Level::kFull);

  auto bad = JobContextFromEnv({{"SLURM_JOB_ID", "1"}, {"SPANK_PREFLIGHT_STAGE", ",,"}}, cfg, false);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_TRUE(StageRequested(*bad));
  EXPECT_FALSE(bad->options.stage_given);
  EXPECT_NE(bad->stage_error.message().find("SPANK_PREFLIGHT_STAGE=',,'"), std::string::npos)
      << bad->stage_error.message();

  auto none = JobContextFromEnv({{"SLURM_JOB_ID", "1"}, {"SPANK_PREFLIGHT_STAGE", ""}}, cfg, false);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(StageRequested(*none));
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
