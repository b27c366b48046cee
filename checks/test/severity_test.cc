// Severity, ownership and the check_<name> switches (severity.h), through
// the real harness (RunChecks forks each check, results cross a pipe).
#include "preflight/severity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "preflight/checks.h"
#include "preflight/node_run.h"

namespace preflight {
namespace {

CheckResult Finding(const std::string& check, Verdict v, FaultOwner o = FaultOwner::kNode) {
  CheckResult r;
  r.check = check;
  r.device = "GPU1";
  r.verdict = v;
  r.owner = o;
  r.message = "temperature 91C > 85C";
  return r;
}

TEST(Severity, MostSpecificSwitchWins) {
  std::map<std::string, CheckMode> m = {{"gpu", CheckMode::kOff}, {"gpu.xid", CheckMode::kOn}};
  std::string by;
  EXPECT_EQ(ModeFor(m, "gpu.temperature", &by), CheckMode::kOff);
  EXPECT_EQ(by, "check_gpu");
  EXPECT_EQ(ModeFor(m, "gpu.xid", &by), CheckMode::kOn);
  EXPECT_EQ(by, "check_gpu_xid");
  EXPECT_EQ(ModeFor(m, "ib.port"), CheckMode::kOn);
  EXPECT_EQ(CheckKeyName("gpu.row_remap"), "check_gpu_row_remap");
}

TEST(Severity, WarnSwitchTurnsFailIntoWarnAndSaysWhy) {
  std::vector<CheckResult> rs = {Finding("gpu.temperature", Verdict::kFail), Finding("gpu.ecc", Verdict::kFail)};
  EXPECT_EQ(ApplySeverityPolicy({{"gpu.temperature", CheckMode::kWarn}}, rs), 1);
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  EXPECT_NE(rs[0].message.find("check_gpu_temperature = warn"), std::string::npos) << rs[0].message;
  EXPECT_EQ(rs[1].verdict, Verdict::kFail);
}

TEST(Severity, OffSwitchSkipsAndKeepsWhatWasFound) {
  std::vector<CheckResult> rs = {Finding("gpu.temperature", Verdict::kFail)};
  ApplySeverityPolicy({{"gpu", CheckMode::kOff}}, rs);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message, "skipped: off by check_gpu (found: temperature 91C > 85C)");
}

TEST(Severity, UserOwnedFailNeverDrains) {
  std::vector<CheckResult> rs = {Finding("gpu.xid", Verdict::kFail, FaultOwner::kUser)};
  ApplySeverityPolicy({}, rs);
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  Report r;
  r.checks = rs;
  EXPECT_NE(r.Overall(), Verdict::kFail);
  EXPECT_EQ(WarnComment(r), "preflight warn: [user] gpu.xid GPU1: temperature 91C > 85C");
}

TEST(Severity, WarningsReachTheMetricAndTheResultFile) {
  Report r;
  r.node = "n2";
  r.tool = "health";
  r.checks = {Finding("ib.counters", Verdict::kWarn), Finding("gpu.xid", Verdict::kWarn, FaultOwner::kUser),
              Finding("gpu.ecc", Verdict::kPass)};
  std::string p = ReportPrometheus(r);
  EXPECT_NE(p.find("preflight_warnings{node=\"n2\",tool=\"health\",owner=\"node\"} 1"), std::string::npos) << p;
  EXPECT_NE(p.find("preflight_warnings{node=\"n2\",tool=\"health\",owner=\"user\"} 1"), std::string::npos) << p;
  std::string j = ReportJson(r);
  EXPECT_NE(j.find("\"owner\": \"user\""), std::string::npos) << j;
  EXPECT_EQ(r.Overall(), Verdict::kWarn);
  EXPECT_EQ(WarnComment(r),
            "preflight warn: [node] ib.counters GPU1: temperature 91C > 85C; [user] gpu.xid GPU1: temperature 91C > 85C");
}

std::vector<CheckResult> FailingCheck(const CheckEnv&) { return {Finding("fake.hot", Verdict::kFail)}; }
std::vector<CheckResult> UserFault(const CheckEnv&) { return {Finding("fake.user", Verdict::kFail, FaultOwner::kUser)}; }

TEST(Severity, HarnessDoesNotRunASwitchedOffCheck) {
  Config cfg;
  cfg.check_modes["fake"] = CheckMode::kOff;
  FsRoot fs("/");
  JobContext job;
  CheckEnv env{cfg, fs, job, Phase::kHealth, Level::kQuick};
  auto rs = RunChecks(env, {CheckDescriptor{"fake", "", Level::kQuick, FailingCheck}});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].check, "fake");
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message, "skipped: off by check_fake");
}

TEST(Severity, OwnerCrossesTheHarnessPipe) {
  Config cfg;
  FsRoot fs("/");
  JobContext job;
  CheckEnv env{cfg, fs, job, Phase::kHealth, Level::kQuick};
  auto rs = RunChecks(env, {CheckDescriptor{"fake", "", Level::kQuick, UserFault},
                            CheckDescriptor{"fake2", "", Level::kQuick, FailingCheck}});
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    if (r.check == "fake.user") {
      EXPECT_EQ(r.owner, FaultOwner::kUser);
      EXPECT_EQ(r.verdict, Verdict::kWarn);
    } else {
      EXPECT_EQ(r.owner, FaultOwner::kNode);
      EXPECT_EQ(r.verdict, Verdict::kFail);
    }
  }
}

TEST(Severity, EverySwitchIsAConfigKeyAndParses) {
  for (const auto& name : SwitchableChecks()) {
    bool found = false;
    for (const auto& k : ConfigKeys()) found = found || CheckKeyName(name) == k.name;
    EXPECT_TRUE(found) << CheckKeyName(name);
  }
  Config cfg;
  ASSERT_TRUE(ApplyOverrides(cfg, {"check_gpu_temperature=warn", "check_ib=off"}, "test", "").ok());
  EXPECT_EQ(cfg.check_modes["gpu.temperature"], CheckMode::kWarn);
  EXPECT_EQ(cfg.check_modes["ib"], CheckMode::kOff);
  Status bad = ApplyOverrides(cfg, {"check_gpu_ecc=maybe"}, "test", "");
  EXPECT_NE(bad.message().find("check_gpu_ecc"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("expected on, warn or off"), std::string::npos) << bad.message();
  EXPECT_FALSE(ApplyOverrides(cfg, {"check_no_such_check=off"}, "test", "").ok());
}

TEST(Severity, ConfigFileErrorNamesFileLineAndKey) {
  char path[] = "/tmp/preflight-sev-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "# site\ncheck_gpu_xid = warn\ncheck_ib_port = sometimes\n";
  auto c = LoadConfig(path, "n1", true);
  ::unlink(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(std::string(path) + ":3: key 'check_ib_port'"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace preflight
