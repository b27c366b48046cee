#include "preflight/gpu_util.h"

#include <algorithm>

#include "preflight/nvml.h"

namespace preflight {
namespace {

class NvmlGpuUtil : public GpuUtilSource {
 public:
  NvmlGpuUtil(const NvmlApi* api, std::vector<nvmlDevice_t> devs) : api_(api), devs_(std::move(devs)) {}
  Expected<std::vector<unsigned>> Utilization() override {
    std::vector<unsigned> out;
    for (nvmlDevice_t d : devs_) {
      nvmlUtilization_t u{};
      nvmlReturn_t r = api_->DeviceGetUtilizationRates(d, &u);
      // A GPU that stops answering is not "idle": leave the sample out.
      if (r != NVML_SUCCESS) return Status::Unavailable("nvmlDeviceGetUtilizationRates: " + api_->Error(r));
      out.push_back(u.gpu);
    }
    return out;
  }

 private:
  const NvmlApi* api_;
  std::vector<nvmlDevice_t> devs_;
};

}  // namespace

Expected<NvmlJobGpus> OpenNvmlJobGpus(const std::string& library, const std::vector<int>& minors) {
  auto api = LoadNvml(library);
  if (!api) return api.status();
  const NvmlApi* a = *api;
  nvmlReturn_t r = a->Init();
  if (r != NVML_SUCCESS) return Status::Unavailable("nvmlInit_v2: " + a->Error(r));
  unsigned n = 0;
  r = a->DeviceGetCount(&n);
  if (r != NVML_SUCCESS) return Status::Unavailable("nvmlDeviceGetCount_v2: " + a->Error(r));
  NvmlJobGpus out;
  out.api = a;
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d;
    if (a->DeviceGetHandleByIndex(i, &d) != NVML_SUCCESS) continue;
    if (!minors.empty()) {
      unsigned minor = 0;
      if (a->DeviceGetMinorNumber == nullptr || a->DeviceGetMinorNumber(d, &minor) != NVML_SUCCESS) continue;
      if (std::find(minors.begin(), minors.end(), static_cast<int>(minor)) == minors.end()) continue;
    }
    out.devs.push_back(d);
    out.index.push_back(i);
  }
  if (out.devs.empty()) return Status::Unavailable("none of the job's GPUs found through NVML");
  return out;
}

Expected<std::unique_ptr<GpuUtilSource>> OpenNvmlGpuUtil(const std::string& library, const std::vector<int>& minors) {
  auto api = LoadNvml(library);
  if (!api) return api.status();
  if ((*api)->DeviceGetUtilizationRates == nullptr)
    return Status::Unavailable(library + " lacks nvmlDeviceGetUtilizationRates");
  auto gpus = OpenNvmlJobGpus(library, minors);
  if (!gpus) return gpus.status();
  return std::unique_ptr<GpuUtilSource>(new NvmlGpuUtil(gpus->api, std::move(gpus->devs)));
}

}  // namespace preflight
