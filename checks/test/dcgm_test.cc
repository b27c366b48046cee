// gpu.dcgm with the fake dcgmi (tests/fakes/fake_dcgmi.sh), which prints the
// outputs in tests/fixtures/dcgm (their sources: README.md there).
#include "preflight/dcgm.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace preflight {
namespace {

struct Dcgm {
  Config cfg;
  JobContext job;
  FsRoot fs{"/"};
  Dcgm() {
    cfg.dcgmi = PREFLIGHT_FAKE_DCGMI;
    cfg.dcgm_timeout_ms = 1500;
    job.node = "n1";
  }
  std::vector<CheckResult> Run(const char* fake_case, Phase phase = Phase::kProlog, Level level = Level::kFull) {
    ::setenv("PREFLIGHT_FAKE_DCGMI", fake_case, 1);
    CheckEnv env{cfg, fs, job, phase, level};
    auto r = RunChecks(env, {CheckDescriptor{"gpu.dcgm", "", Level::kQuick, CheckDcgm, 0,
                                             [](const Config& c) { return c.dcgm_timeout_ms + 10000u; }}});
    ::unsetenv("PREFLIGHT_FAKE_DCGMI");
    return r;
  }
};

TEST(Dcgm, PassingDiagIsOneSummary) {
  Dcgm d;
  auto rs = d.Run("pass");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass);
  EXPECT_EQ(rs[0].message, "dcgmi diag -r 1: 17 passed, 0 skipped, 0 warned, 0 failed (DCGM 3.1.0)");
}

TEST(Dcgm, FailedTestNamesGpuTestAndDcgmsWarning) {
  Dcgm d;
  auto rs = d.Run("fail");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].verdict, Verdict::kFail);
  EXPECT_EQ(rs[1].device, "GPU3");
  EXPECT_EQ(rs[1].message.rfind("dcgmi diag -r 1: Custom/software FAIL: GPU 3 had uncorrectable memory errors", 0), 0u)
      << rs[1].message;
  EXPECT_NE(rs[1].message.find("(DCGM error 95)"), std::string::npos);
}

TEST(Dcgm, HangFailsWithinTheBoundAndNoHostEngineWarns) {
  Dcgm d;
  auto rs = d.Run("hang");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_NE(rs[0].message.find("gave no answer within 1 s"), std::string::npos) << rs[0].message;
  rs = d.Run("noconnect");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  EXPECT_EQ(rs[0].message, "dcgmi diag -r 1 gave no result: Error: unable to establish a connection to the specified host: localhost");
}

TEST(Dcgm, AbsentDcgmIsSkippedWithWhyNeverPass) {
  Dcgm d;
  d.cfg.dcgmi = "/nonexistent/dcgmi";
  auto rs = d.Run("pass");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message, "skipped: /nonexistent/dcgmi not found (DCGM is not installed on this node)");
}

TEST(Dcgm, OnlyAtFullAndInTheSweepWhenAsked) {
  Dcgm d;
  EXPECT_TRUE(d.Run("fail", Phase::kProlog, Level::kQuick).empty());
  EXPECT_TRUE(d.Run("fail", Phase::kHealth, Level::kQuick).empty()) << "dcgm_health_level 0";
  d.cfg.dcgm_health_level = 2;
  auto rs = d.Run("fail", Phase::kHealth, Level::kQuick);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].message.rfind("dcgmi diag -r 2:", 0), 0u) << rs[1].message;
}

TEST(Dcgm, ParserCopesWithOlderStringWarningsAndGarbage) {
  auto rs = ParseDcgmDiag(
      "{\"DCGM GPU Diagnostic\":{\"test_categories\":[{\"category\":\"Hardware\",\"tests\":[{\"name\":\"GPU Memory\","
      "\"results\":[{\"gpu_ids\":\"1\",\"status\":\"Warn\",\"warnings\":[\"Thermal violations totaling 10 us\"]}]}]}],"
      "\"version\":\"2.4.5\"}}",
      0, 2);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].verdict, Verdict::kWarn);
  EXPECT_EQ(rs[1].message, "dcgmi diag -r 2: Hardware/GPU Memory WARN: Thermal violations totaling 10 us");
  EXPECT_EQ(ParseDcgmDiag("segfault\n", 139, 1)[0].verdict, Verdict::kWarn);
}

}  // namespace
}  // namespace preflight
