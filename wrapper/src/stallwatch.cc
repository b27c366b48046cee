#include "preflight/stallwatch.h"

#include <cstdio>

namespace preflight {

const char* AlertKindName(AlertKind k) {
  switch (k) {
    case AlertKind::kOutput: return "output";
    case AlertKind::kHeartbeat: return "heartbeat";
    case AlertKind::kGpu: return "gpu";
    case AlertKind::kNan: return "nan";
  }
  return "?";
}

namespace {

std::string Secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 10 ? "%.1fs" : "%.0fs", s);
  return b;
}

}  // namespace

StallWatch::StallWatch(const StallOptions& o, double now)
    : o_(o), last_line_(now), last_heartbeat_(now), last_gpu_busy_(now) {}

Expected<std::unique_ptr<StallWatch>> StallWatch::Create(const StallOptions& o, double now) {
  std::unique_ptr<StallWatch> w(new StallWatch(o, now));
  if (!o.nan_pattern.empty()) {
    auto re = Regex::Compile(o.nan_pattern);
    if (!re) return re.status().Context("NaN pattern");
    w->nan_ = *re;
  }
  return w;
}

std::optional<Alert> StallWatch::OnLine(const std::string& line, double now) {
  last_line_ = now;
  output_fired_ = false;
  if (!nan_ || nan_fired_) return std::nullopt;
  if (!nan_->Search(line)) return std::nullopt;
  // One NaN alert per run: a diverged loss prints NaN on every step after.
  nan_fired_ = true;
  std::string shown = line.size() > 200 ? line.substr(0, 200) + "..." : line;
  for (char& c : shown)
    if (c == '\0') c = ' ';  // an alert is text (printed, passed to the hook's environment)
  return Alert{AlertKind::kNan, "output line matches NaN pattern: " + shown, now};
}

void StallWatch::OnHeartbeat(double now) {
  last_heartbeat_ = now;
  heartbeat_fired_ = false;
}

void StallWatch::OnGpuSample(const std::vector<unsigned>& util, double now) {
  if (util.empty()) return;
  gpu_seen_ = true;
  for (unsigned u : util) {
    if (u > o_.gpu_idle_percent) {
      last_gpu_busy_ = now;
      gpu_fired_ = false;
      return;
    }
  }
}

std::vector<Alert> StallWatch::Check(double now) {
  std::vector<Alert> out;
  if (o_.output_s > 0 && !output_fired_ && now - last_line_ >= o_.output_s) {
    output_fired_ = true;
    out.push_back({AlertKind::kOutput,
                   "no output line for " + Secs(now - last_line_) + " (limit " + Secs(o_.output_s) + ")", now});
  }
  if (o_.heartbeat_s > 0 && !heartbeat_fired_ && now - last_heartbeat_ >= o_.heartbeat_s) {
    heartbeat_fired_ = true;
    out.push_back({AlertKind::kHeartbeat,
                   "heartbeat file not updated for " + Secs(now - last_heartbeat_) + " (limit " +
                       Secs(o_.heartbeat_s) + ")",
                   now});
  }
  // Without any GPU sample (no NVML, CPU node) the GPU watch never fires.
  if (o_.gpu_s > 0 && gpu_seen_ && !gpu_fired_ && now - last_gpu_busy_ >= o_.gpu_s) {
    gpu_fired_ = true;
    out.push_back({AlertKind::kGpu,
                   "every GPU at or below " + std::to_string(o_.gpu_idle_percent) + "% utilisation for " +
                       Secs(now - last_gpu_busy_) + " (limit " + Secs(o_.gpu_s) + ")",
                   now});
  }
  return out;
}

}  // namespace preflight
