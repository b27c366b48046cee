// RunSupervised with real child processes: `sh` and the stand-in training
// program tests/apps/pf_test_app (PF_TEST_APP). No assertion is on timing;
// the short budgets only keep the tests quick.
#include "preflight/supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace preflight {
namespace {

TEST(Supervisor, ReturnsTheChildsExitCode) {
  auto r = RunSupervised({"sh", "-c", "exit 7"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->signal, 0);
}

TEST(Supervisor, MissingCommandIsAnError) {
  auto r = RunSupervised({"/nonexistent/cmd"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/cmd"), std::string::npos);
}

TEST(Supervisor, RelaysSignalsToTheChild) {
  // The child traps USR2 and exits 42 when it arrives.
  std::thread sender([] {
    usleep(300000);
    kill(getpid(), SIGUSR2);
  });
  auto r = RunSupervised({"sh", "-c", "trap 'exit 42' USR2; for i in $(seq 1 100); do sleep 0.05; done; exit 1"});
  sender.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 42);
  ASSERT_FALSE(r->relayed.empty());
  EXPECT_EQ(r->relayed[0], SIGUSR2);
}

TEST(Signals, ParseNamesAndNumbers) {
  EXPECT_EQ(*ParseSignal("USR2"), SIGUSR2);
  EXPECT_EQ(*ParseSignal("SIGTERM"), SIGTERM);
  EXPECT_EQ(*ParseSignal("15"), SIGTERM);
  EXPECT_EQ(*ParseSignal("none"), 0);
  EXPECT_FALSE(ParseSignal("USR3").ok());
  auto l = ParseSignalList("USR2,TERM");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::vector<int>{SIGUSR2, SIGTERM}));
  auto bad = ParseSignalList("USR2,KILL");  // KILL cannot be caught
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("KILL"), std::string::npos);
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
}

class SuperviseApp : public ::testing::Test {
 protected:
  void SetUp() override {
    out_path_ = dir_ + "/out";
    out_ = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(out_, 0);
  }
  void TearDown() override { close(out_); }
  SuperviseOptions Opts(std::vector<std::string> args) {
    SuperviseOptions o;
    o.argv = {PF_TEST_APP};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.out_fd = o.err_fd = out_;
    o.env = {"PREFLIGHT_CHECKPOINT_DIR=" + dir_, "PREFLIGHT_CHECKPOINT_SIGNAL=USR2",
             "PREFLIGHT_HEARTBEAT_FILE=" + dir_ + "/hb", "PREFLIGHT_CHECKPOINT_REQUEST=" + dir_ + "/req",
             "PREFLIGHT_RESUME_FROM="};
    o.grace_s = 60;
    o.kill_wait_s = 60;
    return o;
  }
  std::string Output() {
    std::ifstream in(out_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Sends `sig` to this process once the app has touched its heartbeat file.
  std::thread SignalWhenRunning(int sig) {
    std::string hb = dir_ + "/hb";
    return std::thread([hb, sig] {
      for (int i = 0; i < 6000 && access(hb.c_str(), F_OK) != 0; ++i) usleep(10000);
      kill(getpid(), sig);
    });
  }
  preflight_test::TempDir tmp_{"supervise"};
  std::string dir_ = tmp_.path(), out_path_;
  int out_ = -1;
};

TEST_F(SuperviseApp, PreemptionSignalAsksForACheckpoint) {
  auto o = Opts({"--steps", "100000", "--step-ms", "10"});
  o.preempt_signals = {SIGUSR2, SIGTERM};
  o.checkpoint_signal = SIGUSR2;
  auto t = SignalWhenRunning(SIGUSR2);
  auto r = RunSupervised(o);
  t.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->preempted);
  EXPECT_EQ(r->preempt_signal, SIGUSR2);
  EXPECT_FALSE(r->grace_expired);
  EXPECT_EQ(r->exit.exit_code, 0);
  EXPECT_TRUE(r->exit.relayed.empty());  // the preemption signal is not relayed as is
  EXPECT_NE(Output().find("checkpointed at step"), std::string::npos);
}

TEST_F(SuperviseApp, PreemptionThroughTheRequestFileOnly) {
  auto o = Opts({"--steps", "100000", "--step-ms", "10"});
  o.env.push_back("PREFLIGHT_CHECKPOINT_SIGNAL=none");
  o.preempt_signals = {SIGTERM};
  o.checkpoint_signal = 0;
  o.checkpoint_request_file = dir_ + "/req";
  auto t = SignalWhenRunning(SIGTERM);
  auto r = RunSupervised(o);
  t.join();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preempted);
  EXPECT_EQ(r->exit.exit_code, 0);
  EXPECT_EQ(access((dir_ + "/req").c_str(), F_OK), 0);
  EXPECT_NE(Output().find("checkpointed at step"), std::string::npos);
}

TEST_F(SuperviseApp, GraceRunsOutThenTermThenKill) {
  // The app ignores SIGTERM and takes "forever" to checkpoint.
  auto o = Opts({"--steps", "100000", "--step-ms", "10", "--ignore-term", "--checkpoint-ms", "600000"});
  o.preempt_signals = {SIGUSR2};
  o.checkpoint_signal = SIGUSR2;
  o.grace_s = 0.3;
  o.kill_wait_s = 0.3;
  auto t = SignalWhenRunning(SIGUSR2);
  auto r = RunSupervised(o);
  t.join();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preempted);
  EXPECT_TRUE(r->grace_expired);
  EXPECT_EQ(r->exit.signal, SIGKILL);
  EXPECT_EQ(r->exit.exit_code, 128 + SIGKILL);
}

TEST_F(SuperviseApp, HungCommandIsDetectedAndKilled) {
  auto o = Opts({"--steps", "100000", "--step-ms", "10", "--hang-at", "3"});
  o.stall.output_s = 0.5;
  o.kill_on_stall = true;
  o.kill_wait_s = 5;
  std::vector<Alert> seen;
  o.on_alert = [&](const Alert& a) { seen.push_back(a); };
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, AlertKind::kOutput);
  EXPECT_TRUE(r->killed_for_alert);
  EXPECT_EQ(r->exit.signal, SIGTERM);
  ASSERT_FALSE(r->tail.empty());
  EXPECT_EQ(r->tail.back(), "hanging at step 3");
}

TEST_F(SuperviseApp, HeartbeatStallWhileOutputFlows) {
  auto o = Opts({"--steps", "100000", "--step-ms", "10", "--no-heartbeat"});
  o.heartbeat_file = dir_ + "/hb";
  o.stall.heartbeat_s = 0.5;
  o.kill_on_stall = true;
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->alerts.empty());
  EXPECT_EQ(r->alerts[0].kind, AlertKind::kHeartbeat);
  EXPECT_TRUE(r->killed_for_alert);
}

class FakeGpu : public GpuUtilSource {  // the NVML seam; real NVML binds at merge
 public:
  explicit FakeGpu(std::vector<unsigned> u) : u_(std::move(u)) {}
  Expected<std::vector<unsigned>> Utilization() override {
    ++calls;
    return u_;
  }
  std::atomic<int> calls{0};

 private:
  std::vector<unsigned> u_;
};

TEST_F(SuperviseApp, IdleGpusAreAStall) {
  FakeGpu gpu({0, 1});
  auto o = Opts({"--steps", "100000", "--step-ms", "10"});
  o.gpu = &gpu;
  o.gpu_sample_s = 0.1;
  o.stall.gpu_s = 0.5;
  o.kill_on_stall = true;
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->alerts.empty());
  EXPECT_EQ(r->alerts[0].kind, AlertKind::kGpu);
  EXPECT_GT(gpu.calls.load(), 1);
}

TEST_F(SuperviseApp, NanLineAlertsButRunsOnWhenNotKilling) {
  auto o = Opts({"--steps", "6", "--step-ms", "1", "--nan-at", "3"});
  o.stall.nan_pattern = "\\b([Nn]a[Nn]|NAN)\\b";
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->alerts.size(), 1u);
  EXPECT_EQ(r->alerts[0].kind, AlertKind::kNan);
  EXPECT_NE(r->alerts[0].detail.find("step 3 loss nan"), std::string::npos);
  EXPECT_FALSE(r->killed_for_alert);
  EXPECT_EQ(r->exit.exit_code, 0);
}

TEST_F(SuperviseApp, OutputPassesThroughAndTailKeepsStderr) {
  auto o = Opts({"--steps", "5", "--step-ms", "1", "--fail-at", "4", "--code", "3", "--message", "plain error"});
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.exit_code, 3);
  std::string out = Output();
  EXPECT_NE(out.find("step 3 loss 3.333\n"), std::string::npos);
  EXPECT_NE(out.find("plain error\n"), std::string::npos);
  ASSERT_FALSE(r->tail.empty());
  EXPECT_EQ(r->tail.back(), "plain error");
}

}  // namespace
}  // namespace preflight
