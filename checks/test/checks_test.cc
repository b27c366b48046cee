#include "preflight/checks.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <sys/stat.h>
#include <unistd.h>

namespace preflight {
namespace {

struct Fixture {
  Config cfg;
  FsRoot fs{"/"};
  JobContext job;
};

TEST(Scratch, SkippedWhenNotConfigured) {
  Fixture f;
  CheckEnv env{f.cfg, f.fs, f.job, Phase::kProlog, Level::kQuick};
  auto r = CheckScratch(env);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kSkip);
  EXPECT_NE(r[0].message.find("skipped:"), std::string::npos);
}

TEST(Scratch, MissingDirectoryFails) {
  Fixture f;
  f.cfg.scratch_dir = "/nonexistent/scratch";
  CheckEnv env{f.cfg, f.fs, f.job, Phase::kProlog, Level::kQuick};
  auto r = CheckScratch(env);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kFail);
  EXPECT_NE(r[0].message.find("No such file or directory"), std::string::npos);
}

TEST(Scratch, ThresholdAboveFreeSpaceFails) {
  Fixture f;
  preflight_test::TempDir tmp("scratch");
  f.cfg.scratch_dir = tmp;
  f.cfg.scratch_min_free_bytes = ~0ull;
  CheckEnv env{f.cfg, f.fs, f.job, Phase::kProlog, Level::kQuick};
  auto r = CheckScratch(env);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].check, "scratch.free");
  EXPECT_EQ(r[0].verdict, Verdict::kFail);
  EXPECT_NE(r[0].message.find(" < "), std::string::npos);
  EXPECT_EQ(r[2].check, "scratch.writable");
  EXPECT_EQ(r[2].verdict, Verdict::kPass);
}

TEST(RunChecks, LevelOffRunsNothingQuickRunsScratch) {
  Fixture f;
  CheckEnv off{f.cfg, f.fs, f.job, Phase::kProlog, Level::kOff};
  EXPECT_TRUE(RunChecks(off).empty());
  CheckEnv quick{f.cfg, f.fs, f.job, Phase::kProlog, Level::kQuick};
  auto r = RunChecks(quick);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0].check, "scratch");
}

TEST(HumanBytes, Units) {
  EXPECT_EQ(HumanBytes(512), "512B");
  EXPECT_EQ(HumanBytes(1536), "1.5K");
  EXPECT_EQ(HumanBytes(3.0 * (1ull << 30)), "3.0G");
}

}  // namespace
}  // namespace preflight
