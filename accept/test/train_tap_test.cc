// The training stage's tap (accept_train.h): the progress-line grammar on
// public training logs' lines, the tap around real commands (sh), and the
// reader of its output.
#include "preflight/accept_train.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "preflight/text.h"
#include "preflight_test/temp_dir.h"
#include "tap_capture.h"

namespace preflight::accept {
namespace {

TEST(ProgressLine, ThePublicLogsLinesAndTheExamples) {
  struct Case {
    const char* line;
    long step;
    bool has_loss;
    double loss;
  };
  const Case cases[] = {
      {"[rank0]:[titan] 2025-01-10 12:00:01,123 - root - INFO - step:  1  loss:  8.1661  grad_norm:  1.3  tps: 3,502",
       1, true, 8.1661},                                                      // torchtitan
      {"iter 20: loss 4.2143, time 31.12ms, mfu 12.3%", 20, true, 4.2143},  // nanoGPT
      {"step 0, loss: 10.89", 0, true, 10.89},                               // nanoGPT-style loops
      {"step 7 loss 0.1429", 7, true, 0.1429},                               // preflight's example
      {"Step=12 Loss=3e-2", 12, true, 0.03},
      {"step 5", 5, false, 0},
  };
  for (const Case& c : cases) {
    auto p = ParseProgressLine(c.line);
    ASSERT_TRUE(p) << c.line;
    EXPECT_EQ(p->step, c.step) << c.line;
    EXPECT_EQ(p->has_loss, c.has_loss) << c.line;
    if (c.has_loss) {
      EXPECT_DOUBLE_EQ(p->loss, c.loss) << c.line;
    }
  }
}

TEST(ProgressLine, NanAndInfAreNotFinite) {
  for (const char* l : {"step 9 loss nan", "step 9 loss: NaN", "iter 9: loss inf", "step 9 loss=-inf"}) {
    auto p = ParseProgressLine(l);
    ASSERT_TRUE(p) << l;
    EXPECT_TRUE(p->has_loss) << l;
    EXPECT_FALSE(p->loss_finite) << l;
  }
}

TEST(ProgressLine, OtherLinesAreNot) {
  for (const char* l : {"done steps=100 restart=0", "stepping into the loop", "iteration 5", "step_time 0.3",
                        "loading step", "step: x", "", "result sum=55 steps=10 restart=0", "steps 4"}) {
    EXPECT_FALSE(ParseProgressLine(l)) << l;
  }
}

TEST(ProgressLine, ErrorLines) {
  EXPECT_TRUE(IsTrainErrorLine("n1:123:456 [0] NCCL WARN NET/IB : Got completion with error 12"));
  EXPECT_TRUE(IsTrainErrorLine("RuntimeError: NCCL error in: ... ncclInternalError: Internal check failed."));
  EXPECT_TRUE(IsTrainErrorLine("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)"));
  EXPECT_TRUE(IsTrainErrorLine("Traceback (most recent call last):"));
  EXPECT_TRUE(IsTrainErrorLine("CUDA error: an illegal memory access was encountered"));
  EXPECT_FALSE(IsTrainErrorLine("step 3 loss 2.0"));
  EXPECT_FALSE(IsTrainErrorLine("NCCL INFO Using network IB"));
}

std::string Capture(const TrainTapArgs& a, int* rc = nullptr) { return testing::CaptureTap(a, rc); }

// The tap around `script` (sh -c) for `seconds`.
std::string Tap(const std::string& script, double seconds, double grace = 10) {
  TrainTapArgs a;
  a.cmd = {"/bin/sh", "-c", script};
  a.seconds = seconds;
  a.grace = grace;
  return Capture(a);
}

TEST(TrainTap, ACommandThatEndsIsSampledAndItsExitKept) {
  std::string o = Tap("for i in 1 2 3 4 5; do echo \"step $i loss 0.$i\"; done; echo 'NCCL WARN link down'; exit 3", 30);
  TapRecord r = ReadTap(o);
  ASSERT_FALSE(r.steps.empty()) << o;
  EXPECT_EQ(r.steps.front().second, 1) << "the first progress line is always printed";
  EXPECT_EQ(r.steps.back().second, 5) << "the newest is flushed at the end";
  EXPECT_TRUE(r.has_loss);
  EXPECT_DOUBLE_EQ(r.last_loss, 0.5);
  EXPECT_FALSE(r.loss_nonfinite);
  ASSERT_EQ(r.errors.size(), 1u) << o;
  EXPECT_NE(r.errors[0].find("NCCL WARN link down"), std::string::npos);
  EXPECT_EQ(r.end, "exit 3") << o;
  EXPECT_EQ(r.lines, 6);
  EXPECT_EQ(r.last, "NCCL WARN link down");
}

TEST(TrainTap, AtTheBoundTheCommandIsStoppedEvenIfItIgnoresTerm) {
  std::string o = Tap("trap '' TERM; i=0; while :; do i=$((i+1)); echo \"step $i\"; sleep 0.05; done", 1.5, 1);
  TapRecord r = ReadTap(o);
  EXPECT_EQ(r.end, "bound") << o;
  EXPECT_GE(r.steps.size(), 2u) << o;
  EXPECT_FALSE(r.has_loss);
}

TEST(TrainTap, ACommandThatClosesItsOutputIsStillStoppedAtTheBound) {
  std::string o = Tap("echo 'step 1'; exec >/dev/null 2>&1; trap '' TERM; sleep 30", 1.5, 1);
  TapRecord r = ReadTap(o);
  EXPECT_EQ(r.end, "bound") << o;
  ASSERT_EQ(r.steps.size(), 1u) << o;
}

TEST(TrainTap, TextItKeepsIsOnePrintableLineOfValidUtf8) {
  // A control byte, a CRLF end, and an error line far past 200 bytes of
  // two-byte characters (a cut must not split one).
  std::string o = Tap("printf 'NCCL WARN \\033[31mred\\033[0m'; printf '\\r\\n'; "
                      "printf 'CUDA error '; for i in $(seq 300); do printf '\\303\\251'; done; echo; "
                      "printf 'last\\r\\n'",
                      30);
  TapRecord r = ReadTap(o);
  ASSERT_EQ(r.errors.size(), 2u) << o;
  EXPECT_NE(r.errors[0].find("NCCL WARN \\x1b[31mred\\x1b[0m"), std::string::npos) << r.errors[0];
  EXPECT_EQ(r.errors[0].find('\r'), std::string::npos);
  EXPECT_TRUE(IsValidUtf8(r.errors[1])) << "cut on a character boundary";
  EXPECT_LE(r.errors[1].size(), 200u + 10) << "200 bytes of text after the time";
  EXPECT_EQ(r.last, "last");
}

TEST(TrainTap, NonFiniteLossIsReportedAtOnce) {
  std::string o = Tap("echo 'step 1 loss 2.0'; echo 'step 2 loss nan'; echo 'step 3 loss 1.0'", 30);
  TapRecord r = ReadTap(o);
  EXPECT_TRUE(r.loss_nonfinite) << o;
}

TEST(TrainTap, ACommandThatCannotStartIsAnEndLine) {
  TrainTapArgs a;
  a.cmd = {"/nonexistent/train"};
  a.seconds = 5;
  int rc = 0;
  std::string o = Capture(a, &rc);
  EXPECT_EQ(rc, 2);
  TapRecord r = ReadTap(o);
  EXPECT_EQ(r.end, "exit 127") << o;
  EXPECT_NE(r.last.find("/nonexistent/train"), std::string::npos) << r.last;
}

TEST(TrainTap, AHugeLineIsCutAndCountsOnce) {
  std::string o = Tap("head -c 100000 /dev/zero | tr '\\\\0' x; echo; echo 'step 4 loss 1'", 30);
  TapRecord r = ReadTap(o);
  EXPECT_EQ(r.lines, 2) << o;
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].second, 4);
}

TEST(TrainTap, GpusAreSampledOncePerWindowOrSaidOnceWhyNot) {
  TrainTapArgs a;
  a.cmd = {"/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo \"step $i\"; sleep 0.25; done"};
  a.seconds = 20;  // window 1 s; the command ends after about 3 s
  int looks = 0;
  a.gpus = [&looks]() -> Expected<GpuLook> {
    ++looks;
    GpuLook g;
    g.gpus = 4;
    g.util_mean = 87.5;
    g.power_w = 1800;
    return g;
  };
  TapRecord r = ReadTap(Capture(a));
  ASSERT_GE(r.gpu.size(), 2u) << "one look a window: at 0 s, 1 s, 2 s...";
  // At most one look a window (1 s) over the run, however long a loaded
  // machine made it: the last progress line came within its last second.
  ASSERT_FALSE(r.steps.empty());
  EXPECT_LE(static_cast<double>(r.gpu.size()), r.steps.back().first + 2) << "not once per window";
  EXPECT_EQ(static_cast<int>(r.gpu.size()), looks);
  EXPECT_EQ(r.gpu[0].gpus, 4);
  EXPECT_DOUBLE_EQ(r.gpu[0].util_mean, 87.5);
  EXPECT_DOUBLE_EQ(r.gpu[0].power_w, 1800);
  EXPECT_EQ(r.gpu_off, "");

  TrainTapArgs b;
  b.cmd = {"/bin/sh", "-c", "echo step 1; sleep 2.5; echo step 2"};
  b.seconds = 20;
  int tries = 0;
  b.gpus = [&tries]() -> Expected<GpuLook> {
    ++tries;
    return Status::Unavailable("libnvidia-ml.so.1: cannot open shared object file");
  };
  TapRecord off = ReadTap(Capture(b));
  EXPECT_TRUE(off.gpu.empty());
  EXPECT_EQ(off.gpu_off, "libnvidia-ml.so.1: cannot open shared object file");
  EXPECT_EQ(tries, 1) << "a CPU-only node is asked once";
}

TEST(StepRate, BetweenSamples) {
  auto v = StepRate({{1.0, 10}, {2.0, 20}, {4.0, 30}, {4.0, 31}});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_DOUBLE_EQ(v[0].second, 10);
  EXPECT_DOUBLE_EQ(v[1].first, 4.0);
  EXPECT_DOUBLE_EQ(v[1].second, 5);
  EXPECT_TRUE(StepRate({{1.0, 1}}).empty());
  EXPECT_DOUBLE_EQ(RateWindow(30), 1.5);
  EXPECT_DOUBLE_EQ(RateWindow(5), 1);
}

}  // namespace
}  // namespace preflight::accept
