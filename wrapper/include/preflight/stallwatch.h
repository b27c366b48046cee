// Stall and NaN detection for preflight-run. Pure: the caller feeds it
// events with a monotonic time in seconds and asks Check(now), so tests
// drive it without sleeping. Each kind alerts once per episode: after an
// alert it re-arms only when that kind of progress is seen again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "preflight/regex.h"
#include "preflight/status.h"

namespace preflight {

// GPU utilisation, one figure (0-100 %) per GPU of this job. The seam for
// NVML: the real source is OpenNvmlGpuUtil (preflight/gpu_util.h,
// nvmlDeviceGetUtilizationRates through the dlopen'ed NVML table); tests
// pass a fake source here or put the fake NVML behind that one.
class GpuUtilSource {
 public:
  virtual ~GpuUtilSource() = default;
  // Unavailable when there is no driver or no GPU; the watch then ignores GPUs.
  virtual Expected<std::vector<unsigned>> Utilization() = 0;
};

struct StallOptions {
  double output_s = 0;          // no new output line for this long (0: off)
  double heartbeat_s = 0;       // heartbeat file not updated for this long (0: off)
  double gpu_s = 0;             // every GPU at or below gpu_idle_percent this long (0: off)
  unsigned gpu_idle_percent = 5;
  std::string nan_pattern;      // POSIX ERE (preflight/regex.h) on each output line (empty: off)
};

enum class AlertKind { kOutput, kHeartbeat, kGpu, kNan };
const char* AlertKindName(AlertKind k);  // "output", "heartbeat", "gpu", "nan"

struct Alert {
  AlertKind kind;
  std::string detail;  // one line: "no output line for 31s (limit 30s)"
  double at = 0;       // monotonic seconds
};

class StallWatch {
 public:
  // Fails (naming the pattern) when nan_pattern is not a valid regex.
  static Expected<std::unique_ptr<StallWatch>> Create(const StallOptions& o, double now);

  // One complete output line; returns a NaN alert when it matches.
  std::optional<Alert> OnLine(const std::string& line, double now);
  // The heartbeat file's mtime changed (the caller polls it).
  void OnHeartbeat(double now);
  // A GPU sample; an empty or failed sample leaves the GPU clock alone.
  void OnGpuSample(const std::vector<unsigned>& util, double now);
  // Time-based alerts that became due since the last call.
  std::vector<Alert> Check(double now);

  const StallOptions& options() const { return o_; }

 private:
  explicit StallWatch(const StallOptions& o, double now);
  StallOptions o_;
  std::optional<Regex> nan_;
  bool nan_fired_ = false;
  double last_line_, last_heartbeat_, last_gpu_busy_;
  bool output_fired_ = false, heartbeat_fired_ = false, gpu_fired_ = false;
  bool gpu_seen_ = false;
};

}  // namespace preflight
