// gpu.gemm's profiles and judgement (gemm.h); the measurement is gemm_run.cc.
#include <algorithm>
#include <cstdio>

#include "preflight/dl_library.h"
#include "preflight/gemm.h"
#include "preflight/stats.h"
#include "preflight/nvml_abi.h"
#include "result_sink.h"

namespace preflight {

// Dense FP16 tensor-core figures with FP32 accumulation, the datasheets'
// "with sparsity" figures halved. Measured cuBLAS on a healthy GPU reaches
// about 0.65 to 0.8 of them at N = 8192, hence gemm_min_fraction 0.5.
const std::vector<GemmProfile>& GemmProfiles() {
  static const std::vector<GemmProfile> kProfiles = {
      {"H200", "H200", 989.4, "NVIDIA H200 datasheet (SXM): FP16 Tensor Core 1,979 TFLOPS with sparsity"},
      {"H100-PCIe", "H100 PCIe", 756.5, "NVIDIA H100 datasheet (PCIe): FP16 Tensor Core 1,513 TFLOPS with sparsity"},
      {"H100", "H100", 989.4, "NVIDIA H100 datasheet (SXM5): FP16 Tensor Core 1,979 TFLOPS with sparsity"},
      {"B200", "B200", 2250, "NVIDIA HGX B200 datasheet: FP16/BF16 Tensor Core 36 PFLOPS per 8 GPUs with sparsity"},
      {"A100", "A100", 312, "NVIDIA A100 datasheet (SXM4): FP16 Tensor Core 312 TFLOPS (624 with sparsity)"},
      {"L40S", "L40S", 362.05, "NVIDIA L40S datasheet: FP16 Tensor Core 362.05 TFLOPS (733 with sparsity)"},
  };
  return kProfiles;
}

const GemmProfile* FindGemmProfile(const std::string& name, const std::string& gpu_name) {
  for (const auto& p : GemmProfiles())
    if (name == "auto" ? gpu_name.find(p.match) != std::string::npos : name == p.name) return &p;
  return nullptr;
}

std::vector<std::string> CublasNames(const std::string& configured) {
  return LibraryNames(configured, Config().cublas_library, {"libcublas.so.12"});
}

std::string TflopsText(double t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f TFLOPS", t);
  return b;
}

uint64_t Fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

std::string GemmHashText(uint64_t h) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

int GemmInput(int which, uint64_t i) {
  // splitmix64 of (which, i): fixed, platform-independent, no state to share.
  uint64_t z = i * 2 + static_cast<uint64_t>(which) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<int>(z % 9) - 4;
}

namespace {

std::string Hex(uint64_t h) { return GemmHashText(h); }


// "SM clock min 1755 / median 1980 MHz; throttle: HwThermalSlowdown", and
// whether a reason seen is one a healthy, cooled, powered GPU never shows.
std::string Clocks(const GemmSample& x, bool* bad) {
  std::string out;
  if (!x.sm_mhz.empty()) {
    std::vector<double> v(x.sm_mhz.begin(), x.sm_mhz.end());
    char b[80];
    std::snprintf(b, sizeof b, "SM clock min %.0f / median %.0f MHz", *std::min_element(v.begin(), v.end()), Median(v));
    out = b;
  }
  static const std::pair<unsigned long long, const char*> kBad[] = {
      {nvmlClocksThrottleReasonHwSlowdown, "HwSlowdown"},
      {nvmlClocksThrottleReasonSwThermalSlowdown, "SwThermalSlowdown"},
      {nvmlClocksThrottleReasonHwThermalSlowdown, "HwThermalSlowdown"},
      {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"},
  };
  std::string why;
  for (const auto& [bit, name] : kBad)
    if (x.throttle & bit) why += (why.empty() ? "" : ",") + std::string(name);
  *bad = !why.empty();
  // SwPowerCap is normal under a full GEMM load: noted, not judged.
  if (x.throttle & nvmlClocksThrottleReasonSwPowerCap) why += (why.empty() ? "" : ",") + std::string("SwPowerCap");
  if (!why.empty()) out += (out.empty() ? "" : "; ") + std::string("throttle: ") + why;
  return out;
}

}  // namespace

std::vector<CheckResult> JudgeGemm(const GemmProfile* p, double f, const std::vector<GemmSample>& samples) {
  std::vector<double> rates;
  std::vector<uint64_t> hashes;
  for (const auto& x : samples)
    if (x.error.empty()) rates.push_back(x.tflops()), hashes.push_back(x.hash_last);
  const double median = Median(rates);
  // The hash most GPUs agree on; with two GPUs that disagree there is no
  // strict majority: both are named.
  const Majority<uint64_t> m = MajorityOf(hashes);
  const bool strict = m.strict;
  const size_t agree = m.count;
  const uint64_t major = m.value;
  std::vector<CheckResult> out;
  for (const auto& x : samples) {
    CheckResult r = checks_internal::Make("gpu.gemm", "GPU" + std::to_string(x.gpu));
    r.seconds = x.seconds;
    if (!x.error.empty()) {
      r.verdict = Verdict::kFail;
      r.value = "error";
      r.message = "GEMM soak failed: " + x.error;
      out.push_back(r);
      continue;
    }
    const double t = x.tflops();
    r.value = TflopsText(t);
    std::vector<std::string> fails;
    if (p != nullptr) {
      r.threshold = ">= " + TflopsText(f * p->fp16_tflops);
      if (t < f * p->fp16_tflops) {
        char b[160];
        std::snprintf(b, sizeof b, "%s < %s (%.0f%% of the %s dense FP16 %s; need %.0f%%, gemm_min_fraction)",
                      TflopsText(t).c_str(), TflopsText(f * p->fp16_tflops).c_str(), 100 * t / p->fp16_tflops, p->name,
                      TflopsText(p->fp16_tflops).c_str(), 100 * f);
        fails.push_back(b);
      }
    }
    if (rates.size() > 1 && t < kGemmStragglerFraction * median) {
      char b[160];
      std::snprintf(b, sizeof b, "straggler: %s < %.0f%% of the node's median %s", TflopsText(t).c_str(),
                    100 * kGemmStragglerFraction, TflopsText(median).c_str());
      fails.push_back(b);
    }
    const size_t others = rates.size() - 1;
    if (others > 0 && (!strict || x.hash_last != major))
      fails.push_back(strict ? "GEMM result differs from the other " + std::to_string(agree) + " GPUs (hash " +
                                   Hex(x.hash_last) + ", theirs " + Hex(major) + ")"
                             : "GEMM results disagree across the node's GPUs with no majority (hash " +
                                   Hex(x.hash_last) + ")");
    if (x.hash_first != x.hash_last)
      fails.push_back("GEMM result changed during the soak (hash " + Hex(x.hash_first) + " after the first, " +
                      Hex(x.hash_last) + " after the last)");
    if (x.sum != x.want_sum || x.non_integral != 0)
      fails.push_back("GEMM result is wrong (element sum " + std::to_string(x.sum) + ", exact " +
                      std::to_string(x.want_sum) + "; " + std::to_string(x.non_integral) +
                      " elements not integers)");
    bool throttled = false;
    std::string clocks = Clocks(x, &throttled);
    std::string facts = TflopsText(t);
    if (p != nullptr) {
      char b[64];
      std::snprintf(b, sizeof b, " (%.0f%% of %s)", 100 * t / p->fp16_tflops, p->name);
      facts += b;
    }
    facts += ", node median " + TflopsText(median) + "; hash fnv1a64:" + Hex(x.hash_last);
    if (!clocks.empty()) facts += "; " + clocks;
    if (!fails.empty()) {
      r.verdict = Verdict::kFail;
      std::string m;
      for (const auto& s : fails) m += (m.empty() ? "" : "; ") + s;
      r.message = m + " [" + facts + "]";
    } else if (throttled) {
      r.verdict = Verdict::kWarn;
      r.message = "thermal or power-brake throttling during the GEMM soak [" + facts + "]";
    } else {
      r.message = facts;
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace preflight
