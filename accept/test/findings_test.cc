// The report's findings (Report::reasons): one line per rule broken, the
// nodes that broke it as one hostlist with the range of their figures.
#include <gtest/gtest.h>

#include <string>

#include "fixture_report.h"
#include "preflight/accept_report.h"

namespace preflight::accept {
namespace {

using testing::FixtureReport;

size_t Count(const std::vector<std::string>& lines, const std::string& needle) {
  size_t n = 0;
  for (const auto& l : lines) n += l.find(needle) != std::string::npos;
  return n;
}

TEST(AcceptFindings, NodesBreakingOneRuleAreOneLineWithTheirRange) {
  Report r = FixtureReport(true);
  ASSERT_TRUE(SetThreshold(&r.thresholds, "seq_write=1G").ok());
  for (auto& s : r.storage)
    if (s.scope == "all nodes" && s.node == "n7") s.seq_write = 50e6;
  Judge(&r);
  // The all-nodes sum and each path measured from n1 alone stand alone.
  EXPECT_EQ(Count(r.reasons, "seq_write"), 5u) << SummaryText(r);
  EXPECT_EQ(Count(r.reasons, "fail: /fast (all nodes): seq_write below 1.00 GB/s per node on n[1-8]: 50.00 MB/s to 500.00 MB/s"), 1u)
      << SummaryText(r);
  // The per-node words stay in the nodes' rows.
  for (const auto& row : r.node_rows) {
    if (row.node == "n7") {
      EXPECT_NE(row.reasons[0].find("/fast (all nodes, n7): seq_write"), std::string::npos);
    }
  }
  EXPECT_EQ(SummaryText(r).find("(all nodes, n3)"), std::string::npos) << SummaryText(r);
}

TEST(AcceptFindings, SameNodeCheckFailureAndSameLossAreGrouped) {
  Report r = FixtureReport(true);
  for (const char* n : {"n2", "n3", "n5"}) r.node_checks[n] = "exit 1: gpu.count: 7 GPUs, expected 8";
  r.node_checks["n8"] = "exit 1: gpu.ecc: 3 uncorrectable";
  r.lost_nodes["n6"] = "during the 8-node sweep (Slurm: down*)";
  r.lost_nodes["n7"] = "during the 8-node sweep (Slurm: down*)";
  Judge(&r);
  EXPECT_EQ(Count(r.reasons, "fail: node checks: exit 1: gpu.count: 7 GPUs, expected 8 on n[2-3,5]"), 1u) << SummaryText(r);
  EXPECT_EQ(Count(r.reasons, "fail: exit 1: gpu.ecc: 3 uncorrectable"), 1u) << "one node: its own reason";
  EXPECT_EQ(Count(r.reasons, "fail: lost mid-run during the 8-node sweep (Slurm: down*) on n[6-7]"), 1u) << SummaryText(r);
  EXPECT_EQ(r.reasons.size(), 3u) << SummaryText(r);
  EXPECT_EQ(r.verdict, Verdict::kFail);
}

TEST(AcceptFindings, WideReportHasFewLines) {
  Report r = testing::WideReport();
  Judge(&r);
  // 67 nodes failing one check, 100 below the threshold and the nodes'
  // median on three metrics: a handful of lines, not hundreds.
  EXPECT_LE(r.reasons.size(), 6u) << SummaryText(r);
  EXPECT_EQ(Count(r.reasons, "node checks: exit 1: gpu.pcie"), 1u);
}

}  // namespace
}  // namespace preflight::accept
