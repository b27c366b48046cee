// Topology: golden tests on captured real machines (hwloc XML in
// tests/fixtures/topology, loaded by the real hwloc; sysfs through fixture
// FsRoot trees written here), and synthetic edge cases on the plain struct.
//
// Golden switch: PREFLIGHT_REGENERATE_GOLDEN=1 core_test --gtest_filter='TopoGolden.*'
// rewrites tests/fixtures/topology/golden/*.json from the current code;
// review the diff before committing it.
#include "preflight/topo.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/gpu_vendor.h"
#include "preflight/topo_env_merge.h"
#include "preflight/topo_load.h"

#include <map>
#include <nlohmann/json.hpp>

namespace preflight {
namespace {

const std::string kFix = PREFLIGHT_TOPO_FIXTURES;
const std::string kDell = kFix + "/hwloc-dell-xe8640-4xh100-cx7-cx6.xml";
const std::string kP4d = kFix + "/hwloc-aws-p4d-24xlarge-8xa100-4xefa.xml";
const std::string kLassen = kFix + "/hwloc-ibm-ac922-lassen-4xv100-cx5.xml";
const std::string kNoPorts = kFix + "/hwloc-24em64t-2n6c2t-pci-mlx4-noports.xml";
const std::string kCorona = kFix + "/hwloc-llnl-corona-8xmi50-cx6.xml";
const std::string kTuolumne = kFix + "/hwloc-llnl-tuolumne-4xmi300a-slingshot.xml";
// Hand-written after public machines (issue 22; see the fixtures README).
const std::string kCorona4 = kFix + "/hwloc1-llnl-corona-4xmi50-vga-cx6.xml";
const std::string kTuoCpx = kFix + "/hwloc-llnl-tuolumne-4xmi300a-cpx-slingshot.xml";
const std::string kTuoTpx = kFix + "/hwloc-llnl-tuolumne-4xmi300a-tpx-slingshot.xml";

// Fixture roots for one test run, removed when the test binary exits.
std::string TempDir() {
  static std::vector<std::unique_ptr<preflight_test::TempDir>> made;
  made.push_back(std::make_unique<preflight_test::TempDir>("topo"));
  return made.back()->path();
}

void Put(const std::string& root, const std::string& rel, const std::string& text) {
  std::string path = root + rel;
  ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/'))).ok());
  std::ofstream(path) << text << "\n";
}

// A fixture sysfs port as the kernel's ib_core shows it.
void PutPort(const std::string& root, const std::string& dev, int port, const std::string& state,
             const std::string& link_layer, const std::string& rate = "200 Gb/sec (4X HDR)") {
  std::string d = "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  Put(root, d + "/state", state);
  Put(root, d + "/phys_state", state == "4: ACTIVE" ? "5: LinkUp" : "3: Disabled");
  Put(root, d + "/link_layer", link_layer);
  Put(root, d + "/rate", rate);
}

std::string Env(const EnvPlan& p, const std::string& name) {
  for (const auto& v : p.vars)
    if (v.name == name) return v.value;
  return "<unset>";
}
std::string Why(const EnvPlan& p, const std::string& name) {
  for (const auto& u : p.unset)
    if (u.first == name) return u.second;
  return "<set>";
}
const GpuPairing& Pair(const std::vector<GpuPairing>& v, int gpu) {
  for (const auto& p : v)
    if (p.gpu == gpu) return p;
  static GpuPairing none;
  return none;
}
std::string Nics(const std::vector<GpuPairing>& v, int gpu) {
  std::string s;
  for (const auto& n : Pair(v, gpu).nics) s += (s.empty() ? "" : ",") + n;
  return s;
}

Topology Load(const std::string& xml, const std::string& root) {
  FsRoot fs(root);
  auto t = LoadTopologyHwloc(xml, fs);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : Topology();
}

// The task environment's merge policy (topo_env_merge.h), on the Dell with
// every port up, with a task environment given as a map.
EnvLookup Lookup(const std::map<std::string, std::string>& env) {
  return [env](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

Topology DellAllUp(const std::string& root) {
  for (const char* dev : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) PutPort(root, dev, 1, "4: ACTIVE", "InfiniBand");
  for (const char* nd : {"hsi0", "ibs2f1", "ibp94s0", "ibp218s0"}) Put(root, std::string("/sys/class/net/") + nd + "/operstate", "up");
  return Load(kDell, root);
}

TEST(TopoEnvMerge, TasksOfOneStepPlanOneNcclSetFromTheirVariables) {
  Topology t = DellAllUp(TempDir());
  auto p = PairGpus(t);
  NodeGpuInputs in;
  in.step_gpus = "0,1";  // init_post_opt's copy: the step's GPUs on the node
  TaskEnvPlan a = PlanTaskEnv(t, p, EnvPolicy(), in, "", Lookup({{"SLURM_STEP_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}}));
  TaskEnvPlan b = PlanTaskEnv(t, p, EnvPolicy(), in, "", Lookup({{"SLURM_STEP_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "1"}}));
  EXPECT_EQ(Env(a.plan, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1");
  EXPECT_EQ(Env(a.plan, "NCCL_IB_HCA"), Env(b.plan, "NCCL_IB_HCA"));
  EXPECT_EQ(Env(b.plan, "UCX_NET_DEVICES"), "mlx5_2:1");
  EXPECT_EQ(a.node_gpus_from, "SLURM_STEP_GPUS");
  // ROCm's variable counts as the visible devices when CUDA's is absent.
  TaskEnvPlan r = PlanTaskEnv(t, p, EnvPolicy(), in, "", Lookup({{"SLURM_STEP_GPUS", "0,1"}, {"ROCR_VISIBLE_DEVICES", "1"}}));
  EXPECT_EQ(r.plan.gpus, std::vector<int>{1});
  // GPUs that cannot be placed, or a site rails error: nothing, with why.
  TaskEnvPlan u = PlanTaskEnv(t, p, EnvPolicy(), in, "", Lookup({{"CUDA_VISIBLE_DEVICES", "GPU-1234"}}));
  EXPECT_TRUE(u.plan.vars.empty());
  EXPECT_EQ(Why(u.plan, "NCCL_IB_HCA").rfind("cannot tell the task's GPUs: ", 0), 0u) << Why(u.plan, "NCCL_IB_HCA");
  TaskEnvPlan e = PlanTaskEnv(t, p, EnvPolicy(), in, "topo_rails names mlx5_9", Lookup({{"CUDA_VISIBLE_DEVICES", "0"}}));
  EXPECT_TRUE(e.plan.vars.empty());
  EXPECT_EQ(Why(e.plan, "NCCL_IB_HCA"), "site config: topo_rails names mlx5_9");
}

TEST(TopoEnvMerge, NeverOverridesTheUserAndTakesBackOnlyItsOwn) {
  EnvPlan plan;
  plan.vars = {{"NCCL_IB_HCA", "=mlx5_0:1"}, {"NCCL_SOCKET_IFNAME", "=ib0"}, {"UCX_NET_DEVICES", "mlx5_0:1"}};
  // First step: nothing set; all planned values are set.
  EnvMerge m0 = MergeEnv(plan, Lookup({}));
  EXPECT_EQ(m0.set.size(), 3u);
  EXPECT_TRUE(m0.kept.empty());
  EXPECT_FALSE(m0.marker_found);
  EXPECT_EQ(MarkerFor(m0.set), "NCCL_IB_HCA==mlx5_0:1;NCCL_SOCKET_IFNAME==ib0;UCX_NET_DEVICES=mlx5_0:1");
  // A later step: NCCL_IB_HCA still ours (recomputed), NCCL_SOCKET_IFNAME
  // changed by the user (kept), NCCL_NET_GDR_LEVEL ours but no longer
  // planned (removed), NCCL_IB_GID_INDEX the user's (untouched).
  std::map<std::string, std::string> env = {
      {kTopoEnvMarker, "NCCL_IB_HCA==mlx5_3:1;NCCL_SOCKET_IFNAME==ib3;NCCL_NET_GDR_LEVEL=PHB"},
      {"NCCL_IB_HCA", "=mlx5_3:1"}, {"NCCL_SOCKET_IFNAME", "=eth0"}, {"NCCL_NET_GDR_LEVEL", "PHB"},
      {"NCCL_IB_GID_INDEX", "3"}};
  EnvMerge m = MergeEnv(plan, Lookup(env));
  EXPECT_TRUE(m.marker_found);
  ASSERT_EQ(m.set.size(), 2u);
  EXPECT_EQ(m.set[0].name, "NCCL_IB_HCA");
  EXPECT_EQ(m.set[0].value, "=mlx5_0:1");
  EXPECT_EQ(m.set[1].name, "UCX_NET_DEVICES");
  ASSERT_EQ(m.kept.size(), 1u);
  EXPECT_EQ(m.kept[0].name, "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(m.kept[0].value, "=eth0");
  EXPECT_EQ(m.remove, std::vector<std::string>{"NCCL_NET_GDR_LEVEL"});
  // Without a marker nothing counts as ours: every set variable is the user's.
  env.erase(kTopoEnvMarker);
  EnvMerge u = MergeEnv(plan, Lookup(env));
  EXPECT_EQ(u.kept.size(), 2u);
  EXPECT_TRUE(u.remove.empty());
  EXPECT_FALSE(MarkerValue("A=x;B=y", "C").has_value());
  EXPECT_EQ(*MarkerValue("A=x;B=", "B"), "");
}

TEST(TopoEnvMerge, RecordLineAndShowText) {
  EnvPlan plan;
  plan.gpus = {1};
  plan.node_gpus = {0, 1};
  plan.gpu_nics = {{0, "mlx5_0 PIX"}, {1, "mlx5_2 PIX"}};
  plan.unset = {{"NCCL_IB_GID_INDEX", "InfiniBand link layer needs no GID index"}};
  EnvTaskRecord r;
  r.node = "n1";
  r.step = "batch";
  r.task = 3;
  r.topology_source = "cache";
  r.node_gpus_from = "prolog";
  r.plan = &plan;
  r.set = {{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_2:1"}};
  r.kept = {{"NCCL_SOCKET_IFNAME", "=eth0"}};
  std::string line = EnvRecordLine(r);
  ASSERT_EQ(line.back(), '\n');
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["task"], 3);
  EXPECT_EQ(j["node_gpus"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["set"]["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(j["left_alone"]["NCCL_SOCKET_IFNAME"], "=eth0");
  EXPECT_EQ(j["not_set"]["NCCL_IB_GID_INDEX"], "InfiniBand link layer needs no GID index");
  EXPECT_EQ(j["pairing"]["1"], "mlx5_2 PIX");
  std::string show = EnvShowText(r, true);
  EXPECT_NE(show.find("preflight-env: n1 task 3 (GPU 1; the job's GPUs here 0,1, from prolog): GPU0->mlx5_0 PIX, GPU1->mlx5_2 PIX\n"),
            std::string::npos) << show;
  EXPECT_NE(show.find("kept NCCL_SOCKET_IFNAME==eth0 (set by the user)"), std::string::npos);
  EXPECT_NE(show.find("not set NCCL_IB_GID_INDEX"), std::string::npos);
  EXPECT_EQ(EnvShowText(r, false).find("not set"), std::string::npos);  // reasons only from local task 0
}

// ---- Golden: Dell XE8640, 4x H100, CX-6 dual-function + 2x CX-7 ----------
//
// PCIe tree (tests/fixtures/topology/README.md): every H100 has its own
// Broadcom PEX890xx switch below an Intel root port.
//   GPU0 4e:00.0 switch 49:00.0 with mlx5_0/mlx5_1 (4d:00.0/.1) -> PIX
//   GPU1 5f:00.0 switch 5a:00.0 with mlx5_2 (5e:00.0)             -> PIX
//   GPU2 cb:00.0 switch c8:00.0, no NIC; mlx5_3 is on package 1 too -> SYS
//   GPU3 db:00.0 switch d8:00.0 with mlx5_3 (da:00.0)             -> PIX
// hwloc recorded only mlx5_0 port 1 ACTIVE; the rest DOWN.

TEST(TopoGolden, DellGpusNicsAndPaths) {
  std::string root = TempDir();  // empty fixture root: states come from hwloc
  Topology t = Load(kDell, root);
  ASSERT_EQ(t.gpus.size(), 4u);
  ASSERT_EQ(t.nics.size(), 4u);
  EXPECT_EQ(t.gpus[0].busid, "0000:4e:00.0");
  EXPECT_EQ(t.gpus[0].osdev, "nvml0");
  EXPECT_EQ(t.gpus[0].numa, 3);
  EXPECT_EQ(t.gpus[2].numa, 7);
  EXPECT_EQ(t.gpus[2].package, 1);
  // host bridge, then the switch's upstream port (root port folded away).
  EXPECT_EQ(t.gpus[0].path, (std::vector<std::string>{"hb:0000:[48-4e]", "0000:49:00.0"}));
  EXPECT_EQ(t.nics[0].name, "mlx5_0");
  EXPECT_EQ(t.nics[0].netdevs, std::vector<std::string>{"hsi0"});
  EXPECT_EQ(t.nics[0].path, t.gpus[0].path);
  ASSERT_EQ(t.nics[0].ports.size(), 1u);
  EXPECT_EQ(t.nics[0].ports[0].state, "ACTIVE");
  EXPECT_EQ(t.nics[2].ports[0].state, "DOWN");
  EXPECT_EQ(Distance(t.gpus[0], t.nics[1]).cls, PathClass::kPIX);
  EXPECT_EQ(Distance(t.gpus[1], t.nics[2]).cls, PathClass::kPIX);
  EXPECT_EQ(Distance(t.gpus[3], t.nics[3]).cls, PathClass::kPIX);
  PairDistance d = Distance(t.gpus[2], t.nics[3]);
  EXPECT_EQ(d.cls, PathClass::kSYS);  // other NUMA node, as nvidia-smi says
  EXPECT_TRUE(d.same_package);
  EXPECT_FALSE(Distance(t.gpus[2], t.nics[0]).same_package);
}

TEST(TopoGolden, DellWithRecordedPortStatesUsesOnlyTheActiveHca) {
  Topology t = Load(kDell, TempDir());
  auto p = PairGpus(t);
  // Only mlx5_0 can carry traffic, so every GPU uses it; GPU0 is the one
  // on its switch.
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Pair(p, 0).cls, PathClass::kPIX);
  for (int g : {1, 2, 3}) {
    EXPECT_EQ(Nics(p, g), "mlx5_0") << g;
    EXPECT_EQ(Pair(p, g).cls, PathClass::kSYS) << g;
  }
  EnvPlan e = ComputeEnv(t, p, {1}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "<unset>");
}

TEST(TopoGolden, DellAllPortsUpPairsBySwitch) {
  std::string root = TempDir();
  for (const char* dev : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) PutPort(root, dev, 1, "4: ACTIVE", "InfiniBand");
  Put(root, "/sys/class/net/hsi0/operstate", "up");
  Put(root, "/sys/class/net/ibs2f1/operstate", "down");
  Topology t = Load(kDell, root);
  auto p = PairGpus(t);
  // GPU0 has both functions of the CX-6 on its switch (the second is left
  // over after every GPU took one); GPU1 and GPU3 their switch's CX-7; GPU2
  // has none on its switch and takes mlx5_3, the one on its own package.
  EXPECT_EQ(Nics(p, 0), "mlx5_0,mlx5_1");
  EXPECT_EQ(Nics(p, 1), "mlx5_2");
  EXPECT_EQ(Nics(p, 2), "mlx5_3");
  EXPECT_EQ(Pair(p, 2).cls, PathClass::kSYS);
  EXPECT_EQ(Nics(p, 3), "mlx5_3");
  EXPECT_EQ(t.nics[0].ports[0].rate, "200 Gb/sec (4X HDR)");

  EnvPlan e0 = ComputeEnv(t, p, {0}, EnvPolicy());
  EXPECT_EQ(Env(e0, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(Env(e0, "UCX_NET_DEVICES"), "mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(Env(e0, "NCCL_SOCKET_IFNAME"), "=hsi0");  // ibs2f1 is down
  EXPECT_EQ(Why(e0, "NCCL_IB_GID_INDEX"), "InfiniBand link layer needs no GID index");
  EXPECT_EQ(Why(e0, "NCCL_NET_GDR_LEVEL"), "distance PIX: NCCL's default already uses GPUDirect RDMA");
  // Jobs holding different GPUs get different HCAs (one task each).
  EXPECT_EQ(Env(ComputeEnv(t, p, {1}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_2:1");
  EXPECT_EQ(Env(ComputeEnv(t, p, {2, 3}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_3:1");
}

// One NIC set per job and node: tasks holding different GPUs of one job on
// the Dell get identical NCCL_* values (the union's NICs); only
// UCX_NET_DEVICES follows the task's own GPU.
TEST(TopoGolden, DellTasksOfOneJobGetOneNcclSet) {
  std::string root = TempDir();
  for (const char* dev : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) PutPort(root, dev, 1, "4: ACTIVE", "InfiniBand");
  for (const char* nd : {"hsi0", "ibs2f1", "ibp94s0", "ibp218s0"}) Put(root, std::string("/sys/class/net/") + nd + "/operstate", "up");
  Topology t = Load(kDell, root);
  auto p = PairGpus(t);
  EnvPlan a = ComputeEnv(t, p, {0, 1}, {0}, EnvPolicy());
  EnvPlan b = ComputeEnv(t, p, {0, 1}, {1}, EnvPolicy());
  EXPECT_EQ(Env(a, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1");
  for (const char* v : {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL", "NCCL_IB_GID_INDEX"}) {
    EXPECT_EQ(Env(a, v), Env(b, v)) << v;
    EXPECT_EQ(Why(a, v), Why(b, v)) << v;
  }
  EXPECT_EQ(Env(a, "NCCL_SOCKET_IFNAME"), "=hsi0,ibs2f1,ibp94s0");
  EXPECT_EQ(Env(a, "UCX_NET_DEVICES"), "mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(Env(b, "UCX_NET_DEVICES"), "mlx5_2:1");
  EXPECT_EQ(a.node_gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.gpus, std::vector<int>{1});
  // The GDR level follows the worst pair of the union: a task whose own
  // GPU is PIX to its NIC still gets the node's answer.
  EnvPlan c = ComputeEnv(t, p, {2, 3}, {3}, EnvPolicy());
  EnvPlan d = ComputeEnv(t, p, {2, 3}, {2}, EnvPolicy());
  EXPECT_EQ(Why(c, "NCCL_NET_GDR_LEVEL"), Why(d, "NCCL_NET_GDR_LEVEL"));
  EXPECT_EQ(Why(c, "NCCL_NET_GDR_LEVEL"), "distance SYS: GPUDirect RDMA would cross the CPU; NCCL's default");
  // The whole node: every rail, for every task.
  EnvPlan all0 = ComputeEnv(t, p, {0, 1, 2, 3}, {0}, EnvPolicy());
  EnvPlan all3 = ComputeEnv(t, p, {0, 1, 2, 3}, {3}, EnvPolicy());
  EXPECT_EQ(Env(all0, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1");
  EXPECT_EQ(Env(all3, "NCCL_IB_HCA"), Env(all0, "NCCL_IB_HCA"));
  EXPECT_EQ(Env(all3, "UCX_NET_DEVICES"), "mlx5_3:1");
  // A task's GPUs always count as the job's, even if the node set missed them.
  EXPECT_EQ(ComputeEnv(t, p, {0}, {1}, EnvPolicy()).node_gpus, (std::vector<int>{0, 1}));
  // A GPU-less task of a GPU job gets nothing.
  EXPECT_TRUE(ComputeEnv(t, p, {0, 1}, {}, EnvPolicy()).vars.empty());
}

TEST(TopoJobGpus, SourcesInOrderOfTrust) {
  using V = std::vector<int>;
  NodeGpuInputs in;
  in.job_gpus = "0,1";   // the batch node's, propagated by srun
  in.step_gpus = "2,3";  // this step on this node
  NodeGpuSet s = JobGpusOnNode(in, {3});
  EXPECT_EQ(s.gpus, (V{2, 3}));
  EXPECT_EQ(s.source, "SLURM_STEP_GPUS");
  in.batch_step = true;
  s = JobGpusOnNode(in, {1});
  EXPECT_EQ(s.gpus, (V{0, 1}));
  EXPECT_EQ(s.source, "SLURM_JOB_GPUS");
  in.have_prolog = true;
  in.prolog_gpus = {0, 1, 2, 3};
  s = JobGpusOnNode(in, {1});
  EXPECT_EQ(s.gpus, (V{0, 1, 2, 3}));
  EXPECT_EQ(s.source, "prolog");
  // Nothing known: the task's own (and the record says so).
  NodeGpuInputs none;
  none.step_gpus = "x";  // malformed: skipped
  s = JobGpusOnNode(none, {3, 1});
  EXPECT_EQ(s.gpus, (V{1, 3}));
  EXPECT_EQ(s.source, "task");
}

TEST(TopoJobGpus, PrologRecordRoundTrip) {
  Config cfg;
  cfg.state_dir = TempDir();
  EXPECT_EQ(ReadJobGpusRecord(cfg, "7", "n1").status().code(), Status::Code::kNotFound);
  ASSERT_TRUE(WriteJobGpusRecord(cfg, "7", "n1", "0-2,5").ok());
  EXPECT_EQ(*ReadWholeFile(cfg.state_dir + "/jobs/7/n1.gpus"), "SLURM_JOB_GPUS=0-2,5\n");
  EXPECT_EQ(*ReadJobGpusRecord(cfg, "7", "n1"), (std::vector<int>{0, 1, 2, 5}));
  ASSERT_TRUE(WriteJobGpusRecord(cfg, "8", "n1", "").ok());  // a job without GPUs here
  EXPECT_TRUE(ReadJobGpusRecord(cfg, "8", "n1")->empty());
  Status bad = WriteJobGpusRecord(cfg, "9", "n1", "0,x");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("SLURM_JOB_GPUS='0,x'"), std::string::npos) << bad.message();
  EXPECT_EQ(ReadJobGpusRecord(cfg, "9", "n1").status().code(), Status::Code::kNotFound);  // nothing written
  ASSERT_TRUE(MakeDirs(cfg.state_dir + "/jobs/9").ok());
  ASSERT_TRUE(WriteFileAtomic(cfg.state_dir + "/jobs/9/n1.gpus", "garbage\n").ok());
  auto g = ReadJobGpusRecord(cfg, "9", "n1");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("jobs/9/n1.gpus: not a job GPU record"), std::string::npos);
}

// ---- Golden: AWS p4d.24xlarge, 8x A100, 4x EFA, no switches --------------
// Two A100s and one EFA per host bridge ([10], [20] on NUMA 0, [90], [a0]
// on NUMA 1): GPU 2i and 2i+1 pair with EFA i at PHB, the layout AWS's own
// p4d NCCL topology file describes.
TEST(TopoGolden, P4dPairsTwoGpusPerEfaOnTheHostBridge) {
  Topology t = Load(kP4d, TempDir());
  ASSERT_EQ(t.gpus.size(), 8u);  // the 6 NVSwitches (class 0680) are not GPUs
  ASSERT_EQ(t.nics.size(), 4u);
  EXPECT_EQ(t.gpus[0].osdev, "card0");  // only DRM OS devices in this file
  EXPECT_EQ(t.nics[0].kind, "efa");
  auto p = PairGpus(t);
  const char* want[] = {"rdmap16s27", "rdmap16s27", "rdmap32s27", "rdmap32s27",
                        "rdmap144s27", "rdmap144s27", "rdmap160s27", "rdmap160s27"};
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(Nics(p, g), want[g]) << g;
    EXPECT_EQ(Pair(p, g).cls, PathClass::kPHB) << g;
  }
  EXPECT_EQ(Distance(t.gpus[0], t.nics[1]).cls, PathClass::kNODE);
  EXPECT_EQ(Distance(t.gpus[0], t.nics[2]).cls, PathClass::kSYS);
  EnvPlan e = ComputeEnv(t, p, {4, 5}, EnvPolicy());
  // EFA is driven by aws-ofi-nccl, not NCCL's IB transport.
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(Why(e, "NCCL_IB_HCA"), "EFA: aws-ofi-nccl pairs GPUs and EFA devices itself");
  // PHB: NCCL's default (PXB) would turn GPUDirect RDMA off.
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "PHB");
}

// ---- Golden: IBM AC922 (Lassen), 4x V100, 2x dual-port CX-5 --------------
// GPUs and HCAs sit on separate PCI domains (NVLink to the CPU), so no pair
// shares a bridge: GPUs 0,1 (NUMA 0) share mlx5_0/mlx5_1, GPUs 2,3 (NUMA 8)
// mlx5_2/mlx5_3, all NODE; balanced, one HCA each.
TEST(TopoGolden, LassenFallsBackToNumaAndBalances) {
  Topology t = Load(kLassen, TempDir());
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(t.gpus[2].numa, 8);  // POWER numbering: NUMA 0 and 8
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Nics(p, 1), "mlx5_1");
  EXPECT_EQ(Nics(p, 2), "mlx5_2");
  EXPECT_EQ(Nics(p, 3), "mlx5_3");
  for (int g = 0; g < 4; ++g) EXPECT_EQ(Pair(p, g).cls, PathClass::kNODE);
  EnvPlan e = ComputeEnv(t, p, {1}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx5_1:1");
  EXPECT_EQ(Why(e, "NCCL_NET_GDR_LEVEL"), "distance NODE: GPUDirect RDMA would cross the CPU; NCCL's default");
}

// ---- Golden: hwloc's 24em64t-2n6c2t-pci, a NIC without port records ------
// Two X58 host bridges; 3 Tesla M2070 (10de:06d2), one on the host bridge
// of the ConnectX mlx4_0 (05:00.0), whose OpenFabrics OS device carries no
// Port<N>State attribute. Unknown state counts as usable (topo.h), so GPU0
// pairs PHB and NCCL_IB_HCA names the device whole ("=mlx4_0": all ports).
// Before, every GPU got "no usable RDMA NIC".
TEST(TopoGolden, NicWithoutPortRecordsCountsAsUsable) {
  auto t = LoadTopologyXmlOnly(kNoPorts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->nics.size(), 1u);
  EXPECT_EQ(t->nics[0].name, "mlx4_0");
  EXPECT_TRUE(t->nics[0].ports.empty());
  EXPECT_STREQ(t->nics[0].state(), "unknown");
  EXPECT_TRUE(t->nics[0].usable());
  ASSERT_EQ(t->gpus.size(), 3u);  // the ATI ES1000 BMC VGA (1002:515e) is not a GPU
  auto p = PairGpus(*t);
  EXPECT_EQ(Nics(p, 0), "mlx4_0");
  EXPECT_EQ(Pair(p, 0).cls, PathClass::kPHB);
  EnvPlan e = ComputeEnv(*t, p, {0}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx4_0");
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "PHB");
  EXPECT_EQ(Why(e, "UCX_NET_DEVICES"), "port numbers of the task's NICs unknown");
  EXPECT_EQ(Why(e, "NCCL_IB_GID_INDEX"), "link layer unknown (mlx4_0 has no port records)");
  EXPECT_EQ(Why(e, "NCCL_SOCKET_IFNAME"), "netdev operstate unknown (the XML does not record it)");
  // The cache keeps "no port records" as such.
  auto back = ParseTopologyCache(SerializeTopology(*t, "k"), "k", "cache");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->nics[0].usable());
  EXPECT_STREQ(back->nics[0].state(), "unknown");
}

// ---- Golden: LLNL Corona, 8x AMD MI50 (rsmi), one ConnectX-6 ---------------
// hwloc 1.x XML. The MI50s are PCI class 0380 (display controller), vendor
// 1002, numbered by ROCm SMI (rsmiN, not PCI order); the ASPEED BMC VGA
// (1a03, class 0300) is not a GPU. mlx5_0 (c4:00.0, netdev hsi0: LLNL's
// IPoIB name, not Slingshot) shares host bridge [c0-c8] with rsmi5.
TEST(TopoGolden, CoronaAmdGpusPairWithTheHca) {
  auto t = LoadTopologyXmlOnly(kCorona);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->gpus.size(), 8u);
  for (const auto& g : t->gpus) EXPECT_EQ(g.vendor, "amd") << g.busid;
  EXPECT_EQ(t->gpus[0].osdev, "rsmi0");
  EXPECT_EQ(t->gpus[0].busid, "0000:63:00.0");  // rsmi order, not PCI order
  EXPECT_EQ(t->gpus[5].busid, "0000:c3:00.0");
  ASSERT_EQ(t->nics.size(), 1u);
  EXPECT_EQ(t->nics[0].kind, "ib");
  ASSERT_TRUE(ClassifyRails(*t, {}).ok());
  EXPECT_EQ(t->nics[0].role_why, "PHB to GPU5");
  auto p = PairGpus(*t);
  EXPECT_EQ(Pair(p, 5).cls, PathClass::kPHB);
  EnvPlan e5 = ComputeEnv(*t, p, {4, 5}, {5}, EnvPolicy());
  EXPECT_EQ(Env(e5, "NCCL_IB_HCA"), "=mlx5_0:1");  // RCCL reads the same variables
  EXPECT_EQ(Env(e5, "FI_PROVIDER"), "<unset>");
  // GPU5 alone is PHB: GDR level PHB; with GPU4 (NODE) the node's worst is NODE.
  EXPECT_EQ(Env(ComputeEnv(*t, p, {5}, EnvPolicy()), "NCCL_NET_GDR_LEVEL"), "PHB");
  EXPECT_EQ(Env(e5, "NCCL_NET_GDR_LEVEL"), "<unset>");
}

// ---- Golden: LLNL Tuolumne (El Capitan class), 4x MI300A, 4x Slingshot ---
// Each MI300A (class 1200, 1002:74a0, rsmiN) shares a host bridge with one
// Cassini NIC (17db:0501) that hwloc shows only as network device hsiN
// (subtype Slingshot), no OpenFabrics device: NCCL_IB_HCA is left unset with
// the reason, FI_PROVIDER=cxi for the OFI plugin.
TEST(TopoGolden, TuolumneSlingshotSetsFiProviderNotIbHca) {
  auto t = LoadTopologyXmlOnly(kTuolumne);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->gpus.size(), 4u);
  EXPECT_EQ(t->gpus[2].vendor, "amd");
  EXPECT_EQ(t->gpus[2].osdev, "rsmi2");
  ASSERT_EQ(t->nics.size(), 4u);
  EXPECT_EQ(t->nics[0].name, "hsi0");
  EXPECT_EQ(t->nics[0].kind, "cxi");
  EXPECT_EQ(t->nics[0].busid, "0000:01:00.0");
  ASSERT_TRUE(ClassifyRails(*t, {}).ok());
  auto p = PairGpus(*t);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(Nics(p, g), "hsi" + std::to_string(g)) << g;
    EXPECT_EQ(Pair(p, g).cls, PathClass::kPHB) << g;
  }
  EnvPlan a = ComputeEnv(*t, p, {0, 1, 2, 3}, {0}, EnvPolicy());
  EnvPlan b = ComputeEnv(*t, p, {0, 1, 2, 3}, {3}, EnvPolicy());
  EXPECT_EQ(Env(a, "FI_PROVIDER"), "cxi");
  EXPECT_EQ(Env(a, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(Why(a, "NCCL_IB_HCA"),
            "Slingshot (cxi): NCCL reaches it through libfabric (aws-ofi-nccl), not verbs; see FI_PROVIDER");
  EXPECT_EQ(Why(a, "UCX_NET_DEVICES"), "Slingshot (cxi): UCX has no cxi transport; left to UCX");
  EXPECT_EQ(Env(a, "NCCL_NET_GDR_LEVEL"), "PHB");
  for (const auto& v : a.vars) EXPECT_EQ(Env(b, v.name), v.value) << v.name;
  // With the netdevs up (a node's sysfs), bootstrap goes over them.
  for (auto& n : t->nics) n.netdevs_up = n.netdevs;
  EXPECT_EQ(Env(ComputeEnv(*t, p, {0, 1, 2, 3}, {1}, EnvPolicy()), "NCCL_SOCKET_IFNAME"), "=hsi0,hsi1,hsi2,hsi3");
}

// Foreign XML: LoadTopologyXmlOnly reads nothing beyond the file, where
// LoadTopologyHwloc takes port state and GPU minors from its FsRoot.
TEST(TopoLoad, XmlOnlyReadsNothingFromTheMachine) {
  std::string root = TempDir();
  for (const char* dev : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) PutPort(root, dev, 1, "1: DOWN", "InfiniBand");
  // Device minors in reverse PCI order.
  const char* bus[] = {"0000:4e:00.0", "0000:5f:00.0", "0000:cb:00.0", "0000:db:00.0"};
  for (int i = 0; i < 4; ++i)
    Put(root, std::string("/proc/driver/nvidia/gpus/") + bus[i] + "/information", "Device Minor: " + std::to_string(3 - i));
  Topology local = Load(kDell, root);
  EXPECT_EQ(local.state_from, "sysfs:" + root);
  EXPECT_EQ(local.nics[0].ports[0].state, "DOWN");
  EXPECT_EQ(local.gpus[0].busid, "0000:db:00.0");  // minor 0
  auto foreign = LoadTopologyXmlOnly(kDell);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(foreign->state_from, "xml");
  EXPECT_EQ(foreign->nics[0].ports[0].state, "ACTIVE");  // as hwloc recorded it
  EXPECT_EQ(foreign->gpus[0].busid, "0000:4e:00.0");     // NVML order
  EXPECT_TRUE(foreign->nics[0].netdevs_up.empty());
  EXPECT_FALSE(LoadTopologyXmlOnly("").ok());
}

// The whole JSON for each machine against tests/fixtures/topology/golden.
TEST(TopoGolden, JsonMatchesGoldenFiles) {
  bool regen = std::getenv("PREFLIGHT_REGENERATE_GOLDEN") != nullptr;
  for (const std::string& xml : {kDell, kP4d, kLassen, kNoPorts, kCorona, kTuolumne, kCorona4, kTuoCpx}) {
    auto loaded = LoadTopologyXmlOnly(xml);  // the XML alone: no fixture path in the golden
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    Topology t = *loaded;
    std::string base = xml.substr(xml.rfind('/') + 1);
    base = base.substr(0, base.size() - 4);
    t.source = "xml:" + base + ".xml";  // normalised: no absolute path
    ASSERT_TRUE(ClassifyRails(t, {}).ok());  // as preflight topo does, without topo_rails
    auto p = PairGpus(t);
    std::vector<int> all;
    for (const auto& g : t.gpus) all.push_back(g.index);
    EnvPlan e = ComputeEnv(t, p, all, EnvPolicy());
    std::string got = TopologyJson(t, p, &e);
    std::string path = kFix + "/golden/" + base + ".json";
    if (regen) {
      ASSERT_TRUE(MakeDirs(kFix + "/golden").ok());
      ASSERT_TRUE(WriteFileAtomic(path, got).ok());
      continue;
    }
    auto want = ReadWholeFile(path);
    ASSERT_TRUE(want.ok()) << want.status().ToString() << " (regenerate with PREFLIGHT_REGENERATE_GOLDEN=1)";
    EXPECT_EQ(got, *want) << path;
  }
}

// ---- Loader errors and the cache -----------------------------------------

TEST(TopoLoad, BadInputsNameTheFile) {
  FsRoot real("/");
  auto missing = LoadTopologyHwloc("/nonexistent/topo.xml", real);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.xml"), std::string::npos);
  std::string d = TempDir();
  Put(d, "/bad.xml", "<topology><object type=\"Machine\"");
  auto bad = LoadTopologyHwloc(d + "/bad.xml", real);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(d + "/bad.xml"), std::string::npos);
  FsRoot fixture(d);
  auto probe = LoadTopologyHwloc("", fixture);
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Status::Code::kUnavailable);
}

// Each load error names the file and its cause, on real files where one
// exists (tests/fixtures/topology/README.md): an NCCL topology file, hwloc
// master's 3.0 export of 24em64t-2n6c2t-pci, hwloc's 32em64t-2n8c2t-pci-noio
// (exported without I/O); empty and truncated files made here from them.
TEST(TopoLoad, ErrorsSayWhatIsWrongWithTheFile) {
  FsRoot real("/");
  auto msg = [&](const std::string& xml) {
    auto t = LoadTopologyHwloc(xml, real);
    EXPECT_FALSE(t.ok()) << xml;
    return t.ok() ? std::string() : t.status().message();
  };
  std::string nccl = kFix + "/nccl-topo-azure-ndv4-8xa100.xml";
  EXPECT_EQ(msg(nccl), nccl + ": an NCCL topology file, not hwloc XML: export with `lstopo --of xml`");
  std::string v3 = kFix + "/hwloc-v3.0-24em64t-2n6c2t-pci.xml";
  std::string have = HwlocRuntimeVersion();
  ASSERT_EQ(have[0], '2') << have;  // this test expects an hwloc 2.x runtime
  std::string mm = have.substr(0, have.find('.', 2));
  EXPECT_EQ(msg(v3), v3 + ": hwloc XML version 3.0 needs hwloc >= 3 (this is " + mm +
                         "): export it with an hwloc 2.x lstopo (`lstopo --of xml`)");
  std::string noio = kFix + "/hwloc-32em64t-2n8c2t-pci-noio.xml";
  EXPECT_EQ(msg(noio), noio + ": no PCI objects: exported without I/O (`lstopo --whole-io --of xml`)");
  std::string d = TempDir();
  std::ofstream(d + "/empty.xml").close();
  EXPECT_EQ(msg(d + "/empty.xml"), d + "/empty.xml: empty file");
  // The Dell file cut after its line 300.
  std::ifstream in(kDell);
  std::ofstream out(d + "/cut.xml");
  std::string line;
  for (int i = 0; i < 300 && std::getline(in, line); ++i) out << line << "\n";
  out.close();
  EXPECT_EQ(msg(d + "/cut.xml"), d + "/cut.xml: truncated at line 300: no closing </topology>");

  // The diagnosis alone, with a given runtime version.
  EXPECT_EQ(DiagnoseTopologyXml("f", "<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"3.0\">\n", "2.9.0")
                .message(),
            "f: hwloc XML version 3.0 needs hwloc >= 3 (this is 2.9): export it with an hwloc 2.x lstopo (`lstopo --of xml`)");
  EXPECT_TRUE(DiagnoseTopologyXml("f", "<topology version=\"3.0\"></topology>", "3.0.1").ok());
  EXPECT_TRUE(DiagnoseTopologyXml("f", "<topology version=\"2.0\">\n</topology>\n", "2.9.0").ok());
  EXPECT_EQ(DiagnoseTopologyXml("f", " \n\t", "2.9.0").message(), "f: empty file");
  EXPECT_EQ(DiagnoseTopologyXml("f", "<topology version=\"2.0\">\n<object\n", "2.9.0").message(),
            "f: truncated at line 2: no closing </topology>");
  EXPECT_EQ(DiagnoseTopologyXml("f", "<html><body/></html>", "2.9.0").message(),
            "f: not hwloc XML (root element <html>): export with `lstopo --of xml`");
  EXPECT_EQ(DiagnoseTopologyXml("f", "# a README\n", "2.9.0").message(), "f: not XML (no root element)");
}

TEST(TopoCache, RoundTripStaleAndMalformed) {
  std::string root = TempDir();
  PutPort(root, "mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  Topology t = Load(kDell, root);
  std::string text = SerializeTopology(t, "K1");
  auto back = ParseTopologyCache(text, "K1", "cache");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(SerializeTopology(*back, "K1"), text);
  EXPECT_EQ(back->nics[0].ports[0].rate, "200 Gb/sec (4X HDR)");
  auto stale = ParseTopologyCache(text, "K2", "cache");
  EXPECT_EQ(stale.status().code(), Status::Code::kNotFound);
  std::string broken = text;
  broken.replace(broken.find("gpu\t0"), 5, "gpu\tx");
  auto bad = ParseTopologyCache(broken, "K1", "/c");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/c:4: malformed gpu record"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseTopologyCache("garbage\n", "K1", "/c").ok());
}

TEST(TopoCache, FirstUseWritesThenHits) {
  std::string d = TempDir();
  Config cfg;
  cfg.state_dir = d + "/state";
  cfg.fsroot = d + "/root";
  cfg.topology_xml = kLassen;
  ASSERT_TRUE(MakeDirs(cfg.fsroot).ok());
  Put(cfg.fsroot, "/proc/sys/kernel/random/boot_id", "boot-1");
  bool hit = true;
  auto a = LoadTopologyCached(cfg, "n1", TopoLoadOptions(), &hit);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(hit);
  struct stat st;
  EXPECT_EQ(::stat((d + "/state/nodes/n1.topo").c_str(), &st), 0);
  auto b = LoadTopologyCached(cfg, "n1", TopoLoadOptions(), &hit);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(SerializeTopology(*a, "k"), SerializeTopology(*b, "k"));
  // A reboot (new boot id) makes it stale: hwloc again.
  Put(cfg.fsroot, "/proc/sys/kernel/random/boot_id", "boot-2");
  auto c = LoadTopologyCached(cfg, "n1", TopoLoadOptions(), &hit);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(hit);
  // A corrupt cache is rebuilt, not trusted.
  ASSERT_TRUE(WriteFileAtomic(d + "/state/nodes/n1.topo", "preflight-topo-cache 3\nkey\tx\ty\n").ok());
  auto e = LoadTopologyCached(cfg, "n1", TopoLoadOptions(), &hit);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(hit);
  // refresh_sysfs picks up a port that went down since.
  PutPort(cfg.fsroot, "mlx5_1", 1, "1: DOWN", "InfiniBand");
  TopoLoadOptions lo;
  lo.refresh_sysfs = true;
  auto f = LoadTopologyCached(cfg, "n1", lo, &hit);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(f->nics[1].ports[0].state, "DOWN");
}

TEST(TopoSysfs, RoceGidValidationAndDeviceMinors) {
  std::string root = TempDir();
  std::string p = "/sys/class/infiniband/mlx5_0/ports/1";
  PutPort(root, "mlx5_0", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (2X HDR)");
  Put(root, p + "/gids/0", "fe80:0000:0000:0000:0a6b:00ff:fe01:0203");
  Put(root, p + "/gid_attrs/types/0", "IB/RoCE v1");
  Put(root, p + "/gids/1", "fe80:0000:0000:0000:0a6b:00ff:fe01:0203");
  Put(root, p + "/gid_attrs/types/1", "RoCE v2");
  Put(root, p + "/gids/2", "0000:0000:0000:0000:0000:ffff:0a00:0005");
  Put(root, p + "/gid_attrs/types/2", "IB/RoCE v1");
  Put(root, p + "/gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0005");
  Put(root, p + "/gid_attrs/types/3", "RoCE v2");
  Put(root, p + "/gids/10", "0000:0000:0000:0000:0000:ffff:0a00:0006");
  Put(root, p + "/gid_attrs/types/10", "RoCE v2");
  // Device minors in reverse PCI order: the index follows /dev/nvidiaN.
  const char* bus[] = {"0000:4e:00.0", "0000:5f:00.0", "0000:cb:00.0", "0000:db:00.0"};
  for (int i = 0; i < 4; ++i)
    Put(root, std::string("/proc/driver/nvidia/gpus/") + bus[i] + "/information",
        "Model: \t\t NVIDIA H100\nIRQ:   \t\t 17\nDevice Minor: \t " + std::to_string(3 - i) + "\nBus Location: \t x");
  Topology t = Load(kDell, root);
  EXPECT_EQ(t.nics[0].ports[0].gid_index, 3);  // 1 is v2 but link-local; 2 is v1
  EXPECT_EQ(t.gpus[0].index, 0);
  EXPECT_EQ(t.gpus[0].busid, "0000:db:00.0");  // minor 0
  EXPECT_EQ(t.gpus[3].busid, "0000:4e:00.0");
  auto pr = PairGpus(t);
  EnvPlan e = ComputeEnv(t, pr, {3}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(Env(e, "NCCL_IB_GID_INDEX"), "3");
}

// ---- Synthetic edge cases on the plain struct ----------------------------

TopoGpu Gpu(int index, std::vector<std::string> path, int numa, int package = 0) {
  TopoGpu g;
  g.index = index;
  g.busid = "0000:0" + std::to_string(index) + ":00.0";
  g.path = std::move(path);
  g.numa = numa;
  g.package = package;
  return g;
}
TopoNic Nic(const std::string& name, std::vector<std::string> path, int numa, int package = 0,
            std::vector<TopoPort> ports = {{1, "ACTIVE", "InfiniBand", "", -1}}) {
  TopoNic n;
  n.name = name;
  n.kind = "ib";
  n.path = std::move(path);
  n.numa = numa;
  n.package = package;
  n.ports = std::move(ports);
  return n;
}

TEST(TopoSynthetic, NoNicSetsNothing) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a"}, 0)};
  auto p = PairGpus(t);
  EXPECT_TRUE(Pair(p, 0).nics.empty());
  EnvPlan e = ComputeEnv(t, p, {0}, EnvPolicy());
  EXPECT_TRUE(e.vars.empty());
  EXPECT_EQ(Why(e, "NCCL_IB_HCA"), "no usable RDMA NIC for GPU 0");
  EXPECT_EQ(e.unset.size(), CoreEnvVarNames().size());
}

TEST(TopoSynthetic, NoGpuAndUnknownGpu) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a"}, 0)};
  auto p = PairGpus(t);
  EXPECT_TRUE(ComputeEnv(t, p, {}, EnvPolicy()).vars.empty());
  EnvPlan e = ComputeEnv(t, p, {7}, EnvPolicy());
  EXPECT_TRUE(e.vars.empty());
  EXPECT_EQ(Why(e, "NCCL_IB_HCA"), "GPU 7 not in the node's topology");
  // A known GPU next to an unknown one still gets its HCA; the unknown one
  // is named in the pairing.
  EnvPlan mixed = ComputeEnv(t, p, {0, 7}, EnvPolicy());
  EXPECT_EQ(Env(mixed, "NCCL_IB_HCA"), "=mlx5_0:1");
  ASSERT_EQ(mixed.gpu_nics.size(), 2u);
  EXPECT_EQ(mixed.gpu_nics[1].second, "not in the topology");
}

TEST(TopoSynthetic, MoreGpusThanNicsSharesBalanced) {
  // 4 GPUs on one switch with 2 NICs: two GPUs per NIC, not all on mlx5_0.
  Topology t;
  for (int i = 0; i < 4; ++i) t.gpus.push_back(Gpu(i, {"hb:a", "sw1"}, 0));
  t.nics = {Nic("mlx5_0", {"hb:a", "sw1"}, 0), Nic("mlx5_1", {"hb:a", "sw1"}, 0)};
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Nics(p, 1), "mlx5_1");
  EXPECT_EQ(Nics(p, 2), "mlx5_0");
  EXPECT_EQ(Nics(p, 3), "mlx5_1");
  // Deterministic: the same input gives the same answer.
  auto q = PairGpus(t);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Nics(p, i), Nics(q, i));
}

TEST(TopoSynthetic, TwoGpusTwoNicsOnOneSwitchDoNotShare) {
  // Both GPUs see both NICs at PIX; each takes the least-used one, so they
  // get one each; the NIC on the other socket is nobody's candidate.
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw1"}, 0), Gpu(1, {"hb:a", "sw1"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a", "sw1"}, 0), Nic("mlx5_1", {"hb:a", "sw1"}, 0), Nic("mlx5_2", {"hb:b"}, 1, 1)};
  ASSERT_TRUE(ClassifyRails(t, {}).ok());  // mlx5_2: SYS to both GPUs, a storage NIC
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Nics(p, 1), "mlx5_1");
  EXPECT_EQ(Pair(p, 0).cls, PathClass::kPIX);
  EXPECT_EQ(Env(ComputeEnv(t, p, {0, 1}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
}

TEST(TopoSynthetic, CloserGpuIsServedFirst) {
  // GPU1 is PIX to mlx5_0 only; GPU0 sees both NICs at PHB. Served in index
  // order GPU0 would take mlx5_0 (name order) and make GPU1 share it;
  // served by distance, GPU1 takes mlx5_0 and GPU0 the unused mlx5_1.
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw9"}, 0), Gpu(1, {"hb:a", "sw2"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a", "sw2"}, 0), Nic("mlx5_1", {"hb:a", "sw3"}, 0)};
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 1), "mlx5_0");
  EXPECT_EQ(Pair(p, 1).cls, PathClass::kPIX);
  EXPECT_EQ(Nics(p, 0), "mlx5_1");
  EXPECT_EQ(Pair(p, 0).cls, PathClass::kPHB);
}

TEST(TopoSynthetic, NicOnTheOtherSocketOnly) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw1"}, 0, 0)};
  t.nics = {Nic("mlx5_0", {"hb:b", "sw9"}, 1, 1)};
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Pair(p, 0).cls, PathClass::kSYS);
  EnvPlan e = ComputeEnv(t, p, {0}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "<unset>");
}

TEST(TopoSynthetic, ClassesPixPxbPhbNodeSys) {
  TopoGpu g = Gpu(0, {"hb:a", "up1", "up2"}, 0, 0);
  EXPECT_EQ(Distance(g, Nic("x", {"hb:a", "up1", "up2"}, 0)).cls, PathClass::kPIX);
  PairDistance pxb = Distance(g, Nic("x", {"hb:a", "up1", "up3"}, 0));
  EXPECT_EQ(pxb.cls, PathClass::kPXB);  // up2 and up3 below the common switch up1
  EXPECT_EQ(pxb.switches, 3);
  EXPECT_EQ(Distance(g, Nic("x", {"hb:a", "up1"}, 0)).cls, PathClass::kPXB);
  EXPECT_EQ(Distance(g, Nic("x", {"hb:a"}, 0)).cls, PathClass::kPHB);
  EXPECT_EQ(Distance(g, Nic("x", {"hb:b"}, 0)).cls, PathClass::kNODE);
  EXPECT_EQ(Distance(g, Nic("x", {"hb:b"}, 1, 0)).cls, PathClass::kSYS);
  EXPECT_EQ(Distance(g, Nic("x", {}, -1, -1)).cls, PathClass::kSYS);  // unknown NUMA is never "same"
  EXPECT_LT(Distance(g, Nic("x", {"hb:b"}, 1, 0)), Distance(g, Nic("x", {"hb:b"}, 1, 1)));
  EXPECT_STREQ(PathClassName(PathClass::kNODE), "NODE");
}

TEST(TopoSynthetic, DualPortHcaAndPortDown) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw1"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a", "sw1"}, 0, 0,
                {{1, "ACTIVE", "InfiniBand", "", -1}, {2, "ACTIVE", "InfiniBand", "", -1}})};
  auto p = PairGpus(t);
  EXPECT_EQ(Env(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_0:2");
  t.nics[0].ports[1].state = "DOWN";
  EXPECT_EQ(Env(ComputeEnv(t, PairGpus(t), {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1");
  // All ports down: that HCA is out, the GPU falls back to a farther one.
  t.nics[0].ports[0].state = "DOWN";
  t.nics.push_back(Nic("mlx5_1", {"hb:z"}, 0));
  auto q = PairGpus(t);
  EXPECT_EQ(Nics(q, 0), "mlx5_1");
  EXPECT_EQ(Pair(q, 0).cls, PathClass::kNODE);
  EXPECT_EQ(Env(ComputeEnv(t, q, {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_1:1");
}

TEST(TopoSynthetic, ExactHcaNamesMlx5_1IsNotMlx5_10) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "s"}, 0)};
  t.nics = {Nic("mlx5_10", {"hb:q"}, 1, 1), Nic("mlx5_1", {"hb:a", "s"}, 0)};
  ASSERT_TRUE(ClassifyRails(t, {}).ok());  // mlx5_10 is not a rail here
  auto p = PairGpus(t);
  EXPECT_EQ(Env(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_1:1");
  EXPECT_TRUE(NaturalLess("mlx5_2", "mlx5_10"));
  EXPECT_FALSE(NaturalLess("mlx5_10", "mlx5_2"));
  EXPECT_TRUE(NaturalLess("mlx5_1", "mlx5_10"));
  EXPECT_FALSE(NaturalLess("mlx5_1", "mlx5_1"));
}

TEST(TopoSynthetic, RoceVersusIbGidIndex) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "s"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a", "s"}, 0, 0, {{1, "ACTIVE", "Ethernet", "", 3}}),
            Nic("mlx5_1", {"hb:a", "s"}, 0, 0, {{1, "ACTIVE", "Ethernet", "", 3}})};
  auto p = PairGpus(t);
  EnvPlan e = ComputeEnv(t, p, {0}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_GID_INDEX"), "3");
  EnvPolicy off;
  off.gid_index = false;
  EXPECT_EQ(Why(ComputeEnv(t, p, {0}, off), "NCCL_IB_GID_INDEX"), "disabled by site config (nccl_gid_index)");
  t.nics[1].ports[0].gid_index = 1;
  EXPECT_EQ(Why(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_GID_INDEX"), "RoCE v2 GID index differs between ports");
  t.nics[1].ports[0].gid_index = -1;
  EXPECT_EQ(Why(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_GID_INDEX"), "no validated RoCE v2 GID");
  t.nics[0].ports[0].link_layer = t.nics[1].ports[0].link_layer = "InfiniBand";
  EXPECT_EQ(Why(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_GID_INDEX"), "InfiniBand link layer needs no GID index");
}

TEST(TopoSynthetic, PhbSetsGdrLevelAndTopoFileOnlyWhenAsked) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a"}, 0)};
  t.nics = {Nic("mlx5_0", {"hb:a"}, 0)};
  auto p = PairGpus(t);
  EnvPolicy pol;
  EnvPlan e = ComputeEnv(t, p, {0}, pol);
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "PHB");
  EXPECT_EQ(Env(e, "NCCL_TOPO_FILE"), "<unset>");
  pol.nccl_topo_file = "/etc/nccl/topo.xml";
  EXPECT_EQ(Why(ComputeEnv(t, p, {0}, pol), "NCCL_TOPO_FILE"), "site file /etc/nccl/topo.xml missing");
  pol.nccl_topo_file_exists = true;
  EXPECT_EQ(Env(ComputeEnv(t, p, {0}, pol), "NCCL_TOPO_FILE"), "/etc/nccl/topo.xml");
}

TEST(TopoSynthetic, NeverNcclDebugVariables) {
  for (const auto& n : EnvVarNames()) EXPECT_NE(n.rfind("NCCL_DEBUG", 0), 0u) << n;
}

TEST(TopoTaskGpus, FromSlurmVariables) {
  using V = std::vector<int>;
  EXPECT_EQ(*TaskGpus("1,3", "0-3", "1,3"), (V{1, 3}));
  EXPECT_EQ(*TaskGpus("", "0-3", ""), (V{0, 1, 2, 3}));
  EXPECT_EQ(*TaskGpus("0-3", "", "2"), (V{2}));      // --gpu-bind, global ids
  EXPECT_EQ(*TaskGpus("2,3", "", "1"), (V{3}));      // ConstrainDevices: position 1 of 2,3
  EXPECT_EQ(*TaskGpus("2,3", "", "0,1"), (V{2, 3})); // whole step set
  EXPECT_EQ(*TaskGpus("", "", "0,2"), (V{0, 2}));
  EXPECT_TRUE(TaskGpus("", "", "")->empty());
  auto bad = TaskGpus("x", "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_STEP_GPUS='x'"), std::string::npos);
  auto uuid = TaskGpus("", "", "GPU-0000");
  ASSERT_FALSE(uuid.ok());
  EXPECT_NE(uuid.status().message().find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_FALSE(TaskGpus("2,3,4", "", "7").ok());
  // AMD: ROCR_VISIBLE_DEVICES narrows the same way and is named in errors.
  EXPECT_EQ(*TaskGpus("2,3", "", "1", "ROCR_VISIBLE_DEVICES"), (V{3}));
  auto rocr = TaskGpus("", "", "x", "ROCR_VISIBLE_DEVICES");
  ASSERT_FALSE(rocr.ok());
  EXPECT_NE(rocr.status().message().find("ROCR_VISIBLE_DEVICES='x'"), std::string::npos);
}

// ---- Rails ----------------------------------------------------------------
// From the PCIe tree: a rail is PIX/PXB/PHB to some GPU; NODE/SYS to every
// GPU is storage/front-end only when another NIC is closer (the AC922 has
// none: its HCAs are its compute network).
TEST(TopoRails, FromThePcieTreeOnRealMachines) {
  Topology dell = Load(kDell, TempDir());
  ASSERT_TRUE(ClassifyRails(dell, {}).ok());
  for (const auto& n : dell.nics) EXPECT_EQ(n.role, NicRole::kRail) << n.name;
  EXPECT_EQ(dell.nics[0].role_why, "PIX to GPU0");
  EXPECT_EQ(dell.nics[3].role_why, "PIX to GPU3");
  EXPECT_STREQ(dell.nics[2].role_name(), "down");  // recorded DOWN: a rail, but not usable
  Topology p4d = Load(kP4d, TempDir());
  ASSERT_TRUE(ClassifyRails(p4d, {}).ok());
  for (const auto& n : p4d.nics) EXPECT_EQ(n.role_why.substr(0, 3), "PHB") << n.name;
  // AC922: every HCA is NODE/SYS to every GPU and none is closer, so they
  // are the compute network (no evidence for "storage"): NUMA pairing.
  Topology lassen = Load(kLassen, TempDir());
  ASSERT_TRUE(ClassifyRails(lassen, {}).ok());
  for (const auto& n : lassen.nics) {
    EXPECT_EQ(n.role, NicRole::kRail) << n.name;
    EXPECT_EQ(n.role_why.rfind("no NIC closer to a GPU (", 0), 0u) << n.role_why;
  }
  EXPECT_EQ(Env(ComputeEnv(lassen, PairGpus(lassen), {1}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_1:1");
  // Named by the site: the NUMA pairing again.
  ASSERT_TRUE(ClassifyRails(lassen, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}).ok());
  EXPECT_EQ(lassen.nics[0].role_why, "named in topo_rails");
  EXPECT_EQ(Env(ComputeEnv(lassen, PairGpus(lassen), {1}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_1:1");
  // Only two named: the others are storage and never paired.
  ASSERT_TRUE(ClassifyRails(lassen, {"mlx5_0", "mlx5_2"}).ok());
  EXPECT_EQ(lassen.nics[1].role_why, "not in topo_rails");
  auto p = PairGpus(lassen);
  EXPECT_EQ(Nics(p, 1), "mlx5_0");
  EXPECT_EQ(Env(ComputeEnv(lassen, p, {0, 1, 2, 3}, {1}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_2:1");
  // A name the node lacks is refused, naming it and the node's NICs.
  Status bad = ClassifyRails(lassen, {"mlx5_0", "mlx5_9"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "topo_rails names NIC 'mlx5_9', which this node does not have (its NICs: mlx5_0, mlx5_1, "
                           "mlx5_2, mlx5_3)");
}

TEST(TopoRails, StorageNicNeverInNcclIbHcaAndWholeNodeTakesEveryRail) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw1"}, 0, 0), Gpu(1, {"hb:b", "sw2"}, 1, 1)};
  t.nics = {Nic("mlx5_0", {"hb:a", "sw1"}, 0),        // PIX to GPU0
            Nic("mlx5_1", {"hb:a"}, 0),               // PHB to GPU0: a rail no GPU pairs with
            Nic("mlx5_2", {"hb:b", "sw2"}, 1, 1),     // PIX to GPU1
            Nic("mlx5_3", {"hb:c"}, 0, 0)};           // NODE to GPU0, SYS to GPU1: storage
  ASSERT_TRUE(ClassifyRails(t, {}).ok());
  EXPECT_EQ(t.nics[1].role, NicRole::kRail);
  EXPECT_EQ(t.nics[3].role, NicRole::kStorage);
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "mlx5_0");
  EXPECT_EQ(Nics(p, 1), "mlx5_2");
  // Part of the node: the GPUs' own rails.
  EXPECT_EQ(Env(ComputeEnv(t, p, {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1");
  // The whole node: every rail, also the unpaired mlx5_1; never the storage NIC.
  EnvPlan all = ComputeEnv(t, p, {0, 1}, {1}, EnvPolicy());
  EXPECT_EQ(Env(all, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1");
  EXPECT_EQ(Env(all, "UCX_NET_DEVICES"), "mlx5_2:1");
  // With only the storage NIC usable, nothing: NCCL's own choice stands.
  for (int i : {0, 1, 2}) t.nics[static_cast<size_t>(i)].ports[0].state = "DOWN";
  EnvPlan down = ComputeEnv(t, PairGpus(t), {0}, EnvPolicy());
  EXPECT_EQ(Env(down, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(Why(down, "NCCL_IB_HCA").rfind("no compute rail: mlx5_3 is a storage/front-end NIC", 0), 0u)
      << Why(down, "NCCL_IB_HCA");
}


// ---- Issue 22: hand-written fixtures (see tests/fixtures/topology/README.md) --


// Corona's 4-GPU layout as hwloc 1.x exports it: the MI50s are PCI class 0300
// (VGA) with DRM OS devices only (cardN, renderDN, controlDN), the ASPEED BMC
// VGA (1a03) has cardN too; the lone ConnectX-6 sits on NUMA 3, SYS to every
// GPU. The GPUs are found (numbered in PCI order: nothing names ROCm's), and
// mlx5_0 is the compute network, not "storage".
TEST(TopoGolden, CoronaVgaOnlyMi50sAndTheLoneHcaIsTheRail) {
  auto t = LoadTopologyXmlOnly(kCorona4);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->gpus.size(), 4u);
  const char* bus[] = {"0000:13:00.0", "0000:23:00.0", "0000:53:00.0", "0000:73:00.0"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t->gpus[i].index, i);
    EXPECT_EQ(t->gpus[i].vendor, "amd");
    EXPECT_EQ(t->gpus[i].busid, bus[i]);
    EXPECT_EQ(t->gpus[i].osdev, "card" + std::to_string(i + 1));
  }
  ASSERT_EQ(t->nics.size(), 1u);
  ASSERT_TRUE(ClassifyRails(*t, {}).ok());
  EXPECT_EQ(t->nics[0].role, NicRole::kRail);
  EXPECT_EQ(t->nics[0].role_why, "the only RDMA NIC (SYS to GPU0): the compute network unless topo_rails says otherwise");
  auto p = PairGpus(*t);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(Nics(p, g), "mlx5_0") << g;
    EXPECT_EQ(Pair(p, g).cls, PathClass::kSYS) << g;
  }
  EnvPlan e = ComputeEnv(*t, p, {0, 1, 2, 3}, {2}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=mlx5_0:1");
  EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "<unset>");
  // The site can still call it storage; then nothing is set, with the reason.
  ASSERT_TRUE(ClassifyRails(*t, {}).ok());
  Topology storage = *t;
  storage.nics.push_back(Nic("mlx5_9", storage.gpus[0].path, 1, 0));  // a better-placed NIC is evidence
  ASSERT_TRUE(ClassifyRails(storage, {}).ok());
  EXPECT_EQ(storage.nics[0].role, NicRole::kStorage);
  EXPECT_EQ(storage.nics[0].role_why, "NODE/SYS to every GPU, another NIC is closer");
}

// The BMC VGA of another vendor's board, and AMD's own ES1000 BMC VGA
// (1002:515e, class 0300, no ROCm device), stay out: only Instinct ids count.
TEST(TopoGolden, AmdBmcVgaIsStillNotAGpu) {
  auto t = LoadTopologyXmlOnly(kNoPorts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const auto& g : t->gpus) EXPECT_EQ(g.vendor, "nvidia") << g.busid;
}

// MI300A in CPX mode: each APU's PCI function carries 6 ROCm devices
// (rsmi0..5 under 0000:02:00.0, rsmi6..11 under 0001:02:00.0, ...). Every
// logical GPU exists under its ROCm index (Slurm's GRES index), with its
// function's bus id and place, so it pairs with the Cassini on its APU.
TEST(TopoGolden, Mi300aCpxEveryLogicalGpuByRocmIndex) {
  for (auto [xml, per] : {std::pair<std::string, int>{kTuoCpx, 6}, {kTuoTpx, 3}}) {
    auto t = LoadTopologyXmlOnly(xml);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->gpus.size(), static_cast<size_t>(4 * per)) << xml;
    ASSERT_TRUE(ClassifyRails(*t, {}).ok());
    auto p = PairGpus(*t);
    for (int i = 0; i < 4 * per; ++i) {
      const TopoGpu& g = t->gpus[i];
      EXPECT_EQ(g.index, i);
      EXPECT_EQ(g.osdev, "rsmi" + std::to_string(i));
      char want[32];
      std::snprintf(want, sizeof want, "%04x:02:00.0", i / per);
      EXPECT_EQ(g.busid, want) << i;
      EXPECT_EQ(Nics(p, i), "hsi" + std::to_string(i / per)) << i;
      EXPECT_EQ(Pair(p, i).cls, PathClass::kPHB) << i;
    }
    // A job holding the second APU's logical GPUs: that APU's NIC only.
    std::vector<int> apu1;
    for (int i = per; i < 2 * per; ++i) apu1.push_back(i);
    EnvPlan e = ComputeEnv(*t, p, apu1, {per}, EnvPolicy());
    EXPECT_EQ(Env(e, "FI_PROVIDER"), "cxi");
    EXPECT_EQ(Env(e, "NCCL_NET_GDR_LEVEL"), "PHB");
    ASSERT_EQ(e.gpu_nics.size(), static_cast<size_t>(per));
    EXPECT_EQ(e.gpu_nics[0].second, "hsi1 PHB");
  }
}

// Slingshot (cxi) env as HPE publishes it; NCCL_NET only for a multi-node job.
TEST(TopoSlingshot, HpeSetPerJobAndNeverForOneNode) {
  auto t = LoadTopologyXmlOnly(kTuoCpx);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(ClassifyRails(*t, {}).ok());
  auto p = PairGpus(*t);
  EnvPolicy one, two, unknown;
  one.job_nodes = 1;
  two.job_nodes = 2;
  EnvPlan multi = ComputeEnv(*t, p, {0, 1}, {0}, two);
  EXPECT_EQ(Env(multi, "NCCL_NET"), "AWS Libfabric");
  EXPECT_EQ(Env(multi, "NCCL_CROSS_NIC"), "1");
  EXPECT_EQ(Env(multi, "FI_CXI_DISABLE_HOST_REGISTER"), "1");
  EXPECT_EQ(Env(multi, "FI_MR_CACHE_MONITOR"), "userfaultfd");
  EXPECT_EQ(Env(multi, "FI_CXI_DEFAULT_CQ_SIZE"), "131072");
  EXPECT_EQ(Env(multi, "FI_PROVIDER"), "cxi");
  EnvPlan single = ComputeEnv(*t, p, {0, 1}, {0}, one);
  EXPECT_EQ(Env(single, "NCCL_NET"), "<unset>");
  EXPECT_EQ(Why(single, "NCCL_NET"), "single-node job: NCCL_NET would force the network transport");
  EXPECT_EQ(Env(single, "NCCL_CROSS_NIC"), "1");
  EXPECT_EQ(Why(ComputeEnv(*t, p, {0}, unknown), "NCCL_NET"),
            "job node count unknown (SLURM_JOB_NUM_NODES): set only for jobs on several nodes");
  // Every name ComputeEnv sets is one the merge knows (to remove it later).
  for (const auto& v : multi.vars)
    EXPECT_NE(std::find(EnvVarNames().begin(), EnvVarNames().end(), v.name), EnvVarNames().end()) << v.name;
  // A verbs node gets none of them.
  Topology dell = DellAllUp(TempDir());
  EnvPlan d = ComputeEnv(dell, PairGpus(dell), {0}, two);
  for (const char* n : {"NCCL_NET", "NCCL_CROSS_NIC", "FI_CXI_DISABLE_HOST_REGISTER", "FI_MR_CACHE_MONITOR"})
    EXPECT_EQ(Env(d, n), "<unset>") << n;
  // The task's SLURM_JOB_NUM_NODES decides; what the user set is kept.
  NodeGpuInputs in;
  TaskEnvPlan a = PlanTaskEnv(*t, p, EnvPolicy(), in, "",
                              Lookup({{"SLURM_STEP_GPUS", "0,1"}, {"ROCR_VISIBLE_DEVICES", "0"}, {"SLURM_JOB_NUM_NODES", "4"}}));
  EXPECT_EQ(Env(a.plan, "NCCL_NET"), "AWS Libfabric");
  TaskEnvPlan b = PlanTaskEnv(*t, p, EnvPolicy(), in, "",
                              Lookup({{"SLURM_STEP_GPUS", "0,1"}, {"SLURM_JOB_NUM_NODES", "1"}}));
  EXPECT_EQ(Env(b.plan, "NCCL_NET"), "<unset>");
  EnvMerge m = MergeEnv(a.plan, Lookup({{"NCCL_CROSS_NIC", "0"}, {"FI_MR_CACHE_MONITOR", "memhooks"}}));
  for (const auto& v : m.set) {
    EXPECT_NE(v.name, "NCCL_CROSS_NIC");
    EXPECT_NE(v.name, "FI_MR_CACHE_MONITOR");
  }
  ASSERT_EQ(m.kept.size(), 2u);
}

// Broadcom Thor (bnxt_re) RoCE NICs are verbs HCAs like mlx5: no rule may
// assume the mlx5 name.
TEST(TopoSynthetic, BroadcomBnxtReIsAVerbsRail) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a", "sw1"}, 0), Gpu(1, {"hb:b", "sw2"}, 1, 1)};
  t.nics = {Nic("bnxt_re0", {"hb:a", "sw1"}, 0, 0, {{1, "ACTIVE", "Ethernet", "", 3}}),
            Nic("bnxt_re1", {"hb:b", "sw2"}, 1, 1, {{1, "ACTIVE", "Ethernet", "", 3}})};
  ASSERT_TRUE(ClassifyRails(t, {}).ok());
  auto p = PairGpus(t);
  EXPECT_EQ(Nics(p, 0), "bnxt_re0");
  EXPECT_EQ(Nics(p, 1), "bnxt_re1");
  EnvPlan e = ComputeEnv(t, p, {0, 1}, {1}, EnvPolicy());
  EXPECT_EQ(Env(e, "NCCL_IB_HCA"), "=bnxt_re0:1,bnxt_re1:1");
  EXPECT_EQ(Env(e, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(Env(e, "UCX_NET_DEVICES"), "bnxt_re1:1");
  EXPECT_EQ(Env(e, "FI_PROVIDER"), "<unset>");
}

// A lone NIC far from the GPU (1-GPU DEEP-EST/JUSUF-like node) is the rail;
// a down port on it then leaves the GPU without a NIC, which the rails check
// reports, instead of being skipped as "storage".
TEST(TopoRails, LoneFarNicIsTheComputeNetwork) {
  Topology t;
  t.gpus = {Gpu(0, {"hb:a"}, 0, 0)};
  t.nics = {Nic("mlx5_0", {"hb:z"}, 1, 1)};
  ASSERT_TRUE(ClassifyRails(t, {}).ok());
  EXPECT_STREQ(t.nics[0].role_name(), "rail");
  EXPECT_EQ(Env(ComputeEnv(t, PairGpus(t), {0}, EnvPolicy()), "NCCL_IB_HCA"), "=mlx5_0:1");
  ASSERT_TRUE(ClassifyRails(t, {"mlx5_0"}).ok());
  t.nics[0].ports[0].state = "DOWN";
  EXPECT_STREQ(t.nics[0].role_name(), "down");
  EXPECT_TRUE(Pair(PairGpus(t), 0).nics.empty());
}

// Slurm says GPUs, the topology none: a warning naming the variable.
TEST(TopoGres, GpusFromSlurmButNoneInTheTopology) {
  Topology none;
  none.source = "probe";
  EXPECT_EQ(GpuGresWarning(none, "0,1", ""),
            "Slurm gave this node GPUs (SLURM_JOB_GPUS=0,1) but the topology shows none (no NVIDIA or AMD GPU in probe): "
            "GPU-NIC pairing and the NCCL environment are empty; check the driver and hwloc's PCI view (`lstopo "
            "--whole-io`)");
  EXPECT_NE(GpuGresWarning(none, "", "3").find("SLURM_STEP_GPUS=3"), std::string::npos);
  EXPECT_EQ(GpuGresWarning(none, "", ""), "");
  Topology some;
  some.gpus = {Gpu(0, {"hb:a"}, 0)};
  EXPECT_EQ(GpuGresWarning(some, "0,1", ""), "");
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

// The vendor seam (gpu_vendor.h) on its own: what is a GPU, whose, and how
// it is numbered.
TEST(GpuVendor, PciClassVendorAndInstinctIdsDecide) {
  EXPECT_EQ(GpuVendorOf(0x10de, 0x2330, 0x0302, false), GpuVendor::kNvidia);  // H100 SXM
  EXPECT_EQ(GpuVendorOf(0x10de, 0x1eb8, 0x0300, false), GpuVendor::kNvidia);  // T4 as VGA
  EXPECT_EQ(GpuVendorOf(0x10de, 0x22a3, 0x0680, false), GpuVendor::kNone);    // NVSwitch (bridge class)
  EXPECT_EQ(GpuVendorOf(0x1002, 0x74a1, 0x1200, false), GpuVendor::kAmd);     // MI300X
  EXPECT_EQ(GpuVendorOf(0x1002, 0x66a1, 0x0300, false), GpuVendor::kAmd);     // MI50 as VGA: a known Instinct id
  EXPECT_EQ(GpuVendorOf(0x1002, 0x515e, 0x0300, false), GpuVendor::kNone);    // a BMC's ES1000
  EXPECT_EQ(GpuVendorOf(0x1002, 0x515e, 0x0300, true), GpuVendor::kAmd);      // ... unless ROCm sees it
  EXPECT_EQ(GpuVendorOf(0x8086, 0x0bd5, 0x0380, false), GpuVendor::kNone);    // not a vendor we know
  EXPECT_STREQ(GpuVendorName(GpuVendor::kAmd), "amd");
  EXPECT_EQ(GpuVendorNamed("nvidia"), GpuVendor::kNvidia);
  EXPECT_EQ(GpuVendorNamed("intel"), GpuVendor::kNone);
  EXPECT_STREQ(ManagementOsdevPrefix(GpuVendor::kAmd), "rsmi");
  EXPECT_TRUE(NumberedByDeviceMinor(GpuVendor::kNvidia));
  EXPECT_FALSE(NumberedByDeviceMinor(GpuVendor::kAmd));
}

}  // namespace
}  // namespace preflight
