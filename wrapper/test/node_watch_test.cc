// The GPU watch on every node (issue 31, item 2): its line format, the
// classification of a node's GPUs, the attribution at a stall (an idle
// node among spinning ones, a node gone silent, every node spinning), the
// sampler through the fake NVML behind the production dlopen path, and the
// agent's loop. No assertion is on timing.
#include "preflight/node_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace preflight {
namespace {

std::vector<GpuReading> Gpus(unsigned util, double power, double limit, int n = 2) {
  std::vector<GpuReading> v;
  for (int i = 0; i < n; ++i) v.push_back(GpuReading{static_cast<unsigned>(i), util, power, limit, 1000, 81559});
  return v;
}

TEST(NodeWatch, LineRoundTrip) {
  std::string l = WatchLine("n2", Gpus(97, 81, 700));
  EXPECT_EQ(l, "preflight-watch 1 n2 0:97:81:700:1000:81559 1:97:81:700:1000:81559");
  auto s = ParseWatchLine(l);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->node, "n2");
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->gpus[1].util, 97u);
  EXPECT_DOUBLE_EQ(s->gpus[1].limit_w, 700);
  auto u = ParseWatchLine(WatchLineUnavailable("n3", "nvmlInit_v2: driver\nnot loaded"));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->unavailable, "nvmlInit_v2: driver not loaded");
  EXPECT_FALSE(ParseWatchLine("preflight-watch 1 ../x 0:1:2:3:4:5").ok());
  EXPECT_FALSE(ParseWatchLine("preflight-watch 1 n1 zero").ok());
  EXPECT_FALSE(ParseWatchLine("step 3 loss 1.0").ok());
}

TEST(NodeWatch, Classify) {
  WatchThresholds t;
  EXPECT_EQ(ClassifyNode(Gpus(100, 120, 700), t), GpuState::kSpinning);
  EXPECT_EQ(ClassifyNode(Gpus(100, 600, 700), t), GpuState::kBusy);
  EXPECT_EQ(ClassifyNode(Gpus(0, 60, 700), t), GpuState::kIdle);
  EXPECT_EQ(ClassifyNode(Gpus(50, 300, 700), t), GpuState::kMixed);
  EXPECT_EQ(ClassifyNode(Gpus(100, 120, 0), t), GpuState::kBusy);  // no limit known: never "spinning"
  EXPECT_EQ(ClassifyNode({}, t), GpuState::kUnknown);
  auto mixed = Gpus(100, 120, 700);
  mixed.push_back(GpuReading{2, 0, 60, 700, 0, 0});
  EXPECT_EQ(ClassifyNode(mixed, t), GpuState::kMixed);
}

TEST(NodeWatch, AnIdleNodeAmongSpinningOnesIsNamed) {
  NodeWatch w({"n1", "n2", "n3"}, 1, WatchThresholds(), 0);
  for (double t : {1.0, 2.0}) {
    EXPECT_TRUE(w.OnLine(WatchLine("n1", Gpus(100, 110, 700)), t));
    EXPECT_TRUE(w.OnLine(WatchLine("n2", Gpus(0, 70, 700)), t));
    EXPECT_TRUE(w.OnLine(WatchLine("n3", Gpus(100, 115, 700)), t));
  }
  EXPECT_FALSE(w.OnLine("step 12 loss 0.5", 2));
  HangFinding f = w.Attribute(2.5);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"n2"});
  EXPECT_NE(f.line.find("GPUs idle on n2 (GPU 0 0% at 70 W of 700 W) while n1,n3 spin at low power in a collective it never reached"), std::string::npos) << f.line;
}

TEST(NodeWatch, EveryNodeSpinningNamesNoOne) {
  NodeWatch w({"n1", "n2"}, 1, WatchThresholds(), 0);
  for (double t : {1.0, 2.0})
    for (const char* n : {"n1", "n2"}) w.OnLine(WatchLine(n, Gpus(100, 110, 700)), t);
  HangFinding f = w.Attribute(2.5);
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_EQ(f.cause, HangCause::kEqualCounts);
  EXPECT_NE(f.line.find("every node's GPUs spin at low power"), std::string::npos) << f.line;
}

TEST(NodeWatch, ANodeThatFallsSilentIsNamed) {
  NodeWatch w({"n1", "n2", "n3"}, 1, WatchThresholds(), 0);
  for (double t = 1; t <= 20; t += 1) {
    w.OnLine(WatchLine("n1", Gpus(100, 600, 700)), t);
    if (t < 5) w.OnLine(WatchLine("n2", Gpus(100, 600, 700)), t);  // n2's agent gone after 4 s
    w.OnLine(WatchLine("n3", Gpus(100, 600, 700)), t);
  }
  HangFinding f = w.Attribute(20.5);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"n2"});
  EXPECT_NE(f.line.find("no report for over 5 s from n2"), std::string::npos) << f.line;
  // A node of another job, or a malformed line, is taken (not job output) and ignored.
  EXPECT_TRUE(w.OnLine(WatchLine("n9", Gpus(0, 0, 700)), 21));
  EXPECT_TRUE(w.OnLine("preflight-watch 1 n1 garbage", 21));
}

TEST(NodeWatch, ANodeNotHeardFromYetIsSilentOnlyAfterThreeIntervals) {
  NodeWatch w({"n1", "n2"}, 10, WatchThresholds(), 1000);
  w.OnLine(WatchLine("n1", Gpus(100, 600, 700)), 1001);
  EXPECT_TRUE(w.Attribute(1005).nodes.empty());  // n2's agent may still be starting
  for (double t = 1010; t <= 1040; t += 10) w.OnLine(WatchLine("n1", Gpus(100, 600, 700)), t);
  EXPECT_EQ(w.Attribute(1040).nodes, std::vector<std::string>{"n2"});
}

TEST(NodeWatch, NvmlMissingOnANodeJudgesItNot) {
  NodeWatch w({"n1", "n2"}, 1, WatchThresholds(), 0);
  for (double t : {1.0, 2.0}) {
    w.OnLine(WatchLine("n1", Gpus(100, 110, 700)), t);
    w.OnLine(WatchLineUnavailable("n2", "libnvidia-ml.so.1: cannot open shared object file"), t);
  }
  HangFinding f = w.Attribute(2.5);
  EXPECT_TRUE(f.nodes.empty()) << f.line;
}

TEST(NodeWatch, SamplerThroughTheFakeNvml) {
  ::setenv("PREFLIGHT_FAKE_NVML", "gpus 2;util * 100;power * 90;power_limit * 700;mem_used 1 2048", 1);
  auto s = OpenNvmlSampler(PREFLIGHT_FAKE_NVML, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = (*s)->Sample();
  ::unsetenv("PREFLIGHT_FAKE_NVML");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].util, 100u);
  EXPECT_DOUBLE_EQ((*r)[0].power_w, 90);
  EXPECT_DOUBLE_EQ((*r)[0].limit_w, 700);
  EXPECT_EQ((*r)[1].mem_used_mib, 2048u);
  EXPECT_EQ(ClassifyNode(*r, WatchThresholds()), GpuState::kSpinning);
}

TEST(NodeWatch, AgentLoopSaysALinePerSampleAndStops) {
  std::atomic<int> lines{0}, unavailable{0};
  {
    GpuWatchLoop loop("/nonexistent/libnvidia-ml.so.1", {}, "n4", 0.05, [&](const std::string& l) {
      ++lines;
      auto s = ParseWatchLine(l);
      if (s.ok() && s->node == "n4" && !s->unavailable.empty()) ++unavailable;
    });
    for (int i = 0; i < 2000 && lines < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    loop.Stop();
  }
  EXPECT_GE(lines.load(), 3);
  EXPECT_EQ(unavailable.load(), lines.load());
}

}  // namespace
}  // namespace preflight
