// Accept's other collectives (issue 33, item 2): all-gather, reduce-scatter
// and all-to-all across the allocation in one preflight-nccl launch, each a
// curve of its own in the report, judged like the all-reduce curves. The
// runner is scripted (the srun seam RunAccept uses); system.accept runs the
// real preflight-nccl on the emulated cluster.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight/process.h"

namespace preflight::accept {
namespace {

// One operation's document as preflight-nccl --ops --json prints it.
std::string OpDoc(const std::string& op, double busbw, int wrong) {
  return "{\n  \"test\": \"" + op + "\",\n  \"nodes\": [\"n1\", \"n2\"],\n  \"threshold_Bps\": 1e8,\n" +
         "  \"threshold_source\": \"site\",\n  \"sizes\": [{\"bytes\": 1048576, \"busbw_Bps\": " + std::to_string(busbw) +
         ", \"wrong\": " + std::to_string(wrong) + "}]\n}";
}

struct Script {
  std::vector<std::string> calls;
  int ops_exit = 0;
  std::string ops_output;
  ProcessResult operator()(const std::vector<std::string>& argv, unsigned) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    calls.push_back(cmd);
    ProcessResult p;
    p.exit_code = 0;
    auto has = [&](const std::string& s) { return cmd.find(s) != std::string::npos; };
    if (has("--ops")) {
      p.exit_code = ops_exit;
      p.output = ops_output;
    } else if (has("--intra-node")) {
      for (int i = 0; i < 2; ++i)
        p.output += std::to_string(i) + ": {\"nodes\": [\"n" + std::to_string(i + 1) +
                    "\"], \"sizes\": [{\"bytes\": 1024, \"busbw_Bps\": 5e8, \"wrong\": 0}]}\n";
    } else if (has("--nodes=2") && has("preflight-nccl") && !has("--scope pairs")) {
      p.output = "{\"nodes\": [\"n1\", \"n2\"], \"sizes\": [{\"bytes\": 1024, \"busbw_Bps\": 5e8, \"wrong\": 0}]}\n";
    }
    return p;
  }
  size_t Index(const std::string& needle) const {
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i].find(needle) != std::string::npos) return i;
    return calls.size();
  }
};

RunOptions TwoNodes() {
  RunOptions o;
  o.nodes = {"n1", "n2"};
  o.tag = "t";
  return o;
}

TEST(AcceptOperations, ParsesTheArrayAroundSrunsWords) {
  std::vector<Curve> got;
  std::string out = "srun: warning: something\n[\n" + OpDoc("all_gather", 2e8, 0) + ",\n" +
                    OpDoc("all_to_all", 3e8, 0) + "\n]\nsrun: done\n";
  ASSERT_TRUE(ParseNcclOpsJson(out, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].op, "all_gather");
  EXPECT_EQ(got[1].op, "all_to_all");
  EXPECT_EQ(got[1].Busbw(), 3e8);
  EXPECT_EQ(got[0].profile_threshold, 1e8);
  got.clear();
  EXPECT_FALSE(ParseNcclOpsJson("{\"sizes\": []}\n", &got).ok()) << "one document is not the --ops shape";
  EXPECT_FALSE(ParseNcclOpsJson("[\n{\"no_test\": 1}\n]\n", &got).ok()) << "an array naming no operation";
  EXPECT_FALSE(ParseNcclOpsJson("[\n{\"test\": \n]\n", &got).ok());
}

TEST(AcceptOperations, EachOperationIsACurveAndAWrongOneFails) {
  Script s;
  s.ops_output = "[\n" + OpDoc("all_gather", 2e8, 0) + ",\n" + OpDoc("reduce_scatter", 2.5e8, 0) + ",\n" +
                 OpDoc("all_to_all", 2e8, 7) + "\n]\n";
  Report r = RunAccept(TwoNodes(), std::ref(s), nullptr);
  ASSERT_EQ(r.op_curves.size(), 3u) << SummaryText(r);
  EXPECT_EQ(r.op_curves[0].op, "all_gather");
  EXPECT_EQ(r.op_curves[1].op, "reduce_scatter");
  EXPECT_EQ(r.op_curves[2].op, "all_to_all");
  for (const auto& c : r.op_curves) {
    EXPECT_EQ(c.nodes, 2);
    EXPECT_NE(c.reproduce.find("--ops all_gather,reduce_scatter,all_to_all"), std::string::npos) << c.reproduce;
  }
  // One launch for the three, before the ring pairs.
  size_t ops_calls = 0;
  for (const auto& c : s.calls) ops_calls += c.find("--ops") != std::string::npos;
  EXPECT_EQ(ops_calls, 1u);
  EXPECT_LT(s.Index("--ops"), s.Index("--scope pairs"));
  // The corrupt one fails the run, naming the operation; the others pass.
  EXPECT_EQ(r.verdict, Verdict::kFail);
  std::string text = SummaryText(r);
  EXPECT_NE(text.find("all_to_all 2 nodes: 7 wrong elements"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather 2 nodes: 7 wrong"), std::string::npos) << text;
  std::string json = ReportJson(r);
  EXPECT_NE(json.find("\"operations\""), std::string::npos);
  EXPECT_NE(json.find("\"op\": \"reduce_scatter\""), std::string::npos);
  EXPECT_NE(ReportHtml(r).find("Other collectives"), std::string::npos);
}

TEST(AcceptOperations, AFailedLaunchIsOneLineAndThePairsStillRun) {
  Script s;
  s.ops_exit = 1;
  s.ops_output = "srun: error: n2: task 1: Exited with exit code 1\n";
  Report r = RunAccept(TwoNodes(), std::ref(s), nullptr);
  ASSERT_EQ(r.op_curves.size(), 1u);
  EXPECT_NE(r.op_curves[0].error.find("no result: srun: error: n2"), std::string::npos) << r.op_curves[0].error;
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_LT(s.Index("--scope pairs"), s.calls.size()) << "the ring pairs still ran";
  // The all-reduce curves are untouched.
  bool two = false;
  for (const auto& c : r.curves) two |= c.nodes == 2 && c.error.empty() && c.Busbw() == 5e8;
  EXPECT_TRUE(two);
}

TEST(AcceptOperations, OneNodeRunsNoneAndSaysSo) {
  Script s;
  RunOptions o = TwoNodes();
  o.nodes = {"n1"};
  Report r = RunAccept(o, std::ref(s), nullptr);
  EXPECT_EQ(s.Index("--ops"), s.calls.size());
  EXPECT_TRUE(r.op_curves.empty());
  EXPECT_NE(SummaryText(r).find("no all-gather, reduce-scatter or all-to-all across nodes"), std::string::npos)
      << SummaryText(r);
}

}  // namespace
}  // namespace preflight::accept
