// Xid classes (xid.h): the catalogue's actions, site overrides, the window,
// the GPU named from the driver's proc tree. Kernel logs are fixture files
// in /dev/kmsg format under a copy of tests/fixtures/sysfs/healthy-8.
#include "preflight/xid.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <stdlib.h>

#include <fstream>

#include "preflight/fileutil.h"

namespace preflight {
namespace {

struct Node {
  preflight_test::TempDir dir_{"xid"};
  std::string tmp = dir_.path(), root;
  Config cfg;
  JobContext job;
  Node() {
    root = tmp + "/root";
    EXPECT_EQ(std::system(("cp -a " PREFLIGHT_SYSFS_FIXTURES "/healthy-8 " + root).c_str()), 0);
    cfg.fsroot = root;
    cfg.state_dir = tmp + "/state";
    job.node = "n1";
  }
  // seq must grow; usec: microseconds since boot (the fixture's uptime is 3600 s).
  void Log(uint64_t seq, uint64_t usec, const std::string& pci, int xid, const std::string& rest = "") {
    std::ofstream(root + "/dev/kmsg", std::ios::app)
        << "3," << seq << "," << usec << ",-;NVRM: Xid (PCI:" << pci << "): " << xid << ", pid=77, " << rest << "\n";
  }
  std::vector<CheckResult> Run() {
    FsRoot fs(cfg.fsroot);
    CheckEnv env{cfg, fs, job, Phase::kHealth, Level::kQuick};
    return RunChecks(env, {CheckDescriptor{"gpu.xid", "", Level::kQuick, CheckXid}});
  }
};

TEST(XidClasses, CatalogueActionsForTheIssuesCodes) {
  Config c;
  for (int x : {48, 63, 64, 74, 79, 94, 95, 119, 120}) EXPECT_EQ(XidActionFor(c, x), XidAction::kDrainReset) << x;
  EXPECT_EQ(XidActionFor(c, 92), XidAction::kDrain);
  for (int x : {13, 31, 43}) EXPECT_EQ(XidActionFor(c, x), XidAction::kUser) << x;
  EXPECT_EQ(XidActionFor(c, 45), XidAction::kIgnore);
  EXPECT_EQ(XidActionFor(c, 999), XidAction::kDrain) << "unknown codes drain, as in v1";
  ASSERT_TRUE(ApplyOverrides(c, {"xid_actions=79:warn,999:ignore", "xid_ignore=31"}, "--set", "n1").ok());
  EXPECT_EQ(XidActionFor(c, 79), XidAction::kWarn);
  EXPECT_EQ(XidActionFor(c, 999), XidAction::kIgnore);
  EXPECT_EQ(XidActionFor(c, 31), XidAction::kIgnore);
  Status bad = ApplyOverrides(c, {"xid_actions=79:reboot"}, "--set", "n1");
  EXPECT_NE(bad.message().find("key 'xid_actions': bad Xid action '79:reboot'"), std::string::npos) << bad.message();
}

TEST(XidClasses, DrainResetNamesTheGpuAndStaysUntilReboot) {
  Node n;
  n.cfg.xid_window_ms = 60000;  // a window does not close drain_reset findings
  n.Run();                      // baseline
  n.Log(10, 900000, "0000:2a:00", 79, "GPU has fallen off the bus.");
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[0].device, "GPU1 0000:2a:00.0");
  EXPECT_EQ(rs[0].value, "Xid 79 x1");
  EXPECT_EQ(rs[0].message.rfind("Xid 79 (GPU has fallen off the bus, NVIDIA: RESTART_BM): drain_reset (clear: reset", 0), 0u)
      << rs[0].message;
  rs = n.Run();
  EXPECT_EQ(rs[0].verdict, Verdict::kFail) << "still open an hour later";
  ASSERT_TRUE(WriteFileAtomic(n.root + "/proc/sys/kernel/random/boot_id", "rebooted\n").ok());
  EXPECT_EQ(n.Run()[0].verdict, Verdict::kPass);
}

TEST(XidClasses, DrainClosesAfterTheWindowWarnAndUserNeverFail) {
  Node n;
  n.Run();
  n.Log(10, 3590ull * 1000000, "0000:3a:00", 92, "High single-bit ECC error rate");  // 10 s ago
  n.Log(11, 3595ull * 1000000, "0000:db:00", 31, "MMU Fault");                        // the job's own
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].device, "GPU2 0000:3a:00.0");
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[1].device, "GPU7 0000:db:00.0");
  EXPECT_EQ(rs[1].verdict, Verdict::kWarn);
  EXPECT_EQ(rs[1].owner, FaultOwner::kUser);
  // The uptime moves past the 24h default window for both: they close.
  ASSERT_TRUE(WriteFileAtomic(n.root + "/proc/uptime", "90000.00 1.00\n").ok());
  rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass);
  EXPECT_NE(rs[0].message.find("2 past xid_window 24h"), std::string::npos) << rs[0].message;
}

TEST(XidClasses, SiteOverrideAndSwitch) {
  Node n;
  n.cfg.xid_actions = {{79, XidAction::kWarn}};
  n.Run();
  n.Log(10, 1000, "0000:18:00", 79);
  auto rs = n.Run();
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn);
  EXPECT_EQ(rs[0].owner, FaultOwner::kNode);
  n.cfg.xid_actions.clear();
  n.cfg.check_modes["gpu.xid"] = CheckMode::kOff;
  rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message, "skipped: off by check_gpu_xid");
}

TEST(XidClasses, V1StateFileKeepsItsOpenFinding) {
  Node n;
  n.Run();
  std::string boot = *ReadWholeFile(n.root + "/proc/sys/kernel/random/boot_id");
  while (!boot.empty() && boot.back() == '\n') boot.pop_back();
  ASSERT_TRUE(WriteFileAtomic(n.cfg.state_dir + "/nodes/n1.xid",
                              "boot " + boot + "\nseq 2\nopen 2 48 0000:5d:00 NVRM: Xid (PCI:0000:5d:00): 48, DBE\n").ok());
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[0].device, "GPU3 0000:5d:00.0");
}

}  // namespace
}  // namespace preflight
