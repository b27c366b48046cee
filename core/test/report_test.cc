#include "preflight/report.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "preflight/fileutil.h"

namespace preflight {
namespace {

Report Sample() {
  Report r;
  r.tool = "prolog";
  r.node = "n2";
  r.job_id = "7";
  r.level = "quick";
  r.checks.push_back({"scratch.free", "/scratch", "10.0M", ">= 1.0G", Verdict::kFail, "free 10.0M < 1.0G", 0.001});
  r.checks.push_back({"gpu.count", "", "", "", Verdict::kSkip, "skipped: no NVML", 0});
  r.checks.push_back({"ib.port", "mlx5_0 port 1", "ACTIVE", "ACTIVE", Verdict::kPass, "", 0});
  return r;
}

TEST(Report, OverallIsWorstAndSkipIsNotFail) {
  Report r = Sample();
  EXPECT_EQ(r.Overall(), Verdict::kFail);
  r.checks.erase(r.checks.begin());
  EXPECT_EQ(r.Overall(), Verdict::kPass);
}

TEST(Report, DrainReasonNamesCheckDeviceAndFigure) {
  // Reason text since the drain_reason.h grammar (was "preflight: scratch.free /scratch: free 10.0M < 1.0G").
  EXPECT_EQ(DrainReasonFor(Sample()), "preflight[node] scratch.free /scratch: free 10.0M < 1.0G [got 10.0M, want >= 1.0G]");
  Report r = Sample();
  r.checks[0].message = std::string(300, 'x');
  EXPECT_EQ(DrainReasonFor(r).size(), 200u);
}

TEST(Report, JsonHasEveryField) {
  std::string j = ReportJson(Sample());
  for (const char* s : {"\"verdict\": \"fail\"", "\"threshold\": \">= 1.0G\"", "\"verdict\": \"skipped\"",
                        "\"device\": \"mlx5_0 port 1\"", "\"job_id\": \"7\""})
    EXPECT_NE(j.find(s), std::string::npos) << s;
}

TEST(Report, PrometheusTextfile) {
  std::string p = ReportPrometheus(Sample());
  EXPECT_NE(p.find("# TYPE preflight_check_ok gauge"), std::string::npos);
  EXPECT_NE(p.find("preflight_check_ok{node=\"n2\",tool=\"prolog\",check=\"scratch.free\",device=\"/scratch\","
                   "verdict=\"fail\",value=\"10.0M\",threshold=\">= 1.0G\",owner=\"node\"} 0"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("preflight_run_ok{node=\"n2\",tool=\"prolog\"} 0"), std::string::npos);
}

// conf/prometheus/preflight.rules.yml selects on these names and labels, and
// tests/prometheus/preflight.rules.test.yml feeds series of this shape to
// promtool: change them together.
TEST(Report, PrometheusLabelsTheAlertRulesUse) {
  Report r = Sample();
  r.checks.push_back({"gpu.remapped", "gpu1", "3", "<= 0", Verdict::kWarn, "", 0});
  std::map<std::string, std::set<std::string>> labels;  // metric -> label names of every series
  std::istringstream in(ReportPrometheus(r));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t brace = line.find('{');
    ASSERT_NE(brace, std::string::npos) << line;
    std::string names;
    for (size_t i = brace + 1; i < line.size() && line[i] != '}';) {
      size_t eq = line.find("=\"", i);
      ASSERT_NE(eq, std::string::npos) << line;
      names += (names.empty() ? "" : ",") + line.substr(i, eq - i);
      i = eq + 2;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      i += line[i + 1] == ',' ? 2 : 1;
    }
    labels[line.substr(0, brace)].insert(names);
  }
  using Set = std::set<std::string>;
  EXPECT_EQ(labels["preflight_check_ok"], Set{"node,tool,check,device,verdict,value,threshold,owner"});
  EXPECT_EQ(labels["preflight_warnings"], Set{"node,tool,owner"});
  EXPECT_EQ(labels["preflight_run_ok"], Set{"node,tool"});
  EXPECT_EQ(labels["preflight_run_timestamp_seconds"], Set{"node,tool"});
  std::string p = ReportPrometheus(r);
  EXPECT_NE(p.find("preflight_warnings{node=\"n2\",tool=\"prolog\",owner=\"node\"} 1"), std::string::npos) << p;
  EXPECT_NE(p.find(",verdict=\"warn\","), std::string::npos) << p;
}

// PreflightChecksStale compares the age with 7200 s: the timestamp must be
// exact to the second, not rounded to 6 significant digits (1.76481e+09).
TEST(Report, PrometheusTimestampInWholeSeconds) {
  Report r = Sample();
  r.started_unix = 1764806399.6;
  std::string p = ReportPrometheus(r);
  EXPECT_NE(p.find("preflight_run_timestamp_seconds{node=\"n2\",tool=\"prolog\"} 1764806400\n"), std::string::npos) << p;
}

TEST(Report, WrittenAtomicallyUnderStateDir) {
  preflight_test::TempDir tmp("report");
  Config cfg;
  cfg.state_dir = tmp / "state";
  cfg.textfile_dir = tmp / "metrics";
  auto path = WriteReport(cfg, Sample());
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, cfg.state_dir + "/jobs/7/n2.prolog.json");
  EXPECT_TRUE(ReadWholeFile(cfg.textfile_dir + "/preflight_n2_prolog.prom").ok());
}

TEST(Report, UnwritableStateDirIsAnError) {
  Config cfg;
  cfg.state_dir = "/proc/preflight-cannot-exist";
  auto path = WriteReport(cfg, Sample());
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("/proc/preflight-cannot-exist"), std::string::npos);
}

TEST(Report, ConfigDrainReasonNamesFileLineKey) {
  std::string r = ConfigDrainReason("/etc/preflight/preflight.conf:7: key 'stage_peer_port': bad value '70000' "
                                    "(expected a number from 1 to 65535)");
  // Reason text since the drain_reason.h grammar (was "preflight: config /etc/...").
  EXPECT_EQ(r, "preflight[config] config: /etc/preflight/preflight.conf:7: key 'stage_peer_port': bad value '70000' "
               "(expected a number from 1 to 65535)");
  EXPECT_TRUE(IsPreflightReason(r));  // the health check knows preflight's drains by the prefix
  std::string longer = ConfigDrainReason(std::string(500, 'x') + "\nmore");
  EXPECT_EQ(longer.size(), 200u);
  EXPECT_EQ(longer.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace preflight
