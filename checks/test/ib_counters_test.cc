// ib.counters against a sysfs tree the test writes (the layout of
// tests/fixtures/sysfs: mlx5 counters/ and hw_counters/), through RunChecks.
#include "preflight/ib_counters.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <stdlib.h>

#include <fstream>

#include "preflight/fileutil.h"

namespace preflight {
namespace {

struct Node {
  preflight_test::TempDir dir_{"ibc"};
  std::string tmp = dir_.path(), root;
  Config cfg;
  JobContext job;
  Node() {
    root = tmp + "/root";
    cfg.fsroot = root;
    cfg.state_dir = tmp + "/state";
    job.node = "n1";
    Boot("boot-a");
    for (const char* h : {"mlx5_0", "mlx5_1"}) {
      for (const char* c : {"symbol_error", "link_error_recovery", "port_xmit_discards"}) Set(h, "counters", c, 0);
      Set(h, "hw_counters", "local_ack_timeout_err", 0);
    }
  }
  void Boot(const std::string& id) {
    MakeDirs(root + "/proc/sys/kernel/random", 0755);
    std::ofstream(root + "/proc/sys/kernel/random/boot_id") << id << "\n";
  }
  void Set(const std::string& hca, const std::string& dir, const std::string& c, uint64_t v) {
    std::string d = root + "/sys/class/infiniband/" + hca + "/ports/1/" + dir;
    MakeDirs(d, 0755);
    std::ofstream(d + "/" + c) << v << "\n";
  }
  std::vector<CheckResult> Run() {
    FsRoot fs(cfg.fsroot);
    CheckEnv env{cfg, fs, job, Phase::kHealth, Level::kQuick};
    return RunChecks(env, {CheckDescriptor{"ib.counters", "", Level::kQuick, CheckIbCounters}});
  }
};

const CheckResult* Port(const std::vector<CheckResult>& rs, const std::string& dev) {
  for (const auto& r : rs)
    if (r.check == "ib.counters" && r.device == dev) return &r;
  return nullptr;
}

TEST(IbCounters, FirstCheckIsABaselineThenARiseAboveTheFailFigureFails) {
  Node n;
  n.cfg.ib_counter_window_ms = 0;  // per check
  n.Set("mlx5_0", "counters", "symbol_error", 5000);  // old errors before preflight looked
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_EQ(r.verdict, Verdict::kPass) << Describe(r);
  EXPECT_NE(Port(rs, "mlx5_0 port 1")->message.find("baseline"), std::string::npos);

  n.Set("mlx5_0", "counters", "symbol_error", 5150);  // +150 > 100 (default ib_counter_fail)
  rs = n.Run();
  const CheckResult* p = Port(rs, "mlx5_0 port 1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->verdict, Verdict::kFail);
  EXPECT_EQ(p->value, "symbol_error +150");
  EXPECT_EQ(p->threshold, "symbol_error <= 100 per check (ib_counter_fail)");
  EXPECT_NE(p->message.find("symbol_error rose by 150 (5000 -> 5150) > 100"), std::string::npos) << p->message;
  EXPECT_EQ(Port(rs, "mlx5_1 port 1")->verdict, Verdict::kPass);

  rs = n.Run();  // no further rise: the port passes again
  EXPECT_EQ(Port(rs, "mlx5_0 port 1")->verdict, Verdict::kPass);
}

TEST(IbCounters, RisesAddUpOverTheWindowThenANewWindowStarts) {
  Node n;  // ib_counter_window 1h (default)
  n.Run();
  n.Set("mlx5_0", "counters", "symbol_error", 60);
  EXPECT_EQ(Port(n.Run(), "mlx5_0 port 1")->verdict, Verdict::kWarn);  // +60: > 10 warns, <= 100
  n.Set("mlx5_0", "counters", "symbol_error", 120);                    // +60 again: +120 in the window
  auto prs = n.Run();
  const CheckResult* p = Port(prs, "mlx5_0 port 1");
  EXPECT_EQ(p->verdict, Verdict::kFail);
  EXPECT_NE(p->message.find("symbol_error rose by 120 (0 -> 120) > 100 in the last"), std::string::npos) << p->message;
  EXPECT_NE(p->message.find("(ib_counter_window)"), std::string::npos);
  // Age the window: the next check judges it whole, then takes a new base.
  std::string st = n.cfg.state_dir + "/nodes/n1.ibcounters";
  n.cfg.ib_counter_window_ms = 3600 * 1000;
  std::string text = *ReadWholeFile(st);
  text.replace(text.find("\nat ") + 4, text.find('\n', text.find("\nat ") + 1) - text.find("\nat ") - 4, "1");
  ASSERT_TRUE(WriteFileAtomic(st, text).ok());
  EXPECT_EQ(Port(n.Run(), "mlx5_0 port 1")->verdict, Verdict::kFail);
  EXPECT_EQ(Port(n.Run(), "mlx5_0 port 1")->verdict, Verdict::kPass) << "a new window";
}

TEST(IbCounters, SmallRiseWarnsAndHwCountersAreRead) {
  Node n;
  n.cfg.ib_counter_warn = {{"port_xmit_discards", 100}, {"local_ack_timeout_err", 5}};
  n.cfg.ib_counter_fail = {};
  n.Run();
  n.Set("mlx5_1", "counters", "port_xmit_discards", 101);
  n.Set("mlx5_0", "hw_counters", "local_ack_timeout_err", 6);
  auto rs = n.Run();
  EXPECT_EQ(Port(rs, "mlx5_1 port 1")->verdict, Verdict::kWarn);
  EXPECT_EQ(Port(rs, "mlx5_0 port 1")->verdict, Verdict::kWarn);
  EXPECT_NE(Port(rs, "mlx5_0 port 1")->message.find("local_ack_timeout_err rose by 6"), std::string::npos);
}

TEST(IbCounters, ANewBootOrAClearedCounterIsReBaselined) {
  Node n;
  n.Set("mlx5_0", "counters", "symbol_error", 1000);
  n.Run();
  n.Boot("boot-b");  // counters restart at boot; a fresh high value is not a rise
  n.Set("mlx5_0", "counters", "symbol_error", 2000);
  EXPECT_EQ(Port(n.Run(), "mlx5_0 port 1")->verdict, Verdict::kPass);
  n.Set("mlx5_0", "counters", "symbol_error", 3);  // perfquery -R cleared it
  auto rs = n.Run();
  EXPECT_EQ(Port(rs, "mlx5_0 port 1")->verdict, Verdict::kPass);
  n.Set("mlx5_0", "counters", "symbol_error", 500);
  EXPECT_EQ(Port(n.Run(), "mlx5_0 port 1")->verdict, Verdict::kFail);
}

TEST(IbCounters, SwitchedToWarnBySiteDoesNotFail) {
  Node n;
  n.cfg.check_modes["ib.counters"] = CheckMode::kWarn;
  n.Run();
  n.Set("mlx5_0", "counters", "link_error_recovery", 1000);
  auto prs = n.Run();
  const CheckResult* p = Port(prs, "mlx5_0 port 1");
  EXPECT_EQ(p->verdict, Verdict::kWarn);
  EXPECT_NE(p->message.find("check_ib_counters = warn"), std::string::npos);
}

TEST(IbCounters, SkippedWithoutHcaAndMalformedCounterFails) {
  Node n;
  n.cfg.fsroot = n.tmp + "/empty";
  auto rs = n.Run();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  n.cfg.fsroot = n.root;
  std::ofstream(n.root + "/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error") << "garbage\n";
  EXPECT_EQ(Port(n.Run(), "mlx5_1 port 1")->verdict, Verdict::kFail);
}

TEST(IbCounters, JudgeNamesEveryBreach) {
  std::vector<CounterDelta> d = {{"symbol_error", 0, 20, false}, {"port_rcv_errors", 1, 2, false}};
  auto r = JudgeIbCounters("mlx5_3 port 1", d, {{"symbol_error", 10}}, {}, 300);
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(r.value, "symbol_error +20, port_rcv_errors +1");
  EXPECT_EQ(r.message, "symbol_error rose by 20 (0 -> 20) > 10 in 300 s since the last check");
}

}  // namespace
}  // namespace preflight
