#include "preflight/stallwatch.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

std::unique_ptr<StallWatch> Watch(const StallOptions& o) {
  auto w = StallWatch::Create(o, 100.0);
  EXPECT_TRUE(w.ok());
  return std::move(*w);
}

TEST(StallWatch, OutputStallFiresOncePerEpisode) {
  StallOptions o;
  o.output_s = 30;
  auto w = Watch(o);
  EXPECT_TRUE(w->Check(129).empty());
  auto a = w->Check(131);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, AlertKind::kOutput);
  EXPECT_NE(a[0].detail.find("(limit 30s)"), std::string::npos);
  EXPECT_TRUE(w->Check(200).empty());  // still the same episode
  w->OnLine("step 5", 201);
  EXPECT_TRUE(w->Check(230).empty());
  EXPECT_EQ(w->Check(232).size(), 1u);  // re-armed by progress
}

TEST(StallWatch, HeartbeatStall) {
  StallOptions o;
  o.heartbeat_s = 10;
  auto w = Watch(o);
  w->OnHeartbeat(105);
  EXPECT_TRUE(w->Check(114).empty());
  auto a = w->Check(116);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, AlertKind::kHeartbeat);
}

TEST(StallWatch, GpuIdleNeedsSamplesAndAllGpusIdle) {
  StallOptions o;
  o.gpu_s = 60;
  o.gpu_idle_percent = 5;
  auto w = Watch(o);
  EXPECT_TRUE(w->Check(1000).empty());  // no samples: NVML absent, never fires
  w->OnGpuSample({0, 97}, 1000);         // one GPU busy
  w->OnGpuSample({0, 3}, 1010);
  EXPECT_TRUE(w->Check(1059).empty());
  auto a = w->Check(1061);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, AlertKind::kGpu);
}

TEST(StallWatch, NanPatternFiresOnceAndOffWhenEmpty) {
  StallOptions o;
  o.nan_pattern = "\\b([Nn]a[Nn]|NAN)\\b";
  auto w = Watch(o);
  EXPECT_FALSE(w->OnLine("step 3 loss 0.25", 101));
  EXPECT_FALSE(w->OnLine("finance banana", 101));
  auto a = w->OnLine("step 4 loss nan", 102);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, AlertKind::kNan);
  EXPECT_FALSE(w->OnLine("step 5 loss nan", 103));
  auto off = Watch(StallOptions{});
  EXPECT_FALSE(off->OnLine("loss nan", 101));
  EXPECT_TRUE(off->Check(1e9).empty());  // every watch off
}

TEST(StallWatch, NulByteDoesNotHideNan) {
  // Issue #19: regexec stopped at a NUL, so "\0 loss nan" never alerted.
  StallOptions o;
  o.nan_pattern = "\\b([Nn]a[Nn]|NAN)\\b";
  auto w = Watch(o);
  EXPECT_FALSE(w->OnLine(std::string("step 3\0 loss 0.25", 17), 101));
  auto a = w->OnLine(std::string("step 4\0 loss nan", 16), 102);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, AlertKind::kNan);
  EXPECT_EQ(a->detail.find('\0'), std::string::npos) << "the alert text shows the NUL, never carries it";
  // ^ and $ keep meaning the line's ends, not a piece's.
  StallOptions anchored;
  anchored.nan_pattern = "^nan$";
  auto w2 = Watch(anchored);
  EXPECT_FALSE(w2->OnLine(std::string("x\0nan\0y", 7), 101));
  EXPECT_TRUE(w2->OnLine("nan", 102));
}

TEST(StallWatch, BadRegexIsAnError) {
  StallOptions o;
  o.nan_pattern = "(nan";
  auto w = StallWatch::Create(o, 0);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("(nan"), std::string::npos);
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

TEST(Regex, PosixExtendedWithGnuWordBoundaries) {
  auto r = Regex::Compile("\\b(nan|NaN)\\b|loss=inf");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Search("step 3 loss nan"));
  EXPECT_TRUE(r->Search("loss=inf"));
  EXPECT_FALSE(r->Search("banana"));
  auto bad = Regex::Compile("a{2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a{2"), std::string::npos);
}

}  // namespace
}  // namespace preflight
