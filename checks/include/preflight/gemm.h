// gpu.gemm: a short GEMM soak on every GPU of the node (issue 33, item 3).
//
// At the full level, with the CUDA runtime and cuBLAS present (both
// dlopen'ed; a node without either skips, saying which), every GPU runs the
// same FP16 GEMM (cublasGemmEx, FP16 inputs, FP32 output and accumulation:
// the tensor-core path a training job's FLOPS, heat and power come from)
// in a loop for gemm_soak_seconds, all GPUs at once, one thread each, while
// NVML samples SM clocks and throttle reasons. Judged per GPU:
//   - achieved TFLOPS against gemm_min_fraction of the profile's dense FP16
//     figure (gemm_profile, or matched from the NVML name; kGemmProfiles);
//   - against the node's median: below kGemmStragglerFraction of it fails;
//   - silent data corruption: the inputs are fixed small integers, so the
//     product is exact; its FNV-1a hash must be the same on every GPU (the
//     majority wins), the same at the end of the soak as after the first
//     GEMM, and its element sum must equal the host's reference;
//   - a thermal or power-brake throttle seen during the soak warns.
// Each GPU's result carries "hash fnv1a64:<16 hex>" and the TFLOPS in its
// message and value, for a comparison across the allocation's nodes.
//
// Seams: the measurement (gemm_run.cc: CUDA, cuBLAS, NVML) is separate from
// the judgement (JudgeGemm: figures in, results out). The CPU tests run the
// whole check against tests/fakes/fake_cuda_gemm.c, a fake cudart + cuBLAS
// that computes the GEMM on the host and is scripted by PREFLIGHT_FAKE_GEMM.
// This is not DCGM's targeted stress (dcgmi diag -r 3/4, gpu.dcgm) nor a
// cloud burn-in: one minute of one kernel, to catch the slow, the hot and
// the wrong GPU before a job does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "preflight/checks.h"

namespace preflight {

struct GemmProfile {
  const char* name;    // "H100"
  const char* match;   // substring of the NVML device name
  double fp16_tflops;  // dense (no sparsity) FP16 tensor TFLOPS, FP32 accumulate
  const char* source;  // where the figure comes from
};
const std::vector<GemmProfile>& GemmProfiles();
// By name ("H100") or, for "auto", the first whose match is in gpu_name.
const GemmProfile* FindGemmProfile(const std::string& name, const std::string& gpu_name);

// cuBLAS sonames to dlopen, by the rule of dl_library.h: the default
// is CUDA 13's then CUDA 12's; a value the site set is the only one tried.
std::vector<std::string> CublasNames(const std::string& configured);

// A GPU below this fraction of its node's median TFLOPS is a straggler.
inline constexpr double kGemmStragglerFraction = 0.9;

struct GemmSample {
  int gpu = 0;
  double flops = 0, seconds = 0;  // seconds: GPU time between CUDA events
  uint64_t hash_first = 0;        // of the output after the first GEMM
  uint64_t hash_last = 0;         // ... and after the last
  int64_t sum = 0, want_sum = 0;  // the output's element sum; the host's reference
  uint64_t non_integral = 0;      // output elements that are not integers (all must be)
  std::string error;              // a CUDA or cuBLAS call failed: which and why
  std::vector<unsigned> sm_mhz;   // SM clock samples during the soak (NVML)
  unsigned long long throttle = 0;  // clock event reasons seen (OR of the samples)
  double tflops() const { return seconds > 0 ? flops / seconds / 1e12 : 0; }
};

// p may be null (no profile for this GPU): the node comparisons still hold.
std::vector<CheckResult> JudgeGemm(const GemmProfile* p, double min_fraction, const std::vector<GemmSample>& s);

// "989.4 TFLOPS": the words of every gpu.gemm figure, per node and across
// the allocation (gemm_record.h).
std::string TflopsText(double tflops);

// FNV-1a, 64 bit: cheap, and enough to tell two outputs apart (not a MAC).
uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
// The hash as it is printed and recorded: 16 lowercase hex digits.
std::string GemmHashText(uint64_t h);

// The fixed input: element i of matrix `which` (0: A, 1: B), a small integer
// in [-4, 4], so every product and sum of an N <= 16384 GEMM is exact.
int GemmInput(int which, uint64_t i);

std::vector<CheckResult> CheckGemm(const CheckEnv& env);

}  // namespace preflight
