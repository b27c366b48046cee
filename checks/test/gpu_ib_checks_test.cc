// Health checks against their seams: the fake NVML (tests/fakes, loaded by
// the production dlopen path) and sysfs fixture trees (tests/fixtures/sysfs).
// GPU checks go through RunChecks so each runs in a fresh child, as in
// production: NVML is loaded once per process and faults are read at init.
#include "preflight/gpu_checks.h"
#include "preflight/ib_checks.h"
#include "preflight/xid.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "preflight/fileutil.h"

#ifndef PREFLIGHT_FAKE_NVML
#error "PREFLIGHT_FAKE_NVML must name the fake libnvidia-ml.so.1"
#endif

namespace preflight {
namespace {

const std::string kFixtures = PREFLIGHT_SYSFS_FIXTURES;

struct Env {
  Config cfg;
  JobContext job;
  preflight_test::TempDir dir_{"health"};
  std::string tmp = dir_.path();
  Env() {
    cfg.state_dir = tmp + "/state";
    cfg.nvml_library = PREFLIGHT_FAKE_NVML;
    cfg.fsroot = kFixtures + "/healthy-8";
    cfg.probe_timeout_ms = 5000;
    job.node = "n1";
  }
  std::vector<CheckResult> Run(const char* faults, const CheckDescriptor& d, Phase phase = Phase::kHealth) {
    if (faults != nullptr) ::setenv("PREFLIGHT_FAKE_NVML", faults, 1);
    else ::unsetenv("PREFLIGHT_FAKE_NVML");
    FsRoot fs(cfg.fsroot);
    CheckEnv env{cfg, fs, job, phase, Level::kQuick};
    auto r = RunChecks(env, {d});
    ::unsetenv("PREFLIGHT_FAKE_NVML");
    return r;
  }
  std::vector<CheckResult> Gpus(const char* faults = nullptr, Phase phase = Phase::kHealth) {
    return Run(faults, CheckDescriptor{"gpu", "", Level::kQuick, CheckGpus}, phase);
  }
};

const CheckResult* Find(const std::vector<CheckResult>& rs, const std::string& check, const std::string& dev_prefix) {
  for (const auto& r : rs)
    if (r.check == check && r.device.rfind(dev_prefix, 0) == 0) return &r;
  return nullptr;
}

int Count(const std::vector<CheckResult>& rs, Verdict v) {
  int n = 0;
  for (const auto& r : rs) n += r.verdict == v;
  return n;
}

TEST(Gpus, HealthyEightGpuNodePassesEveryCheck) {
  Env e;
  auto rs = e.Gpus();
  EXPECT_EQ(Count(rs, Verdict::kFail), 0);
  const CheckResult* c = Find(rs, "gpu.count", "node");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->value, "8");
  EXPECT_NE(c->threshold.find("/dev/nvidiaN"), std::string::npos);  // expected count from the fixture's /dev
  // 1 count + 8 GPUs x (present + 9 checks)
  EXPECT_EQ(rs.size(), 1u + 8 * 10);
  const CheckResult* p = Find(rs, "gpu.pcie", "GPU7 0000:db:00.0");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->value, "gen5 x16 (max gen5 x16)");
}

struct FaultCase {
  const char* faults;
  const char* check;
  const char* device;
  const char* message_part;
};

TEST(Gpus, EachInjectedFaultFailsItsCheckNamingGpuAndFigure) {
  const FaultCase cases[] = {
      {"ecc_volatile 2 3", "gpu.ecc", "GPU2 0000:3a:00.0", "volatile 3, aggregate 0 > 0"},
      {"ecc_aggregate 1 9", "gpu.ecc", "GPU1", "aggregate 9 > 0"},
      {"retired_pages 3 61", "gpu.retired_pages", "GPU3", "retired pages 61 > 60"},
      {"pending_retirement 0", "gpu.retired_pages", "GPU0", "page retirement pending"},
      {"remap_failure 4", "gpu.row_remap", "GPU4", "row remapping failed"},
      {"remap_pending 4", "gpu.row_remap", "GPU4", "row remap pending"},
      {"gone 5", "gpu.present", "GPU5", "fallen off the bus"},
      {"temp 6 97", "gpu.temperature", "GPU6", "temperature 97C > 85C"},
      {"throttle 7 0x48", "gpu.throttle", "GPU7", "clocks throttled: hw_slowdown,hw_thermal"},
      {"pcie_width 1 8", "gpu.pcie", "GPU1", "PCIe link width x8 < x16"},
      {"nvlink_down 2 5;nvlink_down 2 11", "gpu.nvlink", "GPU2", "NVLinks up 16 < 18 (down: 5,11)"},
      {"gpus 7", "gpu.count", "node", "NVML sees 7 GPUs, expected 8"},
  };
  for (const auto& fc : cases) {
    Env e;
    auto rs = e.Gpus(fc.faults);
    const CheckResult* r = Find(rs, fc.check, fc.device);
    ASSERT_NE(r, nullptr) << fc.faults;
    EXPECT_EQ(r->verdict, Verdict::kFail) << fc.faults;
    EXPECT_NE(r->message.find(fc.message_part), std::string::npos) << fc.faults << ": " << r->message;
    EXPECT_EQ(Count(rs, Verdict::kFail), 1) << fc.faults;  // nothing else is blamed
  }
}

TEST(Gpus, SiteExpectationsForModesAndPcieGeneration) {
  Env e;
  e.cfg.gpu_persistence = GpuPersistence::kOn;
  e.cfg.gpu_compute_mode = "exclusive_process";
  e.cfg.gpu_pcie_gen = 5;
  auto rs = e.Gpus("persistence 1 off;pcie_gen 2 4");
  const CheckResult* p = Find(rs, "gpu.persistence", "GPU1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->verdict, Verdict::kFail);
  EXPECT_EQ(p->message, "persistence mode off, site expects on");
  EXPECT_EQ(Count(rs, Verdict::kFail), 8 + 1 + 1);  // compute mode on all 8, persistence, gen
  const CheckResult* g = Find(rs, "gpu.pcie", "GPU2");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->message.find("gen4 < gen5"), std::string::npos) << g->message;
}

TEST(Gpus, UnsupportedCountersAreSkippedNotPassed) {
  Env e;
  auto rs = e.Gpus("ecc_unsupported *;no_nvlink 0");
  const CheckResult* r = Find(rs, "gpu.ecc", "GPU3");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->verdict, Verdict::kSkip);
  EXPECT_EQ(r->message.rfind("skipped: ", 0), 0u);
  const CheckResult* n = Find(rs, "gpu.nvlink", "GPU0");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->verdict, Verdict::kSkip);
  EXPECT_EQ(Count(rs, Verdict::kFail), 0);
}

TEST(Gpus, PrologChecksOnlyTheJobsGpus) {
  Env e;
  e.job.gpus = {1, 3};
  auto rs = e.Gpus("ecc_volatile 0 5", Phase::kProlog);  // GPU0 is not the job's
  EXPECT_EQ(Count(rs, Verdict::kFail), 0);
  EXPECT_NE(Find(rs, "gpu.ecc", "GPU1"), nullptr);
  EXPECT_NE(Find(rs, "gpu.ecc", "GPU3"), nullptr);
  EXPECT_EQ(Find(rs, "gpu.ecc", "GPU0"), nullptr);
  EXPECT_EQ(rs.size(), 1u + 2 * 10);
}

TEST(Gpus, MissingLibraryIsSkippedOnACpuNodeAndFailsWhereGpusAreExpected) {
  Env e;
  e.cfg.nvml_library = e.tmp + "/no-such-libnvidia-ml.so.1";
  e.cfg.fsroot = kFixtures + "/roce-2";  // no /dev/nvidiaN
  auto rs = e.Gpus();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].check, "gpu.nvml");
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_NE(rs[0].message.find("skipped: cannot load " + e.cfg.nvml_library), std::string::npos) << rs[0].message;

  e.cfg.gpu_count = 4;
  rs = e.Gpus();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_NE(rs[0].message.find("should have 4 GPUs"), std::string::npos) << rs[0].message;
}

TEST(Gpus, ALibraryThatIsNotNvmlAndAnEmptyNameAreRefusedByName) {
  Env e;
  e.cfg.nvml_library = "libc.so.6";
  auto rs = e.Gpus();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);  // the fixture has 8 /dev/nvidiaN
  EXPECT_NE(rs[0].message.find("libc.so.6 lacks nvmlInit_v2"), std::string::npos) << rs[0].message;
  e.cfg.nvml_library = "";  // dlopen("") would return the program itself
  rs = e.Gpus();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_NE(rs[0].message.find("nvml_library is empty"), std::string::npos) << rs[0].message;
}

TEST(Gpus, DriverNotLoadedIsSkippedWithNvmlsReason) {
  Env e;
  e.cfg.fsroot = kFixtures + "/roce-2";
  auto rs = e.Gpus("init_error 9");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_NE(rs[0].message.find("nvmlInit_v2: Driver Not Loaded (9)"), std::string::npos) << rs[0].message;
}

TEST(Gpus, HungNvmlCallFailsThatCheckOnlyAndKeepsEarlierResults) {
  Env e;
  e.cfg.probe_timeout_ms = 300;
  ::setenv("PREFLIGHT_FAKE_NVML", "hang nvmlDeviceGetTemperature 2", 1);
  FsRoot fs(e.cfg.fsroot);
  CheckEnv env{e.cfg, fs, e.job, Phase::kHealth, Level::kQuick};
  std::vector<CheckDescriptor> ds = {{"gpu", "", Level::kQuick, CheckGpus},
                                     {"ib", "", Level::kQuick, CheckInterconnect}};
  auto rs = RunChecks(env, ds);
  ::unsetenv("PREFLIGHT_FAKE_NVML");
  const CheckResult* h = Find(rs, "gpu.temperature", "GPU2 0000:3a:00.0");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->verdict, Verdict::kFail);
  EXPECT_EQ(h->message, "probe hung in nvmlDeviceGetTemperature: no answer within 300 ms");
  // Results streamed before the hang survive; the other check is untouched.
  const CheckResult* before = Find(rs, "gpu.temperature", "GPU1");
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(before->verdict, Verdict::kPass);
  const CheckResult* ib = Find(rs, "ib.port", "mlx5_7 port 1");
  ASSERT_NE(ib, nullptr);
  EXPECT_EQ(ib->verdict, Verdict::kPass);
  EXPECT_EQ(Count(rs, Verdict::kFail), 1);
}

TEST(Gpus, HangInInitAndCrashAreReportedAgainstTheCall) {
  Env e;
  e.cfg.probe_timeout_ms = 300;
  auto rs = e.Gpus("hang nvmlInit_v2");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].check, "gpu.nvml");
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_NE(rs[0].message.find("hung in nvmlInit_v2"), std::string::npos) << rs[0].message;

  rs = e.Gpus("crash nvmlDeviceGetRemappedRows 4");
  const CheckResult* c = Find(rs, "gpu.row_remap", "GPU4");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_NE(c->message.find("probe crashed in nvmlDeviceGetRemappedRows: signal 11"), std::string::npos) << c->message;
}

// --- interconnect ----------------------------------------------------------

std::vector<CheckResult> Ib(Env& e) {
  return e.Run(nullptr, CheckDescriptor{"ib", "", Level::kQuick, CheckInterconnect});
}

TEST(Interconnect, HealthyNodeAllPortsPass) {
  Env e;
  e.cfg.ib_rate = 400;
  e.cfg.ib_link_layer = LinkLayer::kInfiniBand;
  e.cfg.ib_hcas = {"mlx5_0", "mlx5_7"};
  auto rs = Ib(e);
  EXPECT_EQ(Count(rs, Verdict::kFail), 0);
  // 2 present + 2 ports x (port, rate, link_layer, flapping)
  EXPECT_EQ(rs.size(), 2u + 2 * 4);
}

TEST(Interconnect, BrokenTreeFailsEachHcaWithItsFigure) {
  Env e;
  e.cfg.fsroot = kFixtures + "/ib-broken";
  e.cfg.ib_rate = 400;
  e.cfg.ib_link_layer = LinkLayer::kInfiniBand;
  e.cfg.ib_hcas = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"};
  auto rs = Ib(e);
  struct { const char* check; const char* dev; const char* part; } want[] = {
      {"ib.present", "mlx5_7", "expected HCA missing"},
      {"ib.port", "mlx5_1 port 1", "port DOWN/Polling, need ACTIVE/LinkUp"},
      {"ib.rate", "mlx5_2 port 1", "rate 100 Gb/sec (4X EDR) < 400 Gb/sec"},
      {"ib.link_layer", "mlx5_3 port 1", "link layer Ethernet, expected InfiniBand"},
      {"ib.port", "mlx5_4 port 1", "Is a directory"},
      {"ib.port", "mlx5_5", "no ports under"},
      {"ib.rate", "mlx5_6 port 1", "cannot parse rate 'fast'"},
  };
  for (const auto& w : want) {
    const CheckResult* r = Find(rs, w.check, w.dev);
    ASSERT_NE(r, nullptr) << w.check << " " << w.dev;
    EXPECT_EQ(r->verdict, Verdict::kFail) << w.dev;
    EXPECT_NE(r->message.find(w.part), std::string::npos) << r->message;
  }
  const CheckResult* ok = Find(rs, "ib.port", "mlx5_0 port 1");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->verdict, Verdict::kPass);
}

TEST(Interconnect, RoceNetdevDownFails) {
  Env e;
  e.cfg.fsroot = kFixtures + "/roce-2";
  auto rs = Ib(e);
  const CheckResult* up = Find(rs, "ib.netdev", "mlx5_0 port 1");
  const CheckResult* down = Find(rs, "ib.netdev", "mlx5_1 port 1");
  ASSERT_NE(up, nullptr);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(up->verdict, Verdict::kPass);
  EXPECT_EQ(down->verdict, Verdict::kFail);
  EXPECT_EQ(down->message, "RoCE netdev not up: ens1f0np0 is down");
}

TEST(Interconnect, NoHcaIsSkippedUnlessExpected) {
  Env e;
  e.cfg.fsroot = e.tmp;  // an empty root
  auto rs = Ib(e);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  e.cfg.ib_hcas = {"mlx5_0"};
  rs = Ib(e);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[0].device, "mlx5_0");
}

TEST(Interconnect, LinkDownedCounterMovingIsFlapping) {
  Env e;
  ASSERT_EQ(std::system(("cp -a " + kFixtures + "/healthy-8 " + e.tmp + "/root").c_str()), 0);
  e.cfg.fsroot = e.tmp + "/root";
  auto first = Ib(e);
  EXPECT_EQ(Count(first, Verdict::kFail), 0);
  ASSERT_TRUE(WriteFileAtomic(e.tmp + "/root/sys/class/infiniband/mlx5_3/ports/1/counters/link_downed", "4\n").ok());
  auto second = Ib(e);
  const CheckResult* f = Find(second, "ib.flapping", "mlx5_3 port 1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kFail);
  EXPECT_EQ(f->message, "link went down 4 times since last check (link_downed 0 -> 4)");
  EXPECT_EQ(Count(second, Verdict::kFail), 1);
  auto third = Ib(e);  // stable again
  EXPECT_EQ(Count(third, Verdict::kFail), 0);
}

// --- Xid -------------------------------------------------------------------

TEST(Xid, ParsesKmsgRecordsSkippingContinuationsAndOldOnes) {
  std::string log =
      "6,10,1000,-;nvidia-nvlink: registered\n"
      "3,11,2000,-;NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
      " SUBSYSTEM=pci\n"
      "3,12,3000,-;NVRM: Xid (PCI:0000:2a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n";
  uint64_t last = 0;
  auto ev = ParseKmsgXids(log, 11, &last);
  EXPECT_EQ(last, 12u);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].xid, 48);
  EXPECT_EQ(ev[0].pci, "0000:2a:00");
  EXPECT_EQ(ParseKmsgXids(log, 0, nullptr).size(), 2u);
}

TEST(Xid, NewXidAfterBaselineFailsAndStaysOpenUserOnesOnlyWarn) {
  Env e;
  ASSERT_EQ(std::system(("cp -a " + kFixtures + "/healthy-8 " + e.tmp + "/root").c_str()), 0);
  e.cfg.fsroot = e.tmp + "/root";
  CheckDescriptor d{"gpu.xid", "", Level::kQuick, CheckXid};
  auto rs = e.Run(nullptr, d);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass);
  EXPECT_NE(rs[0].message.find("baseline"), std::string::npos);

  std::ofstream(e.tmp + "/root/dev/kmsg", std::ios::app)
      << "4,3,300,-;NVRM: Xid (PCI:0000:1b:00): 13, Graphics Exception\n";
  rs = e.Run(nullptr, d);
  EXPECT_EQ(rs[0].verdict, Verdict::kWarn) << rs[0].message;  // 13 is the application's (xid.h): no drain
  EXPECT_EQ(rs[0].owner, FaultOwner::kUser);

  std::ofstream(e.tmp + "/root/dev/kmsg", std::ios::app)
      << "3,4,400,-;NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus.\n";
  rs = e.Run(nullptr, d);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_EQ(rs[0].device, "PCI 0000:1b:00");  // no GPU at 1b in the fixture's /proc/driver/nvidia
  EXPECT_EQ(rs[0].message.rfind("Xid 79 (GPU has fallen off the bus, NVIDIA: RESTART_BM): drain_reset; Xid 13", 0), 0u)
      << rs[0].message;
  rs = e.Run(nullptr, d);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail) << "an Xid finding stays until cleared";

  // A reboot (new boot id) starts a fresh baseline.
  ASSERT_TRUE(WriteFileAtomic(e.tmp + "/root/proc/sys/kernel/random/boot_id", "another-boot\n").ok());
  rs = e.Run(nullptr, d);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass) << rs[0].message;
}

TEST(Xid, NoKernelLogIsSkipped) {
  Env e;
  e.cfg.fsroot = e.tmp;
  auto rs = e.Run(nullptr, CheckDescriptor{"gpu.xid", "", Level::kQuick, CheckXid});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
}

TEST(HealthConfig, BadValuesAreRejectedWithTheKey) {
  Config c;
  Status s = ApplyOverrides(c, {"gpu_persistence=maybe"}, "--set", "n1");
  EXPECT_NE(s.message().find("key 'gpu_persistence': bad value 'maybe' (expected any, on, off)"), std::string::npos)
      << s.message();
  s = ApplyOverrides(c, {"gpu_throttle_fail=hw_slowdown,too_hot"}, "--set", "n1");
  EXPECT_NE(s.message().find("unknown throttle reason 'too_hot'"), std::string::npos) << s.message();
  s = ApplyOverrides(c, {"xid_ignore=13,x"}, "--set", "n1");
  EXPECT_NE(s.message().find("bad Xid 'x'"), std::string::npos) << s.message();
  s = ApplyOverrides(c, {"ib_hcas=mlx5_0,,mlx5_1"}, "--set", "n1");
  EXPECT_NE(s.message().find("empty item"), std::string::npos) << s.message();
  ASSERT_TRUE(ApplyOverrides(c, {"ib_hcas=mlx5_0, mlx5_1", "nvml_fault_file=/x/%n.faults"}, "--set", "n7").ok());
  EXPECT_EQ(c.ib_hcas, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(c.nvml_fault_file, "/x/n7.faults");
  EXPECT_EQ(ThrottleNames(ThrottleMask({"hw_thermal", "idle"})), "idle,hw_thermal");
}

}  // namespace
}  // namespace preflight
