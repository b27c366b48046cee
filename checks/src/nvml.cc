#include "preflight/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstddef>

#include "preflight/config.h"

namespace preflight {

// The struct NVML fills must have NVIDIA's layout to the byte.
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t size differs from NVIDIA's");
static_assert(offsetof(nvmlPciInfo_t, domain) == 16 && offsetof(nvmlPciInfo_t, busId) == 36,
              "nvmlPciInfo_t layout differs from NVIDIA's");
static_assert(sizeof(nvmlReturn_t) == 4 && sizeof(nvmlEnableState_t) == 4, "NVML enums are C ints");

std::string NvmlApi::Error(nvmlReturn_t r) const {
  std::string code = std::to_string(static_cast<int>(r));
  if (ErrorString != nullptr) {
    const char* s = ErrorString(r);
    if (s != nullptr) return std::string(s) + " (" + code + ")";
  }
  return "NVML error " + code;
}

namespace {

template <class F>
bool Resolve(void* h, const char* name, F*& slot) {
  slot = reinterpret_cast<F*>(::dlsym(h, name));
  return slot != nullptr;
}

Expected<NvmlApi> Open(const std::string& library) {
  // dlopen("") would hand back the main program, not a library.
  if (library.empty()) return Status::Unavailable("nvml_library is empty");
  ::dlerror();
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    return Status::Unavailable("cannot load " + library + ": " + (e ? e : "unknown dlopen error"));
  }
  NvmlApi a;
  a.library = library;
  const char* missing = nullptr;
  if (!Resolve(h, "nvmlInit_v2", a.Init) && !missing) missing = "nvmlInit_v2";
  if (!Resolve(h, "nvmlShutdown", a.Shutdown) && !missing) missing = "nvmlShutdown";
  if (!Resolve(h, "nvmlErrorString", a.ErrorString) && !missing) missing = "nvmlErrorString";
  if (!Resolve(h, "nvmlDeviceGetCount_v2", a.DeviceGetCount) && !missing) missing = "nvmlDeviceGetCount_v2";
  if (!Resolve(h, "nvmlDeviceGetHandleByIndex_v2", a.DeviceGetHandleByIndex) && !missing) missing = "nvmlDeviceGetHandleByIndex_v2";
  if (!Resolve(h, "nvmlDeviceGetPciInfo_v3", a.DeviceGetPciInfo) && !missing) missing = "nvmlDeviceGetPciInfo_v3";
  if (missing != nullptr) return Status::Unavailable(library + " lacks " + missing + " (not NVML, or a driver older than r450)");
  Resolve(h, "nvmlSystemGetDriverVersion", a.SystemGetDriverVersion);
  Resolve(h, "nvmlDeviceGetMinorNumber", a.DeviceGetMinorNumber);
  Resolve(h, "nvmlDeviceGetName", a.DeviceGetName);
  Resolve(h, "nvmlDeviceGetVbiosVersion", a.DeviceGetVbiosVersion);
  Resolve(h, "nvmlDeviceGetInforomImageVersion", a.DeviceGetInforomImageVersion);
  Resolve(h, "nvmlDeviceGetTotalEccErrors", a.DeviceGetTotalEccErrors);
  Resolve(h, "nvmlDeviceGetRetiredPages", a.DeviceGetRetiredPages);
  Resolve(h, "nvmlDeviceGetRetiredPagesPendingStatus", a.DeviceGetRetiredPagesPendingStatus);
  Resolve(h, "nvmlDeviceGetRemappedRows", a.DeviceGetRemappedRows);
  Resolve(h, "nvmlDeviceGetTemperature", a.DeviceGetTemperature);
  if (!Resolve(h, "nvmlDeviceGetCurrentClocksEventReasons", a.DeviceGetClockReasons))
    Resolve(h, "nvmlDeviceGetCurrentClocksThrottleReasons", a.DeviceGetClockReasons);
  Resolve(h, "nvmlDeviceGetClockInfo", a.DeviceGetClockInfo);
  Resolve(h, "nvmlDeviceGetCurrPcieLinkGeneration", a.DeviceGetCurrPcieLinkGeneration);
  Resolve(h, "nvmlDeviceGetCurrPcieLinkWidth", a.DeviceGetCurrPcieLinkWidth);
  Resolve(h, "nvmlDeviceGetMaxPcieLinkGeneration", a.DeviceGetMaxPcieLinkGeneration);
  Resolve(h, "nvmlDeviceGetMaxPcieLinkWidth", a.DeviceGetMaxPcieLinkWidth);
  Resolve(h, "nvmlDeviceGetNvLinkState", a.DeviceGetNvLinkState);
  Resolve(h, "nvmlDeviceGetPersistenceMode", a.DeviceGetPersistenceMode);
  Resolve(h, "nvmlDeviceGetComputeMode", a.DeviceGetComputeMode);
  Resolve(h, "nvmlDeviceGetUtilizationRates", a.DeviceGetUtilizationRates);
  Resolve(h, "nvmlDeviceGetPowerUsage", a.DeviceGetPowerUsage);
  Resolve(h, "nvmlDeviceGetEnforcedPowerLimit", a.DeviceGetEnforcedPowerLimit);
  Resolve(h, "nvmlDeviceGetMemoryInfo", a.DeviceGetMemoryInfo);
  return a;
}

}  // namespace

Expected<const NvmlApi*> LoadNvml(const std::string& library) {
  static Expected<NvmlApi>* loaded = nullptr;  // filled once, never freed
  if (loaded == nullptr) loaded = new Expected<NvmlApi>(Open(library));
  if (!loaded->ok()) return loaded->status();
  if ((*loaded)->library != library)
    return Status::InvalidArgument("NVML already loaded from " + (*loaded)->library + ", not " + library);
  return &loaded->value();
}

void ExportNvmlTestFaults(const Config& cfg) {
  if (!cfg.nvml_fault_file.empty()) ::setenv("PREFLIGHT_FAKE_NVML_FAULTS", cfg.nvml_fault_file.c_str(), 1);
}

Expected<const NvmlApi*> LoadNvmlFor(const Config& cfg) {
  ExportNvmlTestFaults(cfg);
  return LoadNvml(cfg.nvml_library);
}

}  // namespace preflight
