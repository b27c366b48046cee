#include "preflight/health_checks.h"

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
#include "preflight/state_paths.h"

namespace preflight {
namespace {

// Results go to the harness as soon as they exist (ProbeEmit), so a later
// hang in the same check loses nothing; outside the harness they are returned.
struct Sink {
  std::vector<CheckResult> out;
  void operator()(CheckResult r) {
    if (!ProbeEmit(r)) out.push_back(std::move(r));
  }
};

CheckResult Make(const std::string& check, const std::string& device) {
  CheckResult r;
  r.check = check;
  r.device = device;
  return r;
}

CheckResult Skip(CheckResult r, const std::string& why) {
  r.verdict = Verdict::kSkip;
  r.message = "skipped: " + why;
  return r;
}

std::string U(unsigned long long v) { return std::to_string(v); }

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
    r.threshold = c_.gpu_persistence;
    if (c_.gpu_persistence != "any" && c_.gpu_persistence != r.value) {
      r.verdict = Verdict::kFail;
      r.message = "persistence mode " + r.value + ", site expects " + c_.gpu_persistence;
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
  if (!c.nvml_fault_file.empty()) ::setenv("PREFLIGHT_FAKE_NVML_FAULTS", c.nvml_fault_file.c_str(), 1);
  ProbeStep("gpu.nvml", c.nvml_library, "dlopen");
  auto api_or = LoadNvml(c.nvml_library);
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

// --- InfiniBand / RoCE ports ---------------------------------------------

namespace {

std::string FirstWordAfterColon(const std::string& s) {
  // "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp"
  size_t c = s.find(':');
  std::string v = c == std::string::npos ? s : s.substr(c + 1);
  size_t b = v.find_first_not_of(' ');
  return b == std::string::npos ? "" : v.substr(b);
}

}  // namespace

std::vector<CheckResult> CheckInterconnect(const CheckEnv& env) {
  const Config& c = env.cfg;
  Sink sink;
  const std::string cls = "/sys/class/infiniband";
  ProbeStep("ib.present", "", "list " + env.fs.HostPath(cls));
  auto found = env.fs.ListDir(cls);
  std::vector<std::string> hcas = found ? *found : std::vector<std::string>{};
  if (hcas.empty() && c.ib_hcas.empty()) {
    sink(Skip(Make("ib.present", "node"),
              "no HCA on this node (" + (found ? env.fs.HostPath(cls) + " is empty" : found.status().message()) + ")"));
    return std::move(sink.out);
  }
  std::vector<std::string> check = c.ib_hcas.empty() ? hcas : c.ib_hcas;
  for (const auto& want : c.ib_hcas) {
    CheckResult r = Make("ib.present", want);
    r.threshold = "present";
    if (std::find(hcas.begin(), hcas.end(), want) == hcas.end()) {
      r.verdict = Verdict::kFail;
      r.value = "missing";
      r.message = "expected HCA missing from " + env.fs.HostPath(cls);
    } else {
      r.value = "present";
      r.message = "present";
    }
    sink(r);
  }

  // Previous link_downed counters, to tell a flapping link from a stable one.
  std::string state_path = state::NodeFile(c, env.job.node, state::kIb);
  std::map<std::string, uint64_t> prev, now;
  if (auto t = ReadWholeFile(state_path)) {
    std::istringstream in(*t);
    std::string k;
    uint64_t v;
    while (in >> k >> v) prev[k] = v;
  }

  for (const auto& hca : check) {
    if (std::find(hcas.begin(), hcas.end(), hca) == hcas.end()) continue;  // reported above
    std::string base = cls + "/" + hca;
    auto ports = env.fs.ListDir(base + "/ports");
    if (!ports || ports->empty()) {
      CheckResult r = Make("ib.port", hca);
      r.verdict = Verdict::kFail;
      r.value = "no ports";
      r.message = ports ? "no ports under " + env.fs.HostPath(base + "/ports") : ports.status().message();
      sink(r);
      continue;
    }
    for (const auto& port : *ports) {
      std::string dev = hca + " port " + port, pb = base + "/ports/" + port;
      double t0 = MonotonicSeconds();
      ProbeStep("ib.port", dev, "read " + env.fs.HostPath(pb));
      auto state = env.fs.ReadFile(pb + "/state");
      auto phys = env.fs.ReadFile(pb + "/phys_state");
      auto rate = env.fs.ReadFile(pb + "/rate");
      auto layer = env.fs.ReadFile(pb + "/link_layer");
      auto downed = env.fs.ReadFile(pb + "/counters/link_downed");
      double dt = (MonotonicSeconds() - t0) / 5;

      CheckResult p = Make("ib.port", dev);
      p.seconds = dt;
      p.threshold = "ACTIVE/LinkUp";
      if (!state || !phys) {
        p.verdict = Verdict::kFail;
        p.value = "unreadable";
        p.message = (!state ? state.status() : phys.status()).message();
      } else {
        std::string s = FirstWordAfterColon(*state), ph = FirstWordAfterColon(*phys);
        p.value = s + "/" + ph;
        if (s != "ACTIVE" || ph != "LinkUp") {
          p.verdict = Verdict::kFail;
          p.message = "port " + p.value + ", need ACTIVE/LinkUp";
        } else {
          p.message = "port ACTIVE/LinkUp";
        }
      }
      sink(p);

      CheckResult rr = Make("ib.rate", dev);
      rr.seconds = dt;
      if (!rate) {
        rr.verdict = Verdict::kFail;
        rr.value = "unreadable";
        rr.message = rate.status().message();
      } else {
        char* end = nullptr;
        double gbps = std::strtod(rate->c_str(), &end);
        rr.value = *rate;
        rr.threshold = c.ib_rate != 0 ? ">= " + U(c.ib_rate) + " Gb/sec" : "any";
        if (end == rate->c_str()) {
          rr.verdict = Verdict::kFail;
          rr.message = "cannot parse rate '" + *rate + "' in " + env.fs.HostPath(pb + "/rate");
        } else if (c.ib_rate != 0 && gbps < static_cast<double>(c.ib_rate)) {
          rr.verdict = Verdict::kFail;
          rr.message = "rate " + *rate + " < " + U(c.ib_rate) + " Gb/sec";
        } else {
          rr.message = "rate " + *rate;
        }
      }
      sink(rr);

      CheckResult ll = Make("ib.link_layer", dev);
      ll.seconds = dt;
      ll.threshold = c.ib_link_layer;
      if (!layer) {
        ll.verdict = Verdict::kFail;
        ll.value = "unreadable";
        ll.message = layer.status().message();
      } else {
        ll.value = *layer;
        if (c.ib_link_layer != "any" && *layer != c.ib_link_layer) {
          ll.verdict = Verdict::kFail;
          ll.message = "link layer " + *layer + ", expected " + c.ib_link_layer;
        } else {
          ll.message = "link layer " + *layer;
        }
      }
      sink(ll);

      CheckResult fl = Make("ib.flapping", dev);
      fl.seconds = dt;
      fl.threshold = "link_downed unchanged";
      if (!downed) {
        sink(Skip(fl, "no link_downed counter: " + downed.status().message()));
      } else {
        uint64_t v = std::strtoull(downed->c_str(), nullptr, 10);
        std::string key = hca + "/" + port;
        now[key] = v;
        fl.value = "link_downed " + U(v);
        auto it = prev.find(key);
        if (it != prev.end() && v > it->second) {
          fl.verdict = Verdict::kFail;
          fl.message = "link went down " + U(v - it->second) + " times since last check (link_downed " +
                       U(it->second) + " -> " + U(v) + ")";
        } else {
          fl.message = it == prev.end() ? "link_downed " + U(v) + " (first check)" : "link_downed unchanged at " + U(v);
        }
        sink(fl);
      }

      // RoCE: the port's Ethernet netdev must be up too.
      if (layer && *layer == "Ethernet") {
        CheckResult nd = Make("ib.netdev", dev);
        nd.threshold = "up";
        auto nets = env.fs.ListDir(base + "/device/net");
        if (!nets || nets->empty()) {
          nd.verdict = Verdict::kFail;
          nd.value = "none";
          nd.message = "no netdev for RoCE port under " + env.fs.HostPath(base + "/device/net");
        } else {
          std::string bad, vals;
          for (const auto& n : *nets) {
            auto op = env.fs.ReadFile("/sys/class/net/" + n + "/operstate");
            std::string o = op ? *op : "unreadable";
            vals += (vals.empty() ? "" : ",") + n + "=" + o;
            if (o != "up") bad += (bad.empty() ? "" : ", ") + n + " is " + o;
          }
          nd.value = vals;
          if (!bad.empty()) {
            nd.verdict = Verdict::kFail;
            nd.message = "RoCE netdev not up: " + bad;
          } else {
            nd.message = "netdev " + vals;
          }
        }
        sink(nd);
      }
    }
  }
  if (!now.empty() && !env.job.node.empty()) {
    std::string out;
    for (const auto& kv : now) out += kv.first + " " + U(kv.second) + "\n";
    Status w = MakeDirs(state::NodesDir(c), 0755);
    if (w.ok()) w = WriteFileAtomic(state_path, out, 0644);
    if (!w.ok()) {
      CheckResult r = Make("ib.flapping", "node");
      r.verdict = Verdict::kFail;
      r.message = "cannot keep link counters: " + w.message();
      sink(r);
    }
  }
  return std::move(sink.out);
}

}  // namespace preflight
