// gpu.gemm on a CPU machine: the whole check (one thread per GPU, CUDA
// events, NVML samples, judgement, the node's record) against
// tests/fakes/fake_cuda_gemm.c, a fake cudart + cuBLAS that multiplies on
// the host (N = 64 here, so the hashes are real) and is scripted by
// PREFLIGHT_FAKE_GEMM. The fake is reached through the check's real dlopen
// seam: cuda_runtime and cublas_library name its file, and CheckGemm
// dlopen()s and dlsym()s it exactly as it would libcudart.so.13 and
// libcublas.so.13 on a GPU node; nothing in the check knows it is a fake.
// The fake NVML (fake_nvml.c, through nvml_library) gives the GPU name (an
// H100), the SM clocks and the throttle reasons.
#include "preflight/gemm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "preflight/config.h"
#include "preflight/gemm_record.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

#ifndef PREFLIGHT_FAKE_CUDA_GEMM
#error "PREFLIGHT_FAKE_CUDA_GEMM must name tests/fakes/fake_cuda_gemm.c's library"
#endif

struct Soak {
  preflight_test::TempDir dir{"gemm"};
  Config cfg;
  Soak() {
    cfg.state_dir = dir.path() + "/state";  // the node's record (gemm_record.h) goes under nodes/
    cfg.cuda_runtime = PREFLIGHT_FAKE_CUDA_GEMM;
    cfg.cublas_library = PREFLIGHT_FAKE_CUDA_GEMM;
    cfg.nvml_library = PREFLIGHT_FAKE_NVML;
    cfg.gemm_size = 64;
    cfg.gemm_soak_seconds = 0;  // one batch after the first GEMM (the parser allows 1 and up)
  }
  std::vector<CheckResult> Run(const char* gemm, const char* nvml = "", Level level = Level::kFull) {
    ::setenv("PREFLIGHT_FAKE_GEMM", gemm, 1);
    ::setenv("PREFLIGHT_FAKE_NVML", nvml, 1);
    FsRoot fs("/");
    JobContext job;
    job.node = "n1";
    job.job_id = "7";
    CheckEnv env{cfg, fs, job, Phase::kProlog, level, true};
    auto rs = RunChecks(env, {CheckDescriptor{"gpu.gemm", "", Level::kFull, CheckGemm, 30000}});
    ::unsetenv("PREFLIGHT_FAKE_GEMM");
    ::unsetenv("PREFLIGHT_FAKE_NVML");
    return rs;
  }
};

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string HashOf(const CheckResult& r) {
  auto at = r.message.find("hash fnv1a64:");
  return at == std::string::npos ? "" : r.message.substr(at + 13, 16);
}

TEST(Gemm, AllGoodPassesWithFiguresHashesAndClocks) {
  auto rs = Soak().Run("gpus=4;tflops=700");
  ASSERT_EQ(rs.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    SCOPED_TRACE(rs[g].message);
    EXPECT_EQ(rs[g].check, "gpu.gemm");
    EXPECT_EQ(rs[g].device, "GPU" + std::to_string(g));
    EXPECT_EQ(rs[g].verdict, Verdict::kPass);
    EXPECT_EQ(rs[g].value, "700.0 TFLOPS");
    EXPECT_EQ(rs[g].threshold, ">= 494.7 TFLOPS");  // 0.5 of the H100's 989.4
    EXPECT_TRUE(Has(rs[g].message, "(71% of H100), node median 700.0 TFLOPS; hash fnv1a64:"));
    EXPECT_TRUE(Has(rs[g].message, "SM clock min 1980 / median 1980 MHz"));
    EXPECT_EQ(HashOf(rs[g]), HashOf(rs[0]));
  }
  EXPECT_EQ(HashOf(rs[0]).size(), 16u);
}

TEST(Gemm, TheSoakIsRecordedForTheAllocationsComparison) {
  Soak s;
  auto rs = s.Run("gpus=3;slow=2:500;fail=1:14");
  ASSERT_EQ(rs.size(), 3u) << "recording adds no result when it works";
  std::ifstream in(s.cfg.state_dir + "/nodes/n1.gemm.json");
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "no record";
  auto g = ParseGemmRecordJson(line);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->node, "n1");
  EXPECT_EQ(g->job, "7");
  EXPECT_EQ(g->size, 64u);
  EXPECT_EQ(g->gpu_model, "NVIDIA H100 80GB HBM3 (fake)");
  ASSERT_EQ(g->gpus.size(), 2u) << "GPU1's soak failed: left out";
  EXPECT_EQ(g->gpus[0].gpu, 0);
  EXPECT_NEAR(g->gpus[0].tflops, 700, 0.5);
  EXPECT_EQ(g->gpus[0].hash, HashOf(rs[0]));
  EXPECT_EQ(g->gpus[1].gpu, 2);
  EXPECT_NEAR(g->gpus[1].tflops, 500, 0.5);
}

TEST(Gemm, ARecordThatCannotBeWrittenWarnsOnTheNode) {
  Soak s;
  s.cfg.state_dir = "/proc/no-such-state";
  auto rs = s.Run("gpus=2");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[2].device, "node");
  EXPECT_EQ(rs[2].verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(rs[2].message, "cannot record the soak for the allocation's comparison: ")) << rs[2].message;
}

TEST(Gemm, SlowGpuFailsAgainstTheNodeMedian) {
  auto rs = Soak().Run("gpus=4;tflops=700;slow=1:560");  // 80% of the median, above the profile's floor
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[1].verdict, Verdict::kFail);
  EXPECT_EQ(rs[1].value, "560.0 TFLOPS");
  EXPECT_TRUE(Has(rs[1].message, "straggler: 560.0 TFLOPS < 90% of the node's median 700.0 TFLOPS")) << rs[1].message;
  for (int g : {0, 2, 3}) EXPECT_EQ(rs[g].verdict, Verdict::kPass) << rs[g].message;
}

TEST(Gemm, BelowTheProfileFailsWithTheFigures) {
  auto rs = Soak().Run("gpus=2;tflops=400");
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.verdict, Verdict::kFail);
    EXPECT_TRUE(Has(r.message, "400.0 TFLOPS < 494.7 TFLOPS (40% of the H100 dense FP16 989.4 TFLOPS; need 50%, "
                               "gemm_min_fraction)")) << r.message;
  }
}

TEST(Gemm, CorruptGpuIsNamedAgainstTheMajority) {
  auto rs = Soak().Run("gpus=8;corrupt=3");
  ASSERT_EQ(rs.size(), 8u);
  EXPECT_EQ(rs[3].verdict, Verdict::kFail);
  EXPECT_TRUE(Has(rs[3].message, "GEMM result differs from the other 7 GPUs (hash " + HashOf(rs[3]) + ", theirs " +
                                     HashOf(rs[0]) + ")")) << rs[3].message;
  EXPECT_TRUE(Has(rs[3].message, "GEMM result is wrong")) << "the exact sum catches it too: " << rs[3].message;
  EXPECT_NE(HashOf(rs[3]), HashOf(rs[0]));
  for (int g : {0, 1, 2, 4, 5, 6, 7}) EXPECT_EQ(rs[g].verdict, Verdict::kPass) << rs[g].message;
}

TEST(Gemm, ResultThatChangesDuringTheSoakFails) {
  auto rs = Soak().Run("gpus=1;corrupt_late=0");  // one GPU: no majority to hold it to, but its own first result
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kFail);
  EXPECT_TRUE(Has(rs[0].message, "GEMM result changed during the soak (hash ")) << rs[0].message;
}

TEST(Gemm, MissingLibrariesSkipWithTheReason) {
  Soak s;
  s.cfg.cublas_library = "/nonexistent/libcublas.so.13";
  auto rs = s.Run("gpus=4");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_TRUE(Has(rs[0].message, "skipped: no cuBLAS (/nonexistent/libcublas.so.13")) << rs[0].message;
  s.cfg.cuda_runtime = "/nonexistent/libcudart.so.13";
  rs = s.Run("gpus=4");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].verdict, Verdict::kSkip);
  EXPECT_TRUE(Has(rs[0].message, "skipped: no CUDA runtime (")) << rs[0].message;
  rs = Soak().Run("gpus=0");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].message, "skipped: no CUDA device (cudaGetDeviceCount: 0)");
  EXPECT_TRUE(Soak().Run("gpus=4", "", Level::kQuick).empty()) << "full level only";
}

TEST(Gemm, CallErrorFailsNamingTheGpuAndStatus) {
  auto rs = Soak().Run("gpus=4;fail=2:13");
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[2].verdict, Verdict::kFail);
  EXPECT_EQ(rs[2].value, "error");
  EXPECT_EQ(rs[2].message, "GEMM soak failed: cublasGemmEx: CUBLAS_STATUS_EXECUTION_FAILED (13)");
  for (int g : {0, 1, 3}) EXPECT_EQ(rs[g].verdict, Verdict::kPass) << rs[g].message;
  rs = Soak().Run("gpus=2;sync_fail=1:719");  // a kernel that faulted shows at the next synchronize
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].verdict, Verdict::kFail);
  EXPECT_EQ(rs[1].message, "GEMM soak failed: cudaStreamSynchronize: unspecified launch failure (719)");
  EXPECT_EQ(rs[0].verdict, Verdict::kPass) << rs[0].message;
  rs = Soak().Run("gpus=2;create_fail=0:1");  // a handle that cannot be made: nothing leaks, GPU1 goes on
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].message, "GEMM soak failed: cublasCreate_v2: CUBLAS_STATUS_NOT_INITIALIZED (1)");
  EXPECT_EQ(rs[1].verdict, Verdict::kPass) << rs[1].message;
}

TEST(Gemm, ThermalThrottleDuringTheSoakWarns) {
  auto rs = Soak().Run("gpus=4", "throttle 1 0x44;sm_clock 1 1410");  // SwPowerCap + HwThermalSlowdown
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(rs[1].message, "thermal or power-brake throttling during the GEMM soak")) << rs[1].message;
  EXPECT_TRUE(Has(rs[1].message, "SM clock min 1410 / median 1410 MHz; throttle: HwThermalSlowdown,SwPowerCap"));
  rs = Soak().Run("gpus=2", "throttle * 0x4");  // the power cap alone: normal under a full GEMM
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].verdict, Verdict::kPass) << rs[0].message;
  EXPECT_TRUE(Has(rs[0].message, "throttle: SwPowerCap"));
}

TEST(Gemm, JudgementWithoutMajorityOrProfile) {
  GemmSample a, b;
  a.gpu = 0, b.gpu = 1;
  a.flops = b.flops = 7e14, a.seconds = b.seconds = 1;
  a.hash_first = a.hash_last = 1, b.hash_first = b.hash_last = 2;
  auto rs = JudgeGemm(nullptr, 0.5, {a, b});
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.verdict, Verdict::kFail);
    EXPECT_TRUE(Has(r.message, "GEMM results disagree across the node's GPUs with no majority")) << r.message;
    EXPECT_EQ(r.threshold, "");
  }
}

TEST(Gemm, ProfilesInputsAndHash) {
  EXPECT_STREQ(FindGemmProfile("auto", "NVIDIA H100 80GB HBM3")->name, "H100");
  EXPECT_STREQ(FindGemmProfile("auto", "NVIDIA H100 PCIe")->name, "H100-PCIe");
  EXPECT_STREQ(FindGemmProfile("auto", "NVIDIA H200")->name, "H200");
  EXPECT_STREQ(FindGemmProfile("B200", "")->name, "B200");
  EXPECT_EQ(FindGemmProfile("auto", "Tesla V100-SXM2-32GB"), nullptr);
  for (const auto& p : GemmProfiles()) EXPECT_TRUE(Has(p.source, "datasheet")) << p.name;
  EXPECT_EQ(CublasNames(Config().cublas_library), (std::vector<std::string>{"libcublas.so.13", "libcublas.so.12"}));
  EXPECT_EQ(CublasNames("/opt/x/libcublas.so"), (std::vector<std::string>{"/opt/x/libcublas.so"}));
  EXPECT_EQ(Fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);  // the published FNV-1a 64 test vector
  int lo = 0, hi = 0;
  for (uint64_t i = 0; i < 10000; ++i) lo = std::min(lo, GemmInput(0, i)), hi = std::max(hi, GemmInput(1, i));
  EXPECT_EQ(lo, -4);
  EXPECT_EQ(hi, 4);
}

TEST(Gemm, ConfigKeysAndBounds) {
  char path[] = "/tmp/gemm_test_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto load = [&](const std::string& text) {
    std::ofstream(path) << text;
    return LoadConfig(path, "n1", true);
  };
  auto c = load("gemm_soak_seconds = 10\ngemm_min_fraction = 0.7\ngemm_profile = H200\ngemm_size = 4096\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->gemm_soak_seconds, 10u);
  EXPECT_DOUBLE_EQ(c->gemm_min_fraction, 0.7);
  EXPECT_EQ(c->gemm_profile, "H200");
  EXPECT_EQ(c->gemm_size, 4096u);
  EXPECT_EQ(Config().gemm_soak_seconds, 60u);
  // A soak of 0 s is no soak: the config says so (check_gpu_gemm = off is how to not run it).
  auto zero = load("gemm_soak_seconds = 0\n");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(Has(zero.status().message(), "gemm_soak_seconds")) << zero.status().message();
  EXPECT_TRUE(Has(zero.status().message(), "expected a number from 1 to 3600")) << zero.status().message();
  EXPECT_FALSE(load("gemm_soak_seconds = 3601\n").ok());
  EXPECT_FALSE(load("gemm_size = 128\n").ok());
  EXPECT_FALSE(load("gemm_min_fraction = 1.5\n").ok());
  EXPECT_FALSE(load("gemm_profile = V100\n").ok());
  // Every profile gpu.gemm has can be pinned in the config.
  for (const auto& p : GemmProfiles()) {
    c = load(std::string("gemm_profile = ") + p.name + "\n");
    ASSERT_TRUE(c.ok()) << p.name << ": " << c.status().message();
    EXPECT_EQ(FindGemmProfile(c->gemm_profile, "")->name, std::string(p.name));
  }
  EXPECT_EQ(load("check_gpu_gemm = off\n")->check_modes.at("gpu.gemm"), CheckMode::kOff);
  ::unlink(path);
}

}  // namespace
}  // namespace preflight
