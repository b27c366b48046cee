// fleet.versions (fleet.h): records, the comparison, and the check through
// RunChecks with the fake NVML (its `driver` and `vbios` faults) and a copy
// of the healthy-8 sysfs fixture (fw_ver, board_id, osrelease).
#include "preflight/fleet.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <stdlib.h>

#include "preflight/fileutil.h"

namespace preflight {
namespace {

NodeVersions V(const std::string& node, const std::string& driver, const std::string& vbios = "96.00.74.00.11",
               const std::string& gpu = "H100") {
  NodeVersions v;
  v.node = node;
  v.at = 1000;
  v.driver = driver;
  v.gpu_model = gpu;
  v.vbios = vbios;
  v.hca_model = "MT_0000000838";
  v.hca_fw = "28.39.1002";
  v.kernel = "6.1.0";
  return v;
}

TEST(Fleet, NamesTheNodeThatDiffersFromTheMajority) {
  auto c = CompareVersions({V("n1", "550.54.15"), V("n2", "535.104.05"), V("n3", "550.54.15")});
  EXPECT_FALSE(c.consistent);
  ASSERT_EQ(c.odd.size(), 1u);
  EXPECT_EQ(c.odd[0].node, "n2");
  EXPECT_EQ(c.odd[0].field, "driver");
  EXPECT_EQ(c.text, "n2: driver 535.104.05, the other 2 nodes have 550.54.15\n");
}

TEST(Fleet, NoMajorityNamesNobodyAndOtherHardwareIsNotCompared) {
  auto c = CompareVersions({V("n1", "550"), V("n2", "535")});
  EXPECT_FALSE(c.consistent);
  EXPECT_TRUE(c.odd.empty());
  EXPECT_EQ(c.no_majority, std::vector<std::string>{"driver"});
  // An A100 node on another driver is not the H100 nodes' odd one.
  c = CompareVersions({V("n1", "550"), V("n2", "550"), V("a1", "535", "92.00", "A100")});
  EXPECT_TRUE(c.consistent) << c.text;
}

TEST(Fleet, RecordRoundTrips) {
  auto v = V("n7", "550.54.15");
  auto p = ParseVersionsJson(VersionsJson(v));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Fields(), v.Fields());
  EXPECT_EQ(p->HardwareClass(), v.HardwareClass());
  EXPECT_FALSE(ParseVersionsJson("{\"at\": 1}").ok());
}

struct Node {
  preflight_test::TempDir dir_{"fleet"};
  std::string tmp = dir_.path();
  Config cfg;
  JobContext job;
  Node() {
    cfg.fsroot = PREFLIGHT_SYSFS_FIXTURES "/healthy-8";
    cfg.state_dir = tmp + "/state";
    cfg.nvml_library = PREFLIGHT_FAKE_NVML;
    cfg.fleet_max_age_ms = 0;
    job.node = "n1";
  }
  std::vector<CheckResult> Run(const char* faults = nullptr) {
    if (faults) ::setenv("PREFLIGHT_FAKE_NVML", faults, 1);
    FsRoot fs(cfg.fsroot);
    CheckEnv env{cfg, fs, job, Phase::kHealth, Level::kQuick};
    auto r = RunChecks(env, {CheckDescriptor{"fleet.versions", "", Level::kQuick, CheckFleetVersions}});
    ::unsetenv("PREFLIGHT_FAKE_NVML");
    return r;
  }
  // Another node's record, as its own check wrote it: what n1 would record.
  void Peer(const std::string& node, const std::string& driver, const std::string& vbios = "96.00.74.00.11") {
    auto mine = ParseVersionsJson(*ReadWholeFile(VersionsPath(cfg, "n1")));
    ASSERT_TRUE(mine.ok());
    NodeVersions p = *mine;
    p.node = node;
    p.driver = driver;
    p.vbios = vbios;
    ASSERT_TRUE(WriteFileAtomic(VersionsPath(cfg, node), VersionsJson(p) + "\n").ok());
  }
};

TEST(FleetCheck, RecordsVersionsAndPassesAlone) {
  Node n;
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass);
  EXPECT_EQ(rs[0].value,
            "driver 550.00.fake, VBIOS 96.00.74.00.11, InfoROM G520.0200.00.05, HCA fw 28.39.1002, kernel 6.1.0-fixture");
  auto rec = ParseVersionsJson(*ReadWholeFile(VersionsPath(n.cfg, "n1")));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->gpu_model, "NVIDIA H100 80GB HBM3 (fake)");
  EXPECT_EQ(rec->hca_model, "MT_0000000838");
}

TEST(FleetCheck, OddDriverFailsOddVbiosWarns) {
  Node n;
  n.Run();
  n.Peer("n2", "550.00.fake");
  n.Peer("n3", "550.00.fake");
  EXPECT_EQ(n.Run()[0].verdict, Verdict::kPass);
  auto rs = n.Run("driver 535.00.fake");
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[0].message, "driver 535.00.fake differs from the other 2 nodes' 550.00.fake");
  rs = n.Run("vbios 3 96.00.61.00.01");  // one GPU flashed differently: vbios is not in fleet_fail_fields
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  EXPECT_NE(rs[0].message.find("vbios 96.00.61.00.01,96.00.74.00.11 differs"), std::string::npos) << rs[0].message;
  rs = n.Run("inforom 0 G520.0200.00.03");  // GPU firmware: warns too by default
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  EXPECT_NE(rs[0].message.find("inforom G520.0200.00.03,G520.0200.00.05 differs"), std::string::npos) << rs[0].message;
  n.cfg.fleet_fail_fields = {"vbios"};
  EXPECT_EQ(n.Run("vbios 3 96.00.61.00.01")[0].verdict, Verdict::kFail);
}

TEST(FleetCheck, PrologOnlyRecords) {
  Node n;
  n.Run();
  n.Peer("n2", "535.00.fake");
  n.Peer("n3", "535.00.fake");
  FsRoot fs(n.cfg.fsroot);
  CheckEnv env{n.cfg, fs, n.job, Phase::kProlog, Level::kQuick};
  auto rs = RunChecks(env, {CheckDescriptor{"fleet.versions", "", Level::kQuick, CheckFleetVersions}});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass) << "n1 is odd, but the prolog does not compare";
  EXPECT_NE(rs[0].message.find("compared by the health check"), std::string::npos);
  EXPECT_EQ(n.Run()[0].verdict, Verdict::kFail) << "the health check does";
}

TEST(FleetCheck, StaleRecordsAreNotCompared) {
  Node n;
  n.Run();
  n.Peer("n2", "535.00.fake");
  n.Peer("n3", "535.00.fake");
  EXPECT_EQ(n.Run()[0].verdict, Verdict::kFail);  // n1 is the odd one of three
  n.cfg.fleet_max_age_ms = 1000;  // records older than a second are not compared
  auto old = ParseVersionsJson(*ReadWholeFile(VersionsPath(n.cfg, "n2")));
  old->at = 1;
  ASSERT_TRUE(WriteFileAtomic(VersionsPath(n.cfg, "n2"), VersionsJson(*old) + "\n").ok());
  old->node = "n3";
  ASSERT_TRUE(WriteFileAtomic(VersionsPath(n.cfg, "n3"), VersionsJson(*old) + "\n").ok());
  EXPECT_EQ(n.Run()[0].verdict, Verdict::kPass);
}

}  // namespace
}  // namespace preflight
