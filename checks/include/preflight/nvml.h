// NVML reached through dlopen: one struct of function pointers, filled once
// per process, so one build runs on GPU and CPU-only nodes and tests can put
// the fake library (tests/fakes/fake_nvml.c) behind the very same path.
// Nothing here aborts on a missing library or symbol: Load() returns
// Unavailable with the dlerror text, and the checks report "skipped: why".
#pragma once

#include <string>

#include "preflight/nvml_abi.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

struct NvmlApi {
  // Required: Load() fails (Unavailable) when one is missing.
  nvmlReturn_t (*Init)(void) = nullptr;                 // nvmlInit_v2
  nvmlReturn_t (*Shutdown)(void) = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  // _v3
  // Optional: a null pointer makes the check that needs it "skipped".
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetVbiosVersion)(nvmlDevice_t, char*, unsigned int) = nullptr;  // fleet.versions
  nvmlReturn_t (*DeviceGetInforomImageVersion)(nvmlDevice_t, char*, unsigned int) = nullptr;  // fleet.versions
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                                          unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetRetiredPages)(nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int*,
                                        unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetRetiredPagesPendingStatus)(nvmlDevice_t, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*DeviceGetRemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                        unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*) = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons when exported, else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons (same signature and bits).
  nvmlReturn_t (*DeviceGetClockReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned int*) = nullptr;  // gpu.gemm
  nvmlReturn_t (*DeviceGetCurrPcieLinkGeneration)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetCurrPcieLinkWidth)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPersistenceMode)(nvmlDevice_t, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeMode)(nvmlDevice_t, nvmlComputeMode_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;  // preflight-run
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;              // ... node GPU watch
  nvmlReturn_t (*DeviceGetEnforcedPowerLimit)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;

  std::string library;  // what was dlopen'ed

  // "NVML_ERROR_GPU_IS_LOST (15)"-style text; uses ErrorString when loaded.
  std::string Error(nvmlReturn_t r) const;
};

// The process-wide table for `library` (a soname searched by the dynamic
// loader, or a path), dlopen'ed and resolved on the first call and kept for
// the life of the process. A later call with another name fails. The library
// is never dlclose'd (NVML keeps threads). Not thread-safe on first call.
Expected<const NvmlApi*> LoadNvml(const std::string& library);

struct Config;
// The test seam, in one place: cfg.nvml_fault_file, when set, is exported
// as PREFLIGHT_FAKE_NVML_FAULTS, the per-node faults the fake NVML
// (tests/fakes/fake_nvml.c) reads; production configs leave it empty and
// nothing is set. Callers fork per check, so only that child sees it.
void ExportNvmlTestFaults(const Config& cfg);
// ExportNvmlTestFaults, then LoadNvml(cfg.nvml_library).
Expected<const NvmlApi*> LoadNvmlFor(const Config& cfg);

}  // namespace preflight
