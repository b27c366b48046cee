// gpu.gemm's measurement (gemm.h): the CUDA runtime and cuBLAS, both
// dlopen'ed (the real libraries on a GPU node; tests/fakes/fake_cuda_gemm.c
// behind the same path in the tests), one thread per GPU, and NVML sampled
// from the check's own thread while they run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "preflight/dl_library.h"
#include "preflight/gemm.h"
#include "preflight/gemm_record.h"
#include "preflight/nvml.h"
#include "cuda_runtime.h"
#include "result_sink.h"

namespace preflight {
namespace {

// cudaError_t and cublasStatus_t are int-sized enums, 0 success; handles,
// streams and events are opaque pointers.
struct Cuda {
  const char* (*GetErrorString)(int) = nullptr;
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*Memcpy)(void*, const void*, size_t, int) = nullptr;  // kinds: 1 H2D, 2 D2H
  int (*StreamCreate)(void**) = nullptr;
  int (*StreamDestroy)(void*) = nullptr;
  int (*StreamSynchronize)(void*) = nullptr;
  int (*EventCreate)(void**) = nullptr;
  int (*EventDestroy)(void*) = nullptr;
  int (*EventRecord)(void*, void*) = nullptr;
  int (*EventSynchronize)(void*) = nullptr;
  int (*EventElapsedTime)(float*, void*, void*) = nullptr;
  int (*DeviceGetPCIBusId)(char*, int, int) = nullptr;  // optional: NVML index = CUDA index without it
  // cuBLAS
  int (*Create)(void**) = nullptr;
  int (*Destroy)(void*) = nullptr;
  int (*SetStream)(void*, void*) = nullptr;
  int (*GemmEx)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                const void*, void*, int, int, int, int) = nullptr;
  const char* (*StatusString)(int) = nullptr;  // optional (cuBLAS 11.4.2+)
};

std::string CudaErr(const Cuda& c, int e, const char* call) {
  return checks_internal::CudaErrorText(c.GetErrorString, e, call);
}

std::string BlasErr(const Cuda& c, int s, const char* call) {
  static const char* kNames[] = {"CUBLAS_STATUS_SUCCESS", "CUBLAS_STATUS_NOT_INITIALIZED", nullptr,
                                 "CUBLAS_STATUS_ALLOC_FAILED", nullptr, nullptr, nullptr,
                                 "CUBLAS_STATUS_INVALID_VALUE", "CUBLAS_STATUS_ARCH_MISMATCH", nullptr, nullptr,
                                 "CUBLAS_STATUS_MAPPING_ERROR", nullptr, "CUBLAS_STATUS_EXECUTION_FAILED",
                                 "CUBLAS_STATUS_INTERNAL_ERROR", "CUBLAS_STATUS_NOT_SUPPORTED"};
  const char* name = c.StatusString ? c.StatusString(s) : (s >= 0 && s < 16 ? kNames[s] : nullptr);
  return std::string(call) + ": " + (name ? name : "cuBLAS status") + " (" + std::to_string(s) + ")";
}

// IEEE half of a small integer (|v| <= 2048 is exact): the GEMM's input.
uint16_t HalfOf(int v) {
  if (v == 0) return 0;
  uint16_t s = v < 0 ? 0x8000 : 0;
  unsigned a = static_cast<unsigned>(std::abs(v)), e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  unsigned mant = (a - (1u << e)) << (10 - e);
  return static_cast<uint16_t>(s | ((e + 15) << 10) | mant);
}

// The fixed inputs (column-major N x N) and the exact sum of their product's
// elements: sum_k (column k of A summed) * (row k of B summed), O(N^2).
struct Inputs {
  std::vector<uint16_t> a, b;
  int64_t want_sum = 0;
};
Inputs MakeInputs(size_t n) {
  Inputs in;
  in.a.resize(n * n);
  in.b.resize(n * n);
  std::vector<int64_t> col_a(n, 0), row_b(n, 0);
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < n; ++i) {
      int va = GemmInput(0, i + k * n), vb = GemmInput(1, k + i * n);  // A(i,k), B(k,i)
      in.a[i + k * n] = HalfOf(va);
      in.b[k + i * n] = HalfOf(vb);
      col_a[k] += va;
      row_b[k] += vb;
    }
  for (size_t k = 0; k < n; ++k) in.want_sum += col_a[k] * row_b[k];
  return in;
}

// The output's hash, element sum and non-integers, read back in slices of
// at most 16 MiB so eight GPUs' soaks hold little host memory at any N.
struct Digest {
  uint64_t hash = 0xcbf29ce484222325ull;
  int64_t sum = 0;
  uint64_t non_integral = 0;
};
int Read(const Cuda& c, const void* out, size_t elems, Digest* d) {
  constexpr size_t kSlice = 4u << 20;  // floats
  std::vector<float> host(std::min(elems, kSlice));
  for (size_t at = 0; at < elems; at += kSlice) {
    const size_t k = std::min(kSlice, elems - at);
    if (int e = c.Memcpy(host.data(), static_cast<const float*>(out) + at, k * 4, 2)) return e;
    d->hash = Fnv1a64(host.data(), k * 4, d->hash);
    for (size_t i = 0; i < k; ++i) {
      if (host[i] != std::nearbyint(host[i])) ++d->non_integral;
      d->sum += static_cast<int64_t>(std::llround(host[i]));
    }
  }
  return 0;
}

// One GPU's soak: a first GEMM (hashed), then batches of GEMMs until the
// soak time is up, timed by CUDA events on the GPU, then the output hashed
// again and summed. Every handle is released on every path.
void Soak(const Cuda& c, int gpu, size_t n, double soak_s, const Inputs& in, GemmSample* s) {
  constexpr int kBatch = 8;  // GEMMs queued between host checks of the clock
  const size_t half_bytes = n * n * 2, out_bytes = n * n * 4;
  void *a = nullptr, *b = nullptr, *out = nullptr, *stream = nullptr, *h = nullptr, *t0 = nullptr, *t1 = nullptr;
  const float one = 1, zero = 0;
  const int dim = static_cast<int>(n);
  // CUBLAS_OP_N, CUDA_R_16F inputs, CUDA_R_32F output, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT.
  auto gemm = [&] { return c.GemmEx(h, 0, 0, dim, dim, dim, &one, a, 2, dim, b, 2, dim, &zero, out, 0, dim, 68, -1); };
  Digest first, last;
  auto fail = [&](std::string why) { s->error = std::move(why); };
  int e = c.SetDevice(gpu);
  if (e != 0) { fail(CudaErr(c, e, "cudaSetDevice")); return; }
  if ((e = c.StreamCreate(&stream)) != 0) fail(CudaErr(c, e, "cudaStreamCreate"));
  else if ((e = c.Create(&h)) != 0) fail(BlasErr(c, e, "cublasCreate_v2"));
  else if ((e = c.SetStream(h, stream)) != 0) fail(BlasErr(c, e, "cublasSetStream_v2"));
  else if ((e = c.Malloc(&a, half_bytes)) != 0 || (e = c.Malloc(&b, half_bytes)) != 0 ||
           (e = c.Malloc(&out, out_bytes)) != 0) fail(CudaErr(c, e, "cudaMalloc"));
  else if ((e = c.Memcpy(a, in.a.data(), half_bytes, 1)) != 0 || (e = c.Memcpy(b, in.b.data(), half_bytes, 1)) != 0)
    fail(CudaErr(c, e, "cudaMemcpy"));
  else if ((e = c.EventCreate(&t0)) != 0 || (e = c.EventCreate(&t1)) != 0) fail(CudaErr(c, e, "cudaEventCreate"));
  else if ((e = gemm()) != 0) fail(BlasErr(c, e, "cublasGemmEx"));
  else if ((e = c.StreamSynchronize(stream)) != 0) fail(CudaErr(c, e, "cudaStreamSynchronize"));
  else if ((e = Read(c, out, n * n, &first)) != 0) fail(CudaErr(c, e, "cudaMemcpy"));
  if (s->error.empty()) {
    s->hash_first = first.hash;
    long iters = 0;
    const double start = MonotonicSeconds();
    if ((e = c.EventRecord(t0, stream)) != 0) fail(CudaErr(c, e, "cudaEventRecord"));
    while (s->error.empty()) {
      for (int i = 0; e == 0 && i < kBatch; ++i) e = gemm();
      if (e != 0) { fail(BlasErr(c, e, "cublasGemmEx")); break; }
      iters += kBatch;
      // A kernel that faults (an Xid) surfaces here, asynchronously, as a CUDA error.
      if ((e = c.StreamSynchronize(stream)) != 0) { fail(CudaErr(c, e, "cudaStreamSynchronize")); break; }
      if (MonotonicSeconds() - start >= soak_s) break;  // at least one batch, even for a soak of 0
    }
    float ms = 0;
    if (s->error.empty() && ((e = c.EventRecord(t1, stream)) != 0 || (e = c.EventSynchronize(t1)) != 0 ||
                             (e = c.EventElapsedTime(&ms, t0, t1)) != 0))
      fail(CudaErr(c, e, "cudaEvent"));
    if (s->error.empty() && (e = Read(c, out, n * n, &last)) != 0) fail(CudaErr(c, e, "cudaMemcpy"));
    if (s->error.empty()) {
      s->seconds = ms / 1e3;
      s->flops = 2.0 * dim * dim * dim * static_cast<double>(iters);
      s->hash_last = last.hash;
      s->sum = last.sum;
      s->non_integral = last.non_integral;
    }
  }
  s->want_sum = in.want_sum;
  if (t1) c.EventDestroy(t1);
  if (t0) c.EventDestroy(t0);
  if (out) c.Free(out);
  if (b) c.Free(b);
  if (a) c.Free(a);
  if (h) c.Destroy(h);
  if (stream) c.StreamDestroy(stream);
}

// NVML's handle for each CUDA device, matched by PCI bus (CUDA's order
// need not be NVML's: CUDA_DEVICE_ORDER); null where NVML has none.
std::vector<nvmlDevice_t> NvmlHandles(const NvmlApi& api, const Cuda& c, int n) {
  std::vector<nvmlDevice_t> out(n, nullptr);
  unsigned count = 0;
  if (api.DeviceGetCount(&count) != NVML_SUCCESS) return out;
  for (int g = 0; g < n; ++g) {
    unsigned dom = 0, bus = 0, dev = 0;
    char id[32] = "";
    bool by_bus = c.DeviceGetPCIBusId && c.DeviceGetPCIBusId(id, sizeof id, g) == 0 &&
                  std::sscanf(id, "%x:%x:%x", &dom, &bus, &dev) == 3;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      nvmlPciInfo_t p{};
      if (api.DeviceGetHandleByIndex(i, &d) != NVML_SUCCESS) continue;
      if (by_bus ? api.DeviceGetPciInfo(d, &p) == NVML_SUCCESS && p.domain == dom && p.bus == bus && p.device == dev
                 : static_cast<int>(i) == g) {
        out[g] = d;
        break;
      }
    }
  }
  return out;
}

void Sample(const NvmlApi& api, const std::vector<nvmlDevice_t>& d, std::vector<GemmSample>& s) {
  for (size_t g = 0; g < d.size(); ++g) {
    if (d[g] == nullptr) continue;
    unsigned mhz = 0;
    unsigned long long why = 0;
    if (api.DeviceGetClockInfo && api.DeviceGetClockInfo(d[g], NVML_CLOCK_SM, &mhz) == NVML_SUCCESS)
      s[g].sm_mhz.push_back(mhz);
    if (api.DeviceGetClockReasons && api.DeviceGetClockReasons(d[g], &why) == NVML_SUCCESS) s[g].throttle |= why;
  }
}

// The one loader (dl_library.h), each dlopen a probe step.
Expected<DlLibrary> Open(const std::vector<std::string>& names) {
  return OpenFirstLibrary(names, [](const std::string& name) { ProbeStep("gpu.gemm", "", "dlopen " + name); });
}

std::string ResolveAll(void* rt, void* blas, Cuda& c) {
  std::string miss;
  ResolveSymbol(rt, "cudaSetDevice", c.SetDevice, &miss);
  ResolveSymbol(rt, "cudaMalloc", c.Malloc, &miss);
  ResolveSymbol(rt, "cudaFree", c.Free, &miss);
  ResolveSymbol(rt, "cudaMemcpy", c.Memcpy, &miss);
  ResolveSymbol(rt, "cudaStreamCreate", c.StreamCreate, &miss);
  ResolveSymbol(rt, "cudaStreamDestroy", c.StreamDestroy, &miss);
  ResolveSymbol(rt, "cudaStreamSynchronize", c.StreamSynchronize, &miss);
  ResolveSymbol(rt, "cudaEventCreate", c.EventCreate, &miss);
  ResolveSymbol(rt, "cudaEventDestroy", c.EventDestroy, &miss);
  ResolveSymbol(rt, "cudaEventRecord", c.EventRecord, &miss);
  ResolveSymbol(rt, "cudaEventSynchronize", c.EventSynchronize, &miss);
  ResolveSymbol(rt, "cudaEventElapsedTime", c.EventElapsedTime, &miss);
  ResolveSymbol(rt, "cudaDeviceGetPCIBusId", c.DeviceGetPCIBusId, nullptr);
  ResolveSymbol(blas, "cublasCreate_v2", c.Create, &miss);
  ResolveSymbol(blas, "cublasDestroy_v2", c.Destroy, &miss);
  ResolveSymbol(blas, "cublasSetStream_v2", c.SetStream, &miss);
  ResolveSymbol(blas, "cublasGemmEx", c.GemmEx, &miss);
  ResolveSymbol(blas, "cublasGetStatusString", c.StatusString, nullptr);
  return miss;
}

// NVML for the GPU name and the samples; null (no name, no samples) without it.
const NvmlApi* OpenNvml(const Config& cfg) {
  auto api = LoadNvmlFor(cfg);
  if (!api || (*api)->Init() != NVML_SUCCESS) return nullptr;
  return *api;
}

}  // namespace

std::vector<CheckResult> CheckGemm(const CheckEnv& env) {
  const Config& cfg = env.cfg;
  if (env.level < Level::kFull) return {};
  CheckResult r = checks_internal::Make("gpu.gemm", "node");
  auto skip = [&](const std::string& why) { return std::vector<CheckResult>{checks_internal::Skip(r, why)}; };
  auto rt_open = checks_internal::OpenCudaRuntime(cfg, "gpu.gemm");
  if (!rt_open) return skip(rt_open.status().message());
  void* rt = rt_open->lib.handle;
  const std::string rt_lib = rt_open->lib.name;
  const int n = rt_open->devices;
  Cuda c;
  c.GetErrorString = rt_open->GetErrorString;
  std::string miss;
  auto blas_open = Open(CublasNames(cfg.cublas_library));
  if (!blas_open) return skip("no cuBLAS (" + blas_open.status().message() + ")");
  void* blas = blas_open->handle;
  const std::string blas_lib = blas_open->name;
  miss = ResolveAll(rt, blas, c);
  if (!miss.empty()) {
    r.verdict = Verdict::kFail;
    r.message = rt_lib + " / " + blas_lib + " lack " + miss + " on a node with " + std::to_string(n) + " CUDA devices";
    return {r};
  }
  const NvmlApi* nvml = OpenNvml(cfg);
  std::string gpu_name;
  std::vector<nvmlDevice_t> handles(n, nullptr);
  if (nvml != nullptr) {
    handles = NvmlHandles(*nvml, c, n);
    char buf[96] = "";
    if (handles[0] != nullptr && nvml->DeviceGetName != nullptr) nvml->DeviceGetName(handles[0], buf, sizeof buf);
    gpu_name = buf;
  }
  const GemmProfile* p = FindGemmProfile(cfg.gemm_profile, gpu_name);
  const size_t dim = cfg.gemm_size;
  const Inputs in = MakeInputs(dim);
  std::vector<GemmSample> samples(n);
  std::atomic<int> running{n};
  std::vector<std::thread> threads;
  ProbeStep("gpu.gemm", "", "GEMM soak on " + std::to_string(n) + " GPUs (" + std::to_string(cfg.gemm_soak_seconds) + " s)");
  for (int g = 0; g < n; ++g) {
    samples[g].gpu = g;
    threads.emplace_back([&, g] {
      Soak(c, g, dim, static_cast<double>(cfg.gemm_soak_seconds), in, &samples[g]);
      --running;
    });
  }
  // A few samples over the soak: enough to see a clock sag or a throttle
  // reason, few enough not to load the driver the GEMMs are using.
  const auto every = std::chrono::milliseconds(std::max<uint64_t>(50, cfg.gemm_soak_seconds * 1000 / 6));
  auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min<uint64_t>(1000, cfg.gemm_soak_seconds * 100));
  while (running > 0) {
    if (nvml != nullptr && std::chrono::steady_clock::now() >= next) {
      Sample(*nvml, handles, samples);
      next += every;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : threads) t.join();
  if (nvml != nullptr) {
    // A soak shorter than the first sample's delay (tests) still gets one.
    bool none = true;
    for (const auto& s : samples) none = none && s.sm_mhz.empty();
    if (none) Sample(*nvml, handles, samples);
    nvml->Shutdown();
  }
  auto out = JudgeGemm(p, cfg.gemm_min_fraction, samples);
  if (p == nullptr && !out.empty())
    for (auto& x : out)
      if (x.value != "error")
        x.message += "; no TFLOPS profile for '" + (gpu_name.empty() ? std::string("unknown GPU") : gpu_name) +
                     "' (gemm_profile = " + cfg.gemm_profile + "): judged against the node's GPUs only";
  // The figures for the allocation's comparison (gemm_record.h), by the batch step.
  if (!env.job.node.empty()) {
    NodeGemm rec{env.job.node, env.job.job_id, static_cast<double>(std::time(nullptr)), gpu_name, dim, {}};
    for (const auto& s : samples)
      if (s.error.empty()) rec.gpus.push_back({s.gpu, s.tflops(), GemmHashText(s.hash_last)});
    if (Status w = WriteGemmRecord(cfg, rec); !w.ok()) {
      r.verdict = Verdict::kWarn;
      r.message = "cannot record the soak for the allocation's comparison: " + w.message();
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace preflight
