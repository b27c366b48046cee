#include "preflight/collective_metrics.h"

#include <cstdio>
#include <set>

#include "preflight/fileutil.h"
#include "preflight/report.h"

namespace preflight::collective {

std::string NcclPrometheus(const NcclMetrics& m) {
  const std::string node = "node=\"" + PromLabel(m.node) + "\"";
  const std::string base = node + ",scope=\"" + PromLabel(m.scope) + "\"";
  std::string o;
  auto gauge = [&](const char* name, const char* help, const std::string& value) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
    o += std::string(name) + "{" + base + "} " + value + "\n";
  };
  gauge("preflight_nccl_ok", "1 if the last collective check (--nccl-check) passed, 0 if it failed.", m.ok ? "1" : "0");
  gauge("preflight_nccl_busbw_bytes_per_second", "all_reduce bus bandwidth at the judged size (0: none measured).",
        PromNumber(m.busbw));
  gauge("preflight_nccl_threshold_bytes_per_second", "The busbw bound of the last check (0: none).",
        PromNumber(m.threshold));
  o += "# HELP preflight_nccl_suspect 1 for each node the last failed check named at fault.\n"
       "# TYPE preflight_nccl_suspect gauge\n";
  std::set<std::string> seen;
  for (const auto& s : m.suspects)
    if (seen.insert(s).second) o += "preflight_nccl_suspect{" + node + ",suspect=\"" + PromLabel(s) + "\"} 1\n";
  char ts[32];
  std::snprintf(ts, sizeof ts, "%.0f", m.finished_unix);  // whole seconds; %.6g would round by hours
  gauge("preflight_nccl_last_run_timestamp_seconds", "When the last collective check finished.", ts);
  return o;
}

std::string NcclMetricsFile(const std::string& node) { return "preflight_" + node + "_nccl.prom"; }

Status WriteNcclMetrics(const Config& cfg, const NcclMetrics& m) {
  if (cfg.textfile_dir.empty()) return Status::Ok();
  Status s = MakeDirs(cfg.textfile_dir, 0755);
  if (s.ok()) s = WriteFileAtomic(cfg.textfile_dir + "/" + NcclMetricsFile(m.node), NcclPrometheus(m));
  return s.ok() ? s : s.Context("metrics");
}

}  // namespace preflight::collective
