// gpu.bandwidth on a CPU machine: the skips (no CUDA runtime; a runtime with
// no device: collective/test/fake_cudart_nodev.c), and the judgement of
// figures against the per-SKU profiles through JudgeBandwidth, the seam the
// CUDA measurement feeds (the measurement itself runs on the GPU machine's
// script, tests/gpu/run_gpu_checks.sh).
#include "preflight/bandwidth.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

std::vector<CheckResult> RunTier(Config cfg, Level level = Level::kFull) {
  FsRoot fs("/");
  JobContext job;
  job.node = "n1";
  CheckEnv env{cfg, fs, job, Phase::kEpilog, level, true};
  return RunChecks(env, {CheckDescriptor{"gpu.bandwidth", "", Level::kFull, CheckBandwidth}});
}

TEST(Bandwidth, SkippedWithTheReasonOnCpuNodes) {
  Config cfg;
  cfg.cuda_runtime = "/nonexistent/libcudart.so.12";
  auto rs = RunTier(cfg);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message.rfind("skipped: no CUDA runtime (", 0), 0u) << rs[0].message;
  cfg.cuda_runtime = PREFLIGHT_FAKE_CUDART_NODEV;  // the runtime is there, no GPU is
  rs = RunTier(cfg);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_EQ(rs[0].message, "skipped: no CUDA device (cudaGetDeviceCount: 0)");
  EXPECT_TRUE(RunTier(cfg, Level::kQuick).empty()) << "full level only";
}

TEST(Bandwidth, DefaultRuntimeIsCuda13Then12Then11) {
  EXPECT_EQ(Config().cuda_runtime, "libcudart.so.13");
  EXPECT_EQ(CudaRuntimeNames(Config().cuda_runtime),
            (std::vector<std::string>{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}));
  EXPECT_EQ(CudaRuntimeNames("/opt/cuda/libcudart.so.12"), (std::vector<std::string>{"/opt/cuda/libcudart.so.12"}));
  // Neither soname loadable: the skip names both attempts.
  Config cfg;
  cfg.cuda_runtime = "/nonexistent/a/libcudart.so.13";
  auto rs = RunTier(cfg);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_NE(rs[0].message.find("/nonexistent/a/libcudart.so.13"), std::string::npos) << rs[0].message;
}

TEST(Bandwidth, ProfilesByNameAndFromTheGpuName) {
  EXPECT_STREQ(FindBwProfile("auto", "NVIDIA H100 80GB HBM3")->name, "H100");
  EXPECT_STREQ(FindBwProfile("auto", "NVIDIA H200")->name, "H200");
  EXPECT_STREQ(FindBwProfile("auto", "NVIDIA A100-SXM4-80GB")->name, "A100");
  EXPECT_STREQ(FindBwProfile("auto", "NVIDIA L40S")->name, "L40S");
  EXPECT_STREQ(FindBwProfile("B200", "")->name, "B200");
  EXPECT_EQ(FindBwProfile("auto", "Tesla V100-SXM2-32GB"), nullptr);
  for (const auto& p : BwProfiles()) EXPECT_NE(std::string(p.source).find("datasheet"), std::string::npos) << p.name;
}

TEST(Bandwidth, FiguresAgainstTheProfile) {
  const BwProfile& h100 = *FindBwProfile("H100", "");
  std::vector<BwSample> s = {
      {"h2d", 0, -1, 5 * 256e6, 5 * 256e6 / 52e9, ""},   // 52 GB/s: a healthy Gen5 x16 link
      {"d2h", 3, -1, 5 * 256e6, 5 * 256e6 / 24e9, ""},   // 24 GB/s: trained at Gen4 or x8
      {"p2p", 1, 2, 5 * 256e6, 5 * 256e6 / 380e9, ""},   // NVLink4 as it should be
      {"p2p", 2, 5, 5 * 256e6, 5 * 256e6 / 120e9, ""},   // NVLinks down
      {"p2p", 6, 7, 0, 0, "cudaMemcpyPeer: peer access is not supported between these two devices"},
  };
  auto rs = JudgeBandwidth(h100, 0.6, s);
  ASSERT_EQ(rs.size(), 5u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass);
  EXPECT_EQ(rs[0].value, "52.0 GB/s");
  EXPECT_EQ(rs[1].verdict, Verdict::kFail);
  EXPECT_EQ(rs[1].device, "GPU3 d2h");
  EXPECT_EQ(rs[1].threshold, ">= 37.8 GB/s");
  EXPECT_EQ(rs[1].message, "d2h 24.0 GB/s < 37.8 GB/s (38% of the H100 peak 63.0 GB/s; need 60%, bw_min_fraction)");
  EXPECT_EQ(rs[2].verdict, Verdict::kPass);
  EXPECT_EQ(rs[3].verdict, Verdict::kFail);
  EXPECT_EQ(rs[3].device, "GPU2->GPU5");
  EXPECT_EQ(rs[3].threshold, ">= 270.0 GB/s");
  EXPECT_EQ(rs[4].verdict, Verdict::kFail);
  EXPECT_NE(rs[4].message.find("peer access is not supported"), std::string::npos);
}

TEST(Bandwidth, ConfigKeys) {
  Config c;
  ASSERT_TRUE(ApplyOverrides(c, {"bw_min_fraction=0.75", "bw_profile=A100", "bw_bytes=64M"}, "--set", "n1").ok());
  EXPECT_DOUBLE_EQ(c.bw_min_fraction, 0.75);
  EXPECT_EQ(c.bw_bytes, 64ull << 20);
  EXPECT_FALSE(ApplyOverrides(c, {"bw_min_fraction=1.5"}, "--set", "n1").ok());
  Status s = ApplyOverrides(c, {"bw_profile=V100"}, "--set", "n1");
  EXPECT_NE(s.message().find("key 'bw_profile'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace preflight
