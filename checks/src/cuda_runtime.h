// The CUDA runtime as the full-level GPU checks (gpu.bandwidth, gpu.gemm)
// open it: the first of CudaRuntimeNames(cuda_runtime) that loads (the one
// loader, dl_library.h), its two symbols every check needs, and the number
// of devices it sees. Each failure is the reason the check is skipped, in
// one wording for both checks. Private to checks/src.
#pragma once

#include <string>

#include "preflight/config.h"
#include "preflight/dl_library.h"
#include "preflight/status.h"

namespace preflight::checks_internal {

struct CudaRuntime {
  DlLibrary lib;  // handle (never dlclose'd) and the soname that loaded
  int devices = 0;
  int (*GetDeviceCount)(int*) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
};

// "CALL: TEXT (CODE)", TEXT from cudaGetErrorString when there is one.
std::string CudaErrorText(const char* (*error_string)(int), int code, const char* call);

// Unavailable, its message the skip reason ("no CUDA runtime (...)", "LIB
// lacks ...", "no CUDA device (...)"), when the check cannot run here. Each
// dlopen and the device count are probe steps of `check` (a driver that
// hangs there is named).
Expected<CudaRuntime> OpenCudaRuntime(const Config& cfg, const std::string& check);

}  // namespace preflight::checks_internal
