#include "preflight/slurmctl.h"
#include "preflight/slurm_conf.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

// Captured from `preflight slurm nodes n[1-3]` on the test cluster (22.05.8).
const char* kNodes =
    R"J({"nodes":[{"name":"n1","state":"IDLE","drain":false,"reason":""},)J"
    R"J({"name":"n2","state":"IDLE+DRAIN","drain":true,"reason":"preflight: scratch /s: free 1M < 1G"},)J"
    R"J({"name":"n3","state":"MIXED+DRAIN","drain":true,"reason":"admin: memtest"}]})J";

TEST(NodeRecords, DrainedByPreflightAdminAndIdle) {
  auto v = ParseNodeRecords(std::string(kNodes) + "\n");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->size(), 3u);
  const NodeState& n1 = (*v)[0];
  const NodeState& n2 = (*v)[1];
  const NodeState& n3 = (*v)[2];
  EXPECT_EQ(n2.state, "IDLE+DRAIN");
  EXPECT_TRUE(n2.drained());
  EXPECT_TRUE(n2.ours());
  EXPECT_EQ(n2.reason, "preflight: scratch /s: free 1M < 1G");
  EXPECT_TRUE(n3.drained());
  EXPECT_FALSE(n3.ours());
  EXPECT_FALSE(n1.drained());
  EXPECT_EQ(n1.reason, "");
}

TEST(NodeRecords, NewGrammarIsOursAndReasonTimeIsRead) {
  auto v = ParseNodeRecords(
      R"J({"nodes":[{"name":"n4","state":"IDLE+DRAIN","drain":true,"reason":"preflight[node] gpu.ecc GPU0: 3 > 0","reason_time":1700000000},)J"
      R"J({"name":"n5","state":"IDLE+DRAIN","drain":true,"reason":"Prolog error"}]})J");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_TRUE((*v)[0].ours());
  EXPECT_EQ((*v)[0].reason_time, 1700000000);
  EXPECT_FALSE((*v)[1].ours()) << "Slurm's own reason before --finish-drain replaced it";
  EXPECT_EQ((*v)[1].reason_time, 0) << "absent: not known";
}

TEST(NodeRecords, GarbageIsAnErrorNamingWhatItGot) {
  auto a = ParseNodeRecords("garbage");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("no JSON record in: garbage"), std::string::npos) << a.status().message();
  EXPECT_FALSE(ParseNodeRecords(R"J({"nodes": 1})J").ok());
  EXPECT_FALSE(ParseNodeRecords("{\"nodes\":[").ok());
}

// Issue 29: one bad record costs only itself, never every node's.
TEST(NodeRecords, ABadRecordIsSkippedTheOthersAreRead) {
  auto v = ParseNodeRecords(
      R"J({"nodes":[{"name":"n1"},{"name":"n2","state":3},7,)J"
      R"J({"name":"n3","state":"IDLE+DRAIN","drain":true,"reason":"preflight[user] stage /d\ufffd: x"},)J"
      R"J({"name":"n4","state":"IDLE","drain":"yes"}]})J");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->size(), 1u) << "no state, wrong types and a non-object are skipped";
  EXPECT_EQ((*v)[0].name, "n3");
  EXPECT_TRUE((*v)[0].ours());
  EXPECT_EQ((*v)[0].reason, "preflight[user] stage /d\xef\xbf\xbd: x");
}

TEST(NodeRecords, LibslurmLinesBeforeTheRecordAreSkipped) {
  auto v = ParseNodeRecords(std::string("error: something libslurm said\n") + kNodes + "\n");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->size(), 3u);
}

// `preflight slurm job 13` for a job whose user-written fields (name,
// command, work dir) hold every key the old text parser searched for: they
// are not even in the record, and what is comes from separate struct fields.
const char* kJob =
    R"J({"job_id":13,"state":"RUNNING","user_id":1000,"node_list":"n[1-3]","nodes":["n1","n2","n3"],)J"
    R"J("batch_host":"n1","restarts":2,"admin_comment":"preflight: nccl: requeued 2 \"quoted\"\nsecond line",)J"
    R"J("exc_node_list":"n4","gres_per_node":{"n1":"gpu:2(IDX:0-1)","n2":"gpu:tesla:2(IDX:0,2)","n3":"gpu:0"}})J";

TEST(JobRecord, FieldsComeFromTheirOwnMembers) {
  auto r = ParseJobRecord(kJob);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->job_id, "13");
  EXPECT_EQ(r->state, "RUNNING");
  EXPECT_EQ(r->node_list, "n[1-3]");
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(r->restarts, 2);
  EXPECT_EQ(r->admin_comment, "preflight: nccl: requeued 2 \"quoted\"\nsecond line");
  EXPECT_EQ(r->exc_node_list, "n4");
  EXPECT_EQ(r->gres_per_node.at("n2"), "gpu:tesla:2(IDX:0,2)");
  EXPECT_FALSE(ParseJobRecord(R"J({"state":"RUNNING"})J").ok());          // no job id
  EXPECT_FALSE(ParseJobRecord(R"J({"job_id":5,"restarts":"x"})J").ok());  // wrong type
}

TEST(Gres, GpuIndexesPerNode) {
  EXPECT_EQ(*GpuIndexesFromGres("gpu:2(IDX:0-1)"), (std::vector<int>{0, 1}));
  EXPECT_EQ(*GpuIndexesFromGres("gpu:a100:3(IDX:0,2-3)"), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(*GpuIndexesFromGres("nic:1(IDX:0),gpu:1(IDX:5),mps:100(0/100,0/100)"), (std::vector<int>{5}));
  EXPECT_TRUE(GpuIndexesFromGres("gpu:0")->empty());
  EXPECT_TRUE(GpuIndexesFromGres("")->empty());
  EXPECT_TRUE(GpuIndexesFromGres("gpumem:4G(IDX:0)")->empty());  // not a GPU
  EXPECT_FALSE(GpuIndexesFromGres("gpu:2(IDX:0-1").ok());
  EXPECT_FALSE(GpuIndexesFromGres("gpu:2(IDX:x)J").ok());
}

TEST(StepRecords, OtherStepsSkipBatchExternInteractiveAndSelf) {
  auto v = ParseStepRecords(
      R"J({"job_id":13,"steps":[{"id":"13.batch","step":"batch","node_list":"n1","nodes":["n1"]},)J"
      R"J({"id":"13.extern","step":"extern","node_list":"n[1-3]","nodes":["n1","n2","n3"]},)J"
      R"J({"id":"13.0","step":"0","node_list":"n[1-3]","nodes":["n1","n2","n3"]},)J"
      R"J({"id":"13.4","step":"4","node_list":"n2","nodes":["n2"]}]})J");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->size(), 4u);
  EXPECT_EQ((*v)[2].nodes[1], "n2");
  EXPECT_EQ(OtherSteps(*v, "13.0"), "13.4");
  EXPECT_EQ(OtherSteps(*v, "13.4"), "13.0");
  EXPECT_EQ(OtherSteps({}, "13.0"), "");
  EXPECT_FALSE(ParseStepRecords(R"J({"job_id":13})J").ok());
}

TEST(SlurmQuery, MissingBinaryIsAnErrorNotAHang) {
  Config cfg;
  cfg.slurm_query = "/nonexistent/preflight";
  cfg.probe_timeout_ms = 2000;
  auto s = QueryNode(cfg, "n1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("exit 127"), std::string::npos) << s.status().message();
  auto j = LoadJob(cfg, "5");
  ASSERT_FALSE(j.ok());
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

TEST(SlurmConf, PrologFlagsLastLineWinsCaseAndCommentsIgnored) {
  EXPECT_EQ(ParsePrologFlags("ClusterName=c\nPrologFlags=Alloc,Contain\n"),
            (std::vector<std::string>{"alloc", "contain"}));
  EXPECT_EQ(ParsePrologFlags("prologflags=Alloc\n# PrologFlags=RunInJob\nPrologFlags=Alloc,RunInJob  # since 24.05\n"),
            (std::vector<std::string>{"alloc", "runinjob"}));
  EXPECT_EQ(ParsePrologFlags("Prolog=/x PrologFlags=Serial Epilog=/y"), (std::vector<std::string>{"serial"}));
  EXPECT_TRUE(ParsePrologFlags("PrologSlurmctld=/x\n").empty());
}

TEST(SlurmConf, RunInJobDrainsFromTheProlog) {
  EXPECT_EQ(DrainHowFor({"alloc", "runinjob"}), DrainHow::kNow);
  EXPECT_EQ(DrainHowFor({"alloc", "contain"}), DrainHow::kDetached);
  EXPECT_EQ(DrainHowFor({}), DrainHow::kDetached);
}

TEST(SlurmConf, PathFromConfigThenEnvThenDefault) {
  Config cfg;
  EXPECT_EQ(SlurmConfPath(cfg, {}), "/etc/slurm/slurm.conf");
  EXPECT_EQ(SlurmConfPath(cfg, {{"SLURM_CONF", "/e/s.conf"}}), "/e/s.conf");
  cfg.slurm_conf = "/c/s.conf";
  EXPECT_EQ(SlurmConfPath(cfg, {{"SLURM_CONF", "/e/s.conf"}}), "/c/s.conf");
  EXPECT_FALSE(ReadPrologFlags("/nonexistent/slurm.conf").ok());
}

}  // namespace
}  // namespace preflight
