// The nodes' records carried by the collective step (collective_node_records.h)
// and their lines in the step's output (collective_records.h): tier 1, ranks
// as threads over the local bootstrap, nodes named by a thin wrapper.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "preflight/collective_node_records.h"
#include "preflight/collective_records.h"
#include "preflight/collective_run.h"
#include "preflight/gemm_record.h"
#include "preflight_test/temp_dir.h"

namespace preflight::collective {
namespace {

// Ranks as threads, two per node: rank r on node "n<r/2+1>", local rank r%2.
class TwoPerNode : public Bootstrap {
 public:
  explicit TwoPerNode(std::unique_ptr<Bootstrap> in) : in_(std::move(in)) {}
  const char* Name() const override { return "test"; }
  int Rank() const override { return in_->Rank(); }
  int Size() const override { return in_->Size(); }
  int LocalRank() const override { return Rank() % 2; }
  int LocalSize() const override { return 2; }
  std::string Node() const override { return "n" + std::to_string(Rank() / 2 + 1); }
  Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) override {
    return in_->AllGather(key, mine);
  }

 private:
  std::unique_ptr<Bootstrap> in_;
};

std::vector<std::string> Share(int ranks, const std::string& dir) {
  auto group = MakeLocalGroup(ranks, "localhost", 20000);
  std::vector<std::string> out(ranks);
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r)
    th.emplace_back([&, r] {
      TwoPerNode b(MakeLocalBootstrap(group, r));
      auto lines = ShareNodeRecords(b, dir);
      out[r] = lines ? *lines : "error: " + lines.status().message();
    });
  for (auto& t : th) t.join();
  return out;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(NodeRecords, RankZeroPrintsEveryNodesRecordsInNodeOrder) {
  preflight_test::TempDir d("noderec");
  Write(d / "n1.rails.json", "{\"node\":\"n1\",\"a\":1}\n");
  Write(d / "n2.rails.json", "{\"node\":\"n2\",\"a\":2}\n");
  Write(d / "n1.versions.json", "{\"node\":\"n1\",\"v\":1}\n");
  // n2 has no versions record; n3 has neither.
  auto out = Share(6, d);
  EXPECT_EQ(out[0],
            "#node-record rails n1 {\"node\":\"n1\",\"a\":1}\n"
            "#node-record rails n2 {\"node\":\"n2\",\"a\":2}\n"
            "#node-record rails n3 -\n"
            "#node-record versions n1 {\"node\":\"n1\",\"v\":1}\n"
            "#node-record versions n2 -\n"
            "#node-record versions n3 -\n"
            "#node-record gemm n1 -\n"
            "#node-record gemm n2 -\n"
            "#node-record gemm n3 -\n");
  for (int r = 1; r < 6; ++r) EXPECT_EQ(out[r], "") << "rank " << r;

  ParsedOutput p = ParseOutput("table line\n" + out[0] + "# OK: fine\n");
  EXPECT_EQ(p.display, "table line\n# OK: fine\n") << "node records are not shown to the user as such";
  EXPECT_TRUE(p.errors.empty());
  ASSERT_EQ(p.node_records.count("rails"), 1u);
  EXPECT_EQ(p.node_records["rails"].lines.size(), 2u);
  EXPECT_EQ(p.node_records["rails"].missing, "n3");
  EXPECT_EQ(p.node_records["versions"].lines, std::vector<std::string>{"{\"node\":\"n1\",\"v\":1}"});
  EXPECT_EQ(p.node_records["versions"].missing, "n2,n3");
}

TEST(NodeRecords, AnOversizedOrOddRecordIsMissingSayingWhy) {
  preflight_test::TempDir d("noderec");
  Write(d / "n1.rails.json", "{\"x\":\"" + std::string(70000, 'a') + "\"}\n");
  ASSERT_EQ(::mkdir((d / "n2.rails.json").c_str(), 0755), 0);
  auto out = Share(4, d);
  EXPECT_NE(out[0].find("#node-record rails n1 - larger than 64 KiB\n"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("#node-record rails n2 - not a regular file\n"), std::string::npos) << out[0];
  ParsedOutput p = ParseOutput(out[0]);
  EXPECT_EQ(p.node_records["rails"].missing, "n1,n2");
}

TEST(NodeRecords, LinesOfTheFileThatAreNotJsonAreLeftOut) {
  EXPECT_EQ(NodeRecordLines("rails", "n1", "{\"a\":1}\n\nnoise\n{\"b\":2}"),
            "#node-record rails n1 {\"a\":1}\n#node-record rails n1 {\"b\":2}\n");
  EXPECT_EQ(NodeRecordLines("rails", "n1", "noise only\n"), "#node-record rails n1 - no JSON line\n");
}

TEST(NodeRecords, MalformedLinesAreNamedNotDropped) {
  ParsedOutput p = ParseOutput("#node-record rails\n#node-record rails n1 garbage\n");
  ASSERT_EQ(p.errors.size(), 2u);
  EXPECT_NE(p.errors[0].find("malformed node record"), std::string::npos);
  EXPECT_TRUE(p.node_records["rails"].lines.empty());
}

// The gpu.gemm records the step carried, compared for the job output: the
// allocation's median and majority (gemm_record.h), this job's soaks only.
TEST(NodeRecords, GemmSoaksAreComparedAcrossTheAllocation) {
  auto rec = [](const std::string& node, double tflops, const std::string& job) {
    NodeGemm g;
    g.node = node, g.job = job, g.size = 8192, g.gpu_model = "H100";
    g.gpus = {{0, tflops, "aaaa"}, {1, tflops, "aaaa"}};
    return GemmRecordJson(g);
  };
  NodeRecordSet set;
  set.lines = {rec("n1", 700, "7"), rec("n2", 700, "7"), rec("n3", 500, "7"), rec("n4", 700, "6"), "garbage"};
  set.missing = "n5";
  EXPECT_EQ(GemmAcrossText(set, "7"),
            "preflight: gemm: n3 GPU0: 500.0 TFLOPS < 90% of the allocation's median 700.0 TFLOPS\n"
            "preflight: gemm: n3 GPU1: 500.0 TFLOPS < 90% of the allocation's median 700.0 TFLOPS\n"
            "preflight: gemm: no soak of this job recorded on n4,n5\n");
  EXPECT_EQ(GemmAcrossText(set, "8"), "") << "no soak of job 8 (below the full level): nothing said";
}

}  // namespace
}  // namespace preflight::collective
