// gpu.gemm's node record and its comparison across an allocation
// (gemm_record.h): figures in, findings out.
#include "preflight/gemm_record.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

NodeGemm Node(const std::string& node, std::vector<double> tflops, const std::string& hash = "aaaa",
              const std::string& job = "7") {
  NodeGemm g;
  g.node = node;
  g.job = job;
  g.gpu_model = "NVIDIA H100 80GB HBM3";
  g.size = 8192;
  for (size_t i = 0; i < tflops.size(); ++i) g.gpus.push_back({static_cast<int>(i), tflops[i], hash});
  return g;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GemmRecord, RoundTripsAndRejectsWhatIsNotOne) {
  NodeGemm g = Node("n1", {700.25, 650});
  g.at = 1700000000;
  g.gpus[1].hash = "0123456789abcdef";
  auto back = ParseGemmRecordJson(GemmRecordJson(g));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->node, "n1");
  EXPECT_EQ(back->job, "7");
  EXPECT_EQ(back->size, 8192u);
  ASSERT_EQ(back->gpus.size(), 2u);
  EXPECT_DOUBLE_EQ(back->gpus[0].tflops, 700.25);
  EXPECT_EQ(back->gpus[1].hash, "0123456789abcdef");
  EXPECT_EQ(GemmRecordJson(g).find('\n'), std::string::npos) << "one line";
  EXPECT_FALSE(ParseGemmRecordJson("not json").ok());
  EXPECT_FALSE(ParseGemmRecordJson("{\"job\":\"7\",\"gpus\":[]}").ok()) << "no node";
  EXPECT_FALSE(ParseGemmRecordJson("{\"node\":\"n1\"}").ok()) << "no gpus";
}

TEST(GemmRecord, AgreeingNodesGiveOneSummaryLine) {
  auto c = CompareGemm({Node("n1", {700, 710}), Node("n2", {705, 695}), Node("n3", {700, 700})}, "7");
  EXPECT_TRUE(c.consistent);
  EXPECT_EQ(c.nodes, 3u);
  EXPECT_EQ(c.text, "3 nodes' 6 GPUs agree on the GEMM result, all within 90% of the allocation's median 700.0 TFLOPS\n");
}

TEST(GemmRecord, ANodeSlowAsAWholeIsNamedAgainstTheAllocationsMedian) {
  // n3's GPUs agree with each other (the node check passes them) but all
  // run at 80% of the others: only the allocation sees it.
  auto c = CompareGemm({Node("n1", {700, 700}), Node("n2", {700, 700}), Node("n3", {560, 560})}, "7");
  EXPECT_FALSE(c.consistent);
  EXPECT_EQ(c.odd, (std::vector<std::string>{"n3 GPU0", "n3 GPU1"}));
  EXPECT_TRUE(Has(c.text, "n3 GPU0: 560.0 TFLOPS < 90% of the allocation's median 700.0 TFLOPS\n")) << c.text;
}

TEST(GemmRecord, AWrongResultIsNamedAgainstTheAllocationsMajority) {
  auto n2 = Node("n2", {700, 700});
  n2.gpus[1].hash = "bbbb";
  auto c = CompareGemm({Node("n1", {700, 700}), n2, Node("n3", {700, 700})}, "7");
  EXPECT_FALSE(c.consistent);
  EXPECT_EQ(c.odd, std::vector<std::string>{"n2 GPU1"});
  EXPECT_EQ(c.text, "n2 GPU1: GEMM result hash bbbb, 5 of the allocation's 6 GPUs have aaaa\n");
  // Two nodes, one GPU each, different results: nobody can be singled out.
  c = CompareGemm({Node("n1", {700}, "aaaa"), Node("n2", {700}, "bbbb")}, "7");
  EXPECT_FALSE(c.consistent);
  EXPECT_TRUE(c.odd.empty());
  EXPECT_EQ(c.text, "GEMM results differ with no majority: n1 GPU0 aaaa, n2 GPU0 bbbb\n");
}

TEST(GemmRecord, OtherJobsOtherSizesAndLoneNodesAreNotCompared) {
  auto old = Node("n3", {100, 100}, "cccc", "6");  // an earlier job's soak
  auto small = Node("n4", {300}, "dddd");
  small.size = 4096;  // another gemm_size: another product
  auto c = CompareGemm({Node("n1", {700}), Node("n2", {700}), old, small}, "7");
  EXPECT_TRUE(c.consistent) << c.text;
  EXPECT_EQ(c.nodes, 2u);
  c = CompareGemm({Node("n1", {700}), old}, "7");
  EXPECT_EQ(c.nodes, 0u) << "one node of this job: nothing to compare";
  EXPECT_EQ(c.text, "");
}

}  // namespace
}  // namespace preflight
