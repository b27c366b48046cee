#include "cuda_runtime.h"

#include "preflight/checks.h"

namespace preflight::checks_internal {

std::string CudaErrorText(const char* (*error_string)(int), int code, const char* call) {
  const char* text = error_string != nullptr ? error_string(code) : nullptr;
  return std::string(call) + ": " + (text != nullptr ? text : "error") + " (" + std::to_string(code) + ")";
}

Expected<CudaRuntime> OpenCudaRuntime(const Config& cfg, const std::string& check) {
  auto opened = OpenFirstLibrary(CudaRuntimeNames(cfg.cuda_runtime),
                                 [&](const std::string& name) { ProbeStep(check, "", "dlopen " + name); });
  if (!opened) return Status::Unavailable("no CUDA runtime (" + opened.status().message() + ")");
  CudaRuntime rt;
  rt.lib = *opened;
  std::string miss;
  ResolveSymbol(rt.lib.handle, "cudaGetDeviceCount", rt.GetDeviceCount, &miss);
  ResolveSymbol(rt.lib.handle, "cudaGetErrorString", rt.GetErrorString, &miss);
  if (!miss.empty()) return Status::Unavailable(rt.lib.name + " lacks " + miss);
  ProbeStep(check, "", "cudaGetDeviceCount");
  int e = rt.GetDeviceCount(&rt.devices);
  if (e != 0) return Status::Unavailable("no CUDA device (" + CudaErrorText(rt.GetErrorString, e, "cudaGetDeviceCount") + ")");
  if (rt.devices <= 0) return Status::Unavailable("no CUDA device (cudaGetDeviceCount: 0)");
  return rt;
}

}  // namespace preflight::checks_internal
