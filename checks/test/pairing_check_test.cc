#include "preflight/pairing_check.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <unistd.h>

#include "preflight/topo_load.h"

namespace preflight {
namespace {

// IBM AC922 (Lassen): 4 V100 and 4 CX-5 ports; each GPU's closest HCA is
// mlx5_<same index> (see topo_test.cc for the derivation from the PCIe tree).
const std::string kAc922 = std::string(PREFLIGHT_TOPO_FIXTURES) + "/hwloc-ibm-ac922-lassen-4xv100-cx5.xml";

TEST(ExpectedPairing, Parses) {
  auto p = ParseExpectedPairing("0:mlx5_0,1:mlx5_1+mlx5_2");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].first, 1);
  EXPECT_EQ((*p)[1].second, (std::vector<std::string>{"mlx5_1", "mlx5_2"}));
  EXPECT_TRUE(ParseExpectedPairing("").ok());
}

TEST(ExpectedPairing, RefusesMalformed) {
  for (const char* bad : {"mlx5_0", "0:", ":mlx5_0", "x:mlx5_0", "0:mlx5_0,", "0:a,0:b", "0:a++b", "-1:a"}) {
    auto p = ParseExpectedPairing(bad);
    EXPECT_FALSE(p.ok()) << bad;
  }
}

class PairingCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.state_dir = dir_;
    cfg_.topology_xml = kAc922;
    // The AC922's HCAs are NODE/SYS to every GPU: the site names the rails.
    cfg_.topo_rails = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
    job_.node = "n1";
  }
  std::vector<CheckResult> Run() {
    FsRoot fs(dir_);  // no sysfs: port state from hwloc only
    CheckEnv env{cfg_, fs, job_, Phase::kProlog, Level::kQuick};
    return CheckPairing(env);
  }
  preflight_test::TempDir tmp_{"pairing"};
  std::string dir_ = tmp_.path();
  Config cfg_;
  JobContext job_;
};

TEST_F(PairingCheck, SkippedWithoutPinnedPlacement) {
  auto r = Run();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kSkip);
}

TEST_F(PairingCheck, MatchingPlacementPasses) {
  FsRoot fs(dir_);
  auto topo = LoadTopologyHwloc(kAc922, fs);
  ASSERT_TRUE(topo.ok()) << topo.status().message();
  ASSERT_TRUE(ClassifyRails(*topo, cfg_.topo_rails).ok());
  cfg_.topo_expect = ExpectedPairingText(PlacementPairing(*topo));
  EXPECT_EQ(cfg_.topo_expect, "0:mlx5_0,1:mlx5_1,2:mlx5_2,3:mlx5_3");
  auto r = Run();
  ASSERT_EQ(r.size(), 4u);
  for (const auto& c : r) EXPECT_EQ(c.verdict, Verdict::kPass) << c.message;
}

TEST_F(PairingCheck, MovedCardIsAFindingNamingGpuAndNics) {
  cfg_.topo_expect = "0:mlx5_0,1:mlx5_3,9:mlx5_1";
  auto r = Run();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].verdict, Verdict::kPass);
  EXPECT_EQ(r[1].verdict, Verdict::kFail);
  EXPECT_EQ(r[1].threshold, "mlx5_3");
  EXPECT_NE(r[1].message.find("closest NIC is mlx5_1"), std::string::npos) << r[1].message;
  EXPECT_EQ(r[2].verdict, Verdict::kFail);
  EXPECT_NE(r[2].message.find("GPU9 not in the topology"), std::string::npos);
}

TEST_F(PairingCheck, RailsDecideWhatIsPinned) {
  // A rail name the node lacks fails the check with the site's error.
  cfg_.topo_expect = "0:mlx5_0";
  cfg_.topo_rails = {"mlx5_0", "mlx5_7"};
  auto r = Run();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kFail);
  EXPECT_NE(r[0].message.find("topo_rails names NIC 'mlx5_7'"), std::string::npos) << r[0].message;
  // Two rails only: GPU1 (NUMA 0) now shares mlx5_0; the storage NICs are
  // never its placement.
  cfg_.topo_rails = {"mlx5_0", "mlx5_2"};
  cfg_.topo_expect = "0:mlx5_0,1:mlx5_0,2:mlx5_2,3:mlx5_2";
  r = Run();
  ASSERT_EQ(r.size(), 4u);
  for (const auto& c : r) EXPECT_EQ(c.verdict, Verdict::kPass) << c.message;
}

}  // namespace
}  // namespace preflight
