#include "preflight/bandwidth.h"

#include <dlfcn.h>

#include <cstdio>

#include "preflight/nvml.h"
#include "cuda_runtime.h"
#include "result_sink.h"

namespace preflight {

// Peaks per direction. PCIe: x16 links, 128b/130b; Gen5 32 GT/s = 63 GB/s,
// Gen4 16 GT/s = 31.5 GB/s (PCI-SIG; the datasheets' "128GB/s" / "64GB/s"
// PCIe figures are both directions). NVLink: the datasheets' per-GPU total
// (both directions) halved.
const std::vector<BwProfile>& BwProfiles() {
  static const std::vector<BwProfile> kProfiles = {
      {"H200", "H200", 63.0e9, 450e9, "NVIDIA H200 datasheet: NVLink 900GB/s, PCIe Gen5 128GB/s"},
      {"H100", "H100", 63.0e9, 450e9, "NVIDIA H100 datasheet (SXM5): NVLink 900GB/s, PCIe Gen5 128GB/s"},
      {"B200", "B200", 63.0e9, 900e9, "NVIDIA DGX B200 datasheet: NVLink 5 1.8TB/s per GPU, PCIe Gen5"},
      {"A100", "A100", 31.5e9, 300e9, "NVIDIA A100 datasheet (SXM4): NVLink 600GB/s, PCIe Gen4 64GB/s"},
      {"L40S", "L40S", 31.5e9, 31.5e9, "NVIDIA L40S datasheet: PCIe Gen4 x16 64GB/s bidirectional, no NVLink"},
  };
  return kProfiles;
}

const BwProfile* FindBwProfile(const std::string& name, const std::string& gpu_name) {
  for (const auto& p : BwProfiles())
    if (name == "auto" ? gpu_name.find(p.match) != std::string::npos : name == p.name) return &p;
  return nullptr;
}

namespace {

std::string Gbs(double bps) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GB/s", bps / 1e9);
  return b;
}

}  // namespace

std::vector<CheckResult> JudgeBandwidth(const BwProfile& p, double f, const std::vector<BwSample>& samples) {
  std::vector<CheckResult> out;
  for (const auto& s : samples) {
    CheckResult r;
    r.check = "gpu.bandwidth";
    r.device = s.kind == "p2p" ? "GPU" + std::to_string(s.gpu) + "->GPU" + std::to_string(s.peer)
                               : "GPU" + std::to_string(s.gpu) + " " + s.kind;
    double peak = s.kind == "p2p" ? p.p2p_peak : p.h2d_peak;
    double need = f * peak;
    r.threshold = ">= " + Gbs(need);
    if (!s.error.empty()) {
      r.verdict = Verdict::kFail;
      r.value = "error";
      r.message = s.kind + " copy failed: " + s.error;
    } else {
      r.value = Gbs(s.rate());
      char frac[96];
      std::snprintf(frac, sizeof frac, " (%.0f%% of the %s peak %s; need %.0f%%, bw_min_fraction)",
                    100 * s.rate() / peak, p.name, Gbs(peak).c_str(), 100 * f);
      if (s.rate() < need) {
        r.verdict = Verdict::kFail;
        r.message = s.kind + " " + r.value + " < " + Gbs(need) + frac;
      } else {
        r.message = s.kind + " " + r.value + frac;
      }
    }
    r.seconds = s.seconds;
    out.push_back(r);
  }
  return out;
}

namespace {

// The CUDA runtime calls the tier makes; cudaError_t is an int-sized enum
// (cudaSuccess 0), cudaMemcpyKind HostToDevice 1, DeviceToHost 2.
struct Cudart {
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*MallocHost)(void**, size_t) = nullptr;
  int (*FreeHost)(void*) = nullptr;
  int (*Memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*MemcpyPeer)(void*, int, const void*, int, size_t) = nullptr;
  int (*DeviceCanAccessPeer)(int*, int, int) = nullptr;
  int (*DeviceEnablePeerAccess)(int, unsigned) = nullptr;
  int (*DeviceSynchronize)() = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
};

std::string Err(const Cudart& c, int e, const char* call) {
  return checks_internal::CudaErrorText(c.GetErrorString, e, call);
}

// One copy direction on `gpu`: a warm-up, then `iters` timed copies.
BwSample HostCopy(const Cudart& c, int gpu, bool h2d, size_t bytes, int iters) {
  BwSample s;
  s.kind = h2d ? "h2d" : "d2h";
  s.gpu = gpu;
  void *host = nullptr, *dev = nullptr;
  int e = c.SetDevice(gpu);
  if (e == 0) e = c.MallocHost(&host, bytes);
  if (e == 0) e = c.Malloc(&dev, bytes);
  if (e != 0) {
    s.error = Err(c, e, host == nullptr ? "cudaMallocHost" : "cudaMalloc");
  } else {
    auto copy = [&] { return h2d ? c.Memcpy(dev, host, bytes, 1) : c.Memcpy(host, dev, bytes, 2); };
    e = copy();
    double t0 = MonotonicSeconds();
    for (int i = 0; e == 0 && i < iters; ++i) e = copy();
    if (e == 0) e = c.DeviceSynchronize();
    s.seconds = MonotonicSeconds() - t0;
    s.bytes = static_cast<double>(bytes) * iters;
    if (e != 0) s.error = Err(c, e, "cudaMemcpy");
  }
  if (dev) c.Free(dev);
  if (host) c.FreeHost(host);
  return s;
}

BwSample PeerCopy(const Cudart& c, int a, int b, size_t bytes, int iters) {
  BwSample s;
  s.kind = "p2p";
  s.gpu = a;
  s.peer = b;
  void *src = nullptr, *dst = nullptr;
  int e = c.SetDevice(a);
  if (e == 0) e = c.Malloc(&src, bytes);
  if (e == 0) { c.DeviceEnablePeerAccess(b, 0); e = c.SetDevice(b); }  // "already enabled" is fine
  if (e == 0) e = c.Malloc(&dst, bytes);
  if (e == 0) { c.DeviceEnablePeerAccess(a, 0); e = c.MemcpyPeer(dst, b, src, a, bytes); }
  if (e == 0) e = c.DeviceSynchronize();
  if (e == 0) {
    double t0 = MonotonicSeconds();
    for (int i = 0; e == 0 && i < iters; ++i) e = c.MemcpyPeer(dst, b, src, a, bytes);
    if (e == 0) e = c.DeviceSynchronize();  // cudaMemcpyPeer is asynchronous to the host
    s.seconds = MonotonicSeconds() - t0;
    s.bytes = static_cast<double>(bytes) * iters;
  }
  if (e != 0) s.error = Err(c, e, "cudaMemcpyPeer");
  if (dst) c.Free(dst);
  if (src) { c.SetDevice(a); c.Free(src); }
  return s;
}

std::string GpuName(const Config& cfg) {
  auto api = LoadNvmlFor(cfg);
  if (!api || (*api)->Init() != NVML_SUCCESS) return "";
  nvmlDevice_t d = nullptr;
  char buf[96] = "";
  if ((*api)->DeviceGetHandleByIndex(0, &d) == NVML_SUCCESS && (*api)->DeviceGetName != nullptr)
    (*api)->DeviceGetName(d, buf, sizeof buf);
  (*api)->Shutdown();
  return buf;
}

}  // namespace

std::vector<CheckResult> CheckBandwidth(const CheckEnv& env) {
  const Config& c = env.cfg;
  if (env.level < Level::kFull) return {};
  using checks_internal::Skip;
  CheckResult r = checks_internal::Make("gpu.bandwidth", "node");
  auto skip = [&](const std::string& why) { return std::vector<CheckResult>{Skip(r, why)}; };
  auto rt = checks_internal::OpenCudaRuntime(c, "gpu.bandwidth");
  if (!rt) return skip(rt.status().message());
  void* h = rt->lib.handle;
  const std::string& lib = rt->lib.name;
  const int n = rt->devices;
  Cudart cu;
  cu.GetErrorString = rt->GetErrorString;
  std::string miss;
  ResolveSymbol(h, "cudaSetDevice", cu.SetDevice, &miss);
  ResolveSymbol(h, "cudaMalloc", cu.Malloc, &miss);
  ResolveSymbol(h, "cudaFree", cu.Free, &miss);
  ResolveSymbol(h, "cudaMallocHost", cu.MallocHost, &miss);
  ResolveSymbol(h, "cudaFreeHost", cu.FreeHost, &miss);
  ResolveSymbol(h, "cudaMemcpy", cu.Memcpy, &miss);
  ResolveSymbol(h, "cudaMemcpyPeer", cu.MemcpyPeer, &miss);
  ResolveSymbol(h, "cudaDeviceCanAccessPeer", cu.DeviceCanAccessPeer, &miss);
  ResolveSymbol(h, "cudaDeviceEnablePeerAccess", cu.DeviceEnablePeerAccess, &miss);
  ResolveSymbol(h, "cudaDeviceSynchronize", cu.DeviceSynchronize, &miss);
  if (!miss.empty()) {
    r.verdict = Verdict::kFail;
    r.message = lib + " lacks " + miss + " on a node with " + std::to_string(n) + " CUDA devices";
    return {r};
  }
  std::string name = GpuName(c);
  const BwProfile* p = FindBwProfile(c.bw_profile, name);
  if (p == nullptr)
    return skip("no bandwidth profile for '" + (name.empty() ? std::string("unknown GPU") : name) + "' (bw_profile = " +
                c.bw_profile + "; known: H100, H200, B200, A100, L40S)");
  std::vector<BwSample> samples;
  const int iters = 5;
  for (int g = 0; g < n; ++g) {
    ProbeStep("gpu.bandwidth", "GPU" + std::to_string(g), "cudaMemcpy H2D/D2H");
    samples.push_back(HostCopy(cu, g, true, c.bw_bytes, iters));
    samples.push_back(HostCopy(cu, g, false, c.bw_bytes, iters));
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      int ok = 0;
      cu.DeviceCanAccessPeer(&ok, a, b);
      if (!ok) continue;  // no P2P path (e.g. PCIe GPUs across sockets): nothing to hold it to
      ProbeStep("gpu.bandwidth", "GPU" + std::to_string(a) + "->GPU" + std::to_string(b), "cudaMemcpyPeer");
      samples.push_back(PeerCopy(cu, a, b, c.bw_bytes, iters));
    }
  return JudgeBandwidth(*p, c.bw_min_fraction, samples);
}

}  // namespace preflight
