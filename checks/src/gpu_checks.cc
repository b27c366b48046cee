// GPU checks through NVML (gpu_checks.h: CheckGpus).
#include "preflight/gpu_checks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/nvml.h"
#include "result_sink.h"

namespace preflight {
namespace {

using namespace checks_internal;

// "00000000:1B:00.0" -> "0000:1b:00.0", the form sysfs and lspci use.
std::string ShortBusId(const char* id) {
  std::string s = id;
  size_t colon = s.find(':');
  if (colon == 8 && s.compare(0, 4, "0000") == 0) s = s.substr(4);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

uint64_t CountDevNvidia(const FsRoot& fs) {
  auto names = fs.ListDir("/dev");
  if (!names) return 0;
  uint64_t n = 0;
  for (const auto& e : *names) {
    if (e.size() <= 6 || e.compare(0, 6, "nvidia") != 0) continue;
    bool digits = std::all_of(e.begin() + 6, e.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) ++n;
  }
  return n;
}

bool GpuSelected(const CheckEnv& env, unsigned index, const NvmlApi& api, nvmlDevice_t dev) {
  // The prolog checks the job's GPUs; epilog and health check the node.
  // SLURM_JOB_GPUS holds GRES indices, which for File=/dev/nvidia[0-N] are
  // the device minor numbers, not NVML's (PCI-ordered) indices.
  if (env.phase != Phase::kProlog || env.job.gpus.empty()) return true;
  unsigned minor = index;
  if (api.DeviceGetMinorNumber != nullptr) api.DeviceGetMinorNumber(dev, &minor);
  return std::find(env.job.gpus.begin(), env.job.gpus.end(), static_cast<int>(minor)) != env.job.gpus.end();
}

class GpuProbe {
 public:
  GpuProbe(const CheckEnv& env, const NvmlApi& api, Sink& sink) : env_(env), c_(env.cfg), api_(api), sink_(sink) {}

  // Returns false when the GPU was lost mid-way (already reported).
  void Run(unsigned index, nvmlDevice_t dev, const std::string& label) {
    dev_ = dev;
    label_ = label;
    lost_ = false;
    // Each result's duration is the time from the start of its check.
    for (void (GpuProbe::*check)() : {&GpuProbe::Ecc, &GpuProbe::RetiredPages, &GpuProbe::RowRemap,
                                      &GpuProbe::Temperature, &GpuProbe::Throttle, &GpuProbe::Pcie,
                                      &GpuProbe::NvLink, &GpuProbe::Persistence, &GpuProbe::ComputeMode}) {
      if (lost_) break;
      check_t0_ = MonotonicSeconds();
      (this->*check)();
    }
    (void)index;
  }

 private:
  // Announce the call (for hang reports), time it, and turn "GPU is lost"
  // into the gpu.present failure it is.
  template <class F>
  nvmlReturn_t Call(const char* check, const char* name, F&& f) {
    ProbeStep(check, label_, name);
    nvmlReturn_t rc = f();
    last_seconds_ = MonotonicSeconds() - check_t0_;
    if (rc == NVML_ERROR_GPU_IS_LOST && !lost_) {
      lost_ = true;
      CheckResult r = Make("gpu.present", label_);
      r.value = "lost";
      r.threshold = "on the bus";
      r.verdict = Verdict::kFail;
      r.message = std::string("GPU has fallen off the bus (") + name + ": " + api_.Error(rc) + ")";
      r.seconds = last_seconds_;
      sink_(r);
    }
    return rc;
  }

  // Common handling of an unusable answer: skipped when unsupported, failed otherwise.
  bool Bad(CheckResult& r, const char* name, nvmlReturn_t rc) {
    if (rc == NVML_SUCCESS) return false;
    if (lost_) return true;
    r.seconds = last_seconds_;
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      sink_(Skip(r, std::string(name) + " not supported on this GPU"));
    } else {
      r.verdict = Verdict::kFail;
      r.value = "error";
      r.message = std::string(name) + ": " + api_.Error(rc);
      sink_(r);
    }
    return true;
  }

  bool Missing(CheckResult& r, const void* fn, const char* name) {
    if (fn != nullptr) return false;
    r.seconds = MonotonicSeconds() - check_t0_;
    sink_(Skip(r, std::string(name) + " not exported by " + api_.library));
    return true;
  }

  void Emit(CheckResult r) {
    r.seconds = last_seconds_;
    sink_(std::move(r));
  }

  void Ecc() {
    CheckResult r = Make("gpu.ecc", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetTotalEccErrors), "nvmlDeviceGetTotalEccErrors")) return;
    unsigned long long vol = 0, agg = 0;
    nvmlReturn_t rc = Call("gpu.ecc", "nvmlDeviceGetTotalEccErrors", [&] {
      return api_.DeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &vol);
    });
    if (Bad(r, "nvmlDeviceGetTotalEccErrors", rc)) return;
    rc = Call("gpu.ecc", "nvmlDeviceGetTotalEccErrors", [&] {
      return api_.DeviceGetTotalEccErrors(dev_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &agg);
    });
    if (Bad(r, "nvmlDeviceGetTotalEccErrors", rc)) return;
    r.value = "volatile " + U(vol) + ", aggregate " + U(agg);
    r.threshold = "<= " + U(c_.gpu_max_ecc_uncorrected);
    if (vol > c_.gpu_max_ecc_uncorrected || agg > c_.gpu_max_ecc_uncorrected) {
      r.verdict = Verdict::kFail;
      r.message = "uncorrected ECC errors " + r.value + " > " + U(c_.gpu_max_ecc_uncorrected);
    } else {
      r.message = "uncorrected ECC " + r.value;
    }
    Emit(r);
  }

  void RetiredPages() {
    CheckResult r = Make("gpu.retired_pages", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetRetiredPages), "nvmlDeviceGetRetiredPages")) return;
    unsigned total = 0;
    for (auto cause : {NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                       NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}) {
      // pageCount 0 and no buffer: NVML answers with the count (and
      // INSUFFICIENT_SIZE when there are any).
      unsigned n = 0;
      nvmlReturn_t rc = Call("gpu.retired_pages", "nvmlDeviceGetRetiredPages",
                             [&] { return api_.DeviceGetRetiredPages(dev_, cause, &n, nullptr); });
      if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
      if (Bad(r, "nvmlDeviceGetRetiredPages", rc)) return;
      total += n;
    }
    nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
    if (api_.DeviceGetRetiredPagesPendingStatus != nullptr) {
      nvmlReturn_t rc = Call("gpu.retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus",
                             [&] { return api_.DeviceGetRetiredPagesPendingStatus(dev_, &pending); });
      if (Bad(r, "nvmlDeviceGetRetiredPagesPendingStatus", rc)) return;
    }
    r.value = U(total) + (pending == NVML_FEATURE_ENABLED ? " retired, retirement pending" : " retired");
    r.threshold = "<= " + U(c_.gpu_max_retired_pages) + ", none pending";
    if (pending == NVML_FEATURE_ENABLED) {
      r.verdict = Verdict::kFail;
      r.message = "page retirement pending (reset the GPU to retire it); " + U(total) + " retired";
    } else if (total > c_.gpu_max_retired_pages) {
      r.verdict = Verdict::kFail;
      r.message = "retired pages " + U(total) + " > " + U(c_.gpu_max_retired_pages);
    } else {
      r.message = U(total) + " retired pages";
    }
    Emit(r);
  }

  void RowRemap() {
    CheckResult r = Make("gpu.row_remap", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetRemappedRows), "nvmlDeviceGetRemappedRows")) return;
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    nvmlReturn_t rc = Call("gpu.row_remap", "nvmlDeviceGetRemappedRows",
                           [&] { return api_.DeviceGetRemappedRows(dev_, &corr, &unc, &pending, &failure); });
    if (Bad(r, "nvmlDeviceGetRemappedRows", rc)) return;
    r.value = "corrected " + U(corr) + ", uncorrected " + U(unc) + (pending ? ", pending" : "") +
              (failure ? ", failed" : "");
    r.threshold = "no failure, none pending";
    if (failure) {
      r.verdict = Verdict::kFail;
      r.message = "row remapping failed (" + r.value + "): replace the GPU";
    } else if (pending) {
      r.verdict = Verdict::kFail;
      r.message = "row remap pending (" + r.value + "): reset the GPU";
    } else {
      r.message = "remapped rows " + r.value;
    }
    Emit(r);
  }

  void Temperature() {
    CheckResult r = Make("gpu.temperature", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetTemperature), "nvmlDeviceGetTemperature")) return;
    unsigned t = 0;
    nvmlReturn_t rc = Call("gpu.temperature", "nvmlDeviceGetTemperature",
                           [&] { return api_.DeviceGetTemperature(dev_, NVML_TEMPERATURE_GPU, &t); });
    if (Bad(r, "nvmlDeviceGetTemperature", rc)) return;
    r.value = U(t) + "C";
    r.threshold = "<= " + U(c_.gpu_max_temp) + "C";
    if (t > c_.gpu_max_temp) {
      r.verdict = Verdict::kFail;
      r.message = "temperature " + r.value + " > " + U(c_.gpu_max_temp) + "C";
    } else {
      r.message = "temperature " + r.value;
    }
    Emit(r);
  }

  void Throttle() {
    CheckResult r = Make("gpu.throttle", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetClockReasons), "nvmlDeviceGetCurrentClocksThrottleReasons")) return;
    unsigned long long reasons = 0;
    nvmlReturn_t rc = Call("gpu.throttle", "nvmlDeviceGetCurrentClocksThrottleReasons",
                           [&] { return api_.DeviceGetClockReasons(dev_, &reasons); });
    if (Bad(r, "nvmlDeviceGetCurrentClocksThrottleReasons", rc)) return;
    unsigned long long bad = reasons & ThrottleMask(c_.gpu_throttle_fail);
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", reasons);
    std::string names = ThrottleNames(reasons);
    r.value = std::string(hex) + (names.empty() ? "" : " (" + names + ")");
    r.threshold = "none of " + ThrottleNames(ThrottleMask(c_.gpu_throttle_fail));
    if (bad != 0) {
      r.verdict = Verdict::kFail;
      r.message = "clocks throttled: " + ThrottleNames(bad);
    } else {
      r.message = names.empty() ? "not throttled" : "clock reasons: " + names;
    }
    Emit(r);
  }

  void Pcie() {
    CheckResult r = Make("gpu.pcie", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetCurrPcieLinkWidth), "nvmlDeviceGetCurrPcieLinkWidth") ||
        Missing(r, reinterpret_cast<const void*>(api_.DeviceGetMaxPcieLinkWidth), "nvmlDeviceGetMaxPcieLinkWidth") ||
        Missing(r, reinterpret_cast<const void*>(api_.DeviceGetCurrPcieLinkGeneration), "nvmlDeviceGetCurrPcieLinkGeneration") ||
        Missing(r, reinterpret_cast<const void*>(api_.DeviceGetMaxPcieLinkGeneration), "nvmlDeviceGetMaxPcieLinkGeneration"))
      return;
    unsigned cw = 0, mw = 0, cg = 0, mg = 0;
    nvmlReturn_t rc;
    if (Bad(r, "nvmlDeviceGetCurrPcieLinkWidth", rc = Call("gpu.pcie", "nvmlDeviceGetCurrPcieLinkWidth", [&] { return api_.DeviceGetCurrPcieLinkWidth(dev_, &cw); }))) return;
    if (Bad(r, "nvmlDeviceGetMaxPcieLinkWidth", rc = Call("gpu.pcie", "nvmlDeviceGetMaxPcieLinkWidth", [&] { return api_.DeviceGetMaxPcieLinkWidth(dev_, &mw); }))) return;
    if (Bad(r, "nvmlDeviceGetCurrPcieLinkGeneration", rc = Call("gpu.pcie", "nvmlDeviceGetCurrPcieLinkGeneration", [&] { return api_.DeviceGetCurrPcieLinkGeneration(dev_, &cg); }))) return;
    if (Bad(r, "nvmlDeviceGetMaxPcieLinkGeneration", rc = Call("gpu.pcie", "nvmlDeviceGetMaxPcieLinkGeneration", [&] { return api_.DeviceGetMaxPcieLinkGeneration(dev_, &mg); }))) return;
    // Width is held against the expected maximum. The current generation is
    // only shown: an idle GPU drops its link to a lower generation to save
    // power, so it is not a fault; the link's maximum generation is checked
    // instead (a card in a slower slot or a misconfigured BIOS).
    unsigned want_w = c_.gpu_pcie_width != 0 ? static_cast<unsigned>(c_.gpu_pcie_width) : mw;
    r.value = "gen" + U(cg) + " x" + U(cw) + " (max gen" + U(mg) + " x" + U(mw) + ")";
    r.threshold = "x" + U(want_w) + (c_.gpu_pcie_gen != 0 ? ", max gen >= " + U(c_.gpu_pcie_gen) : "");
    if (cw < want_w) {
      r.verdict = Verdict::kFail;
      r.message = "PCIe link width x" + U(cw) + " < x" + U(want_w);
    } else if (c_.gpu_pcie_gen != 0 && mg < c_.gpu_pcie_gen) {
      r.verdict = Verdict::kFail;
      r.message = "PCIe link generation gen" + U(mg) + " < gen" + U(c_.gpu_pcie_gen);
    } else {
      r.message = "PCIe " + r.value;
    }
    Emit(r);
  }

  void NvLink() {
    CheckResult r = Make("gpu.nvlink", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetNvLinkState), "nvmlDeviceGetNvLinkState")) return;
    unsigned up = 0, present = 0;
    std::string down;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
      nvmlEnableState_t a = NVML_FEATURE_DISABLED;
      nvmlReturn_t rc = Call("gpu.nvlink", "nvmlDeviceGetNvLinkState", [&] { return api_.DeviceGetNvLinkState(dev_, l, &a); });
      if (lost_) return;
      // NOT_SUPPORTED / INVALID_ARGUMENT: this link does not exist here.
      if (rc != NVML_SUCCESS) continue;
      ++present;
      if (a == NVML_FEATURE_ENABLED) ++up;
      else down += (down.empty() ? "" : ",") + U(l);
    }
    if (present == 0) {
      r.seconds = last_seconds_;
      sink_(Skip(r, "no NVLink on this GPU"));
      return;
    }
    unsigned want = c_.gpu_nvlinks != 0 ? static_cast<unsigned>(c_.gpu_nvlinks) : present;
    r.value = U(up) + "/" + U(present) + " up";
    r.threshold = ">= " + U(want) + " up";
    if (up < want) {
      r.verdict = Verdict::kFail;
      r.message = "NVLinks up " + U(up) + " < " + U(want) + " (down: " + down + ")";
    } else {
      r.message = "NVLinks " + r.value;
    }
    Emit(r);
  }

  void Persistence() {
    CheckResult r = Make("gpu.persistence", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetPersistenceMode), "nvmlDeviceGetPersistenceMode")) return;
    nvmlEnableState_t m = NVML_FEATURE_DISABLED;
    nvmlReturn_t rc = Call("gpu.persistence", "nvmlDeviceGetPersistenceMode", [&] { return api_.DeviceGetPersistenceMode(dev_, &m); });
    if (Bad(r, "nvmlDeviceGetPersistenceMode", rc)) return;
    r.value = m == NVML_FEATURE_ENABLED ? "on" : "off";
    r.threshold = GpuPersistenceName(c_.gpu_persistence);
    if (c_.gpu_persistence != GpuPersistence::kAny && r.threshold != r.value) {
      r.verdict = Verdict::kFail;
      r.message = "persistence mode " + r.value + ", site expects " + r.threshold;
    } else {
      r.message = "persistence mode " + r.value;
    }
    Emit(r);
  }

  void ComputeMode() {
    CheckResult r = Make("gpu.compute_mode", label_);
    if (Missing(r, reinterpret_cast<const void*>(api_.DeviceGetComputeMode), "nvmlDeviceGetComputeMode")) return;
    nvmlComputeMode_t m = NVML_COMPUTEMODE_DEFAULT;
    nvmlReturn_t rc = Call("gpu.compute_mode", "nvmlDeviceGetComputeMode", [&] { return api_.DeviceGetComputeMode(dev_, &m); });
    if (Bad(r, "nvmlDeviceGetComputeMode", rc)) return;
    switch (m) {
      case NVML_COMPUTEMODE_DEFAULT: r.value = "default"; break;
      case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: r.value = "exclusive_thread"; break;
      case NVML_COMPUTEMODE_PROHIBITED: r.value = "prohibited"; break;
      case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: r.value = "exclusive_process"; break;
      default: r.value = "mode " + U(static_cast<unsigned>(m)); break;
    }
    r.threshold = c_.gpu_compute_mode;
    if (c_.gpu_compute_mode != "any" && c_.gpu_compute_mode != r.value) {
      r.verdict = Verdict::kFail;
      r.message = "compute mode " + r.value + ", site expects " + c_.gpu_compute_mode;
    } else {
      r.message = "compute mode " + r.value;
    }
    Emit(r);
  }

  const CheckEnv& env_;
  const Config& c_;
  const NvmlApi& api_;
  Sink& sink_;
  nvmlDevice_t dev_ = nullptr;
  std::string label_;
  bool lost_ = false;
  double check_t0_ = 0;      // when the current check began
  double last_seconds_ = 0;  // check_t0_ to the end of its latest NVML call
};

}  // namespace

static const struct {
  const char* name;
  unsigned long long bit;
} kThrottleBits[] = {
    {"idle", nvmlClocksThrottleReasonGpuIdle},
    {"app_clocks", nvmlClocksThrottleReasonApplicationsClocksSetting},
    {"sw_power_cap", nvmlClocksThrottleReasonSwPowerCap},
    {"hw_slowdown", nvmlClocksThrottleReasonHwSlowdown},
    {"sync_boost", nvmlClocksThrottleReasonSyncBoost},
    {"sw_thermal", nvmlClocksThrottleReasonSwThermalSlowdown},
    {"hw_thermal", nvmlClocksThrottleReasonHwThermalSlowdown},
    {"hw_power_brake", nvmlClocksThrottleReasonHwPowerBrakeSlowdown},
    {"display_clocks", nvmlClocksThrottleReasonDisplayClockSetting},
};

std::string ThrottleNames(unsigned long long mask) {
  std::string o;
  for (const auto& b : kThrottleBits)
    if (mask & b.bit) o += (o.empty() ? "" : ",") + std::string(b.name);
  return o;
}

unsigned long long ThrottleMask(const std::vector<std::string>& names) {
  unsigned long long m = 0;
  for (const auto& n : names)
    for (const auto& b : kThrottleBits)
      if (n == b.name) m |= b.bit;
  return m;
}

std::vector<CheckResult> CheckGpus(const CheckEnv& env) {
  const Config& c = env.cfg;
  Sink sink;
  uint64_t expected = c.gpu_count != 0 ? c.gpu_count : CountDevNvidia(env.fs);
  std::string expect_src = c.gpu_count != 0 ? "gpu_count" : "/dev/nvidiaN files";

  // Missing NVML is "skipped" on a node that is not known to have GPUs, and
  // a failure on one that is (a GPU node whose driver is gone).
  auto unavailable = [&](const std::string& why) {
    CheckResult r = Make("gpu.nvml", c.nvml_library);
    if (expected == 0) {
      sink(Skip(r, why));
    } else {
      r.verdict = Verdict::kFail;
      r.value = "unavailable";
      r.threshold = U(expected) + " GPUs (" + expect_src + ")";
      r.message = why + ", but this node should have " + U(expected) + " GPUs";
      sink(r);
    }
    return std::move(sink.out);
  };

  // Only this check's child sees the variable (RunChecks forks per check).
  ProbeStep("gpu.nvml", c.nvml_library, "dlopen");
  auto api_or = LoadNvmlFor(c);
  if (!api_or) return unavailable(api_or.status().message());
  const NvmlApi& api = **api_or;
  ProbeStep("gpu.nvml", c.nvml_library, "nvmlInit_v2");
  nvmlReturn_t rc = api.Init();
  if (rc != NVML_SUCCESS) return unavailable("nvmlInit_v2: " + api.Error(rc));

  unsigned n = 0;
  ProbeStep("gpu.count", "", "nvmlDeviceGetCount_v2");
  double t0 = MonotonicSeconds();
  rc = api.DeviceGetCount(&n);
  CheckResult cnt = Make("gpu.count", "node");
  cnt.seconds = MonotonicSeconds() - t0;
  if (rc != NVML_SUCCESS) {
    cnt.verdict = Verdict::kFail;
    cnt.value = "error";
    cnt.message = "nvmlDeviceGetCount_v2: " + api.Error(rc);
    sink(cnt);
    api.Shutdown();
    return std::move(sink.out);
  }
  cnt.value = U(n);
  if (expected == 0) {
    cnt.threshold = "any";
    cnt.message = U(n) + " GPUs (no expected count: set gpu_count)";
  } else {
    cnt.threshold = "== " + U(expected) + " (" + expect_src + ")";
    if (n != expected) {
      cnt.verdict = Verdict::kFail;
      cnt.message = "NVML sees " + U(n) + " GPUs, expected " + U(expected) + (n < expected ? " (GPU missing from the bus?)" : "");
    } else {
      cnt.message = U(n) + " GPUs as expected";
    }
  }
  sink(cnt);

  GpuProbe probe(env, api, sink);
  for (unsigned i = 0; i < n; ++i) {
    std::string label = "GPU" + U(i);
    nvmlDevice_t dev = nullptr;
    ProbeStep("gpu.present", label, "nvmlDeviceGetHandleByIndex_v2");
    t0 = MonotonicSeconds();
    rc = api.DeviceGetHandleByIndex(i, &dev);
    CheckResult p = Make("gpu.present", label);
    p.threshold = "on the bus";
    if (rc == NVML_SUCCESS) {
      nvmlPciInfo_t pci;
      std::memset(&pci, 0, sizeof pci);
      ProbeStep("gpu.present", label, "nvmlDeviceGetPciInfo_v3");
      rc = api.DeviceGetPciInfo(dev, &pci);
      if (rc == NVML_SUCCESS) p.device = label = label + " " + ShortBusId(pci.busId);
    }
    p.seconds = MonotonicSeconds() - t0;
    if (rc != NVML_SUCCESS) {
      p.verdict = Verdict::kFail;
      p.value = rc == NVML_ERROR_GPU_IS_LOST ? "lost" : "error";
      p.message = rc == NVML_ERROR_GPU_IS_LOST ? "GPU has fallen off the bus (" + api.Error(rc) + ")"
                                               : "cannot open GPU: " + api.Error(rc);
      sink(p);
      continue;
    }
    if (!GpuSelected(env, i, api, dev)) continue;
    p.value = "present";
    p.message = "on the bus";
    sink(p);
    probe.Run(i, dev, label);
  }
  ProbeStep("gpu", "", "nvmlShutdown");
  api.Shutdown();
  return std::move(sink.out);
}

}  // namespace preflight
