// The libraries preflight loads with dlopen(3) at run time (the CUDA
// runtime, and through the same loop cuBLAS and NCCL), so one build runs on
// GPU and CPU-only nodes: which names are tried, in which order, and the one
// loop that opens the first that loads and says what every other one
// answered. One owner, so gpu.bandwidth, the NCCL backend and the GEMM soak
// try the same runtimes and word a missing one the same way.
//
// The rule for a library key the site may set (cuda_runtime, ...): left at
// its default, the default soname and then the older ones are tried; a value
// the site set is the only one tried (a pinned path must not silently fall
// back to another CUDA).
#pragma once

#include <dlfcn.h>

#include <functional>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// `configured` alone when it differs from `default_name`, else the default
// followed by `older`.
std::vector<std::string> LibraryNames(const std::string& configured, const std::string& default_name,
                                      const std::vector<std::string>& older);

// The CUDA runtime for `cuda_runtime` (config.h, whose default this is):
// CUDA 13's soname, then CUDA 12's and 11's.
inline constexpr const char* kCudaRuntimeSoname = "libcudart.so.13";
std::vector<std::string> CudaRuntimeNames(const std::string& configured);

struct DlLibrary {
  void* handle = nullptr;  // kept for the process's life (never dlclose'd)
  std::string name;        // the name that loaded
};

// dlopen(RTLD_NOW | RTLD_LOCAL) each name in turn; the first that loads.
// `before` (optional) is told each name before its dlopen (a probe step:
// a dlopen that hangs in a driver is then named). Unavailable, naming every
// name and dlerror's answer, when none loads.
Expected<DlLibrary> OpenFirstLibrary(const std::vector<std::string>& names,
                                     const std::function<void(const std::string&)>& before = nullptr);

// dlsym(h, name) into `out` (a function pointer). When it is absent and
// `missing` is given, its name is appended there ("a, b"): callers resolve
// a table of symbols, then name every one a library lacks at once. Pass
// null for an optional symbol.
template <class T>
bool ResolveSymbol(void* h, const char* name, T& out, std::string* missing) {
  out = reinterpret_cast<T>(::dlsym(h, name));
  if (out == nullptr && missing != nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return out != nullptr;
}

}  // namespace preflight
