// The collective check's outcome as node_exporter textfile metrics:
// <textfile_dir>/preflight_<node>_nccl.prom, written by the SPANK plugin on
// the batch node after the allocation check (spank_plugin/spank_nccl.cc).
// Slurm-free: the plugin fills NcclMetrics and calls WriteNcclMetrics.
//
//   preflight_nccl_ok{node,scope}                         1 passed, 0 failed
//   preflight_nccl_busbw_bytes_per_second{node,scope}     busbw at the judged size (0: none measured)
//   preflight_nccl_threshold_bytes_per_second{node,scope} the bound (0: none)
//   preflight_nccl_suspect{node,suspect}                  1 per node named at fault (drained or inter-node suspect)
//   preflight_nccl_last_run_timestamp_seconds{node,scope} when the check finished
//
// `node` is the node that ran the check and wrote the file (the batch node
// for scope="allocation"); no job label, so a series per node, not per job.
// The figures of scope="allocation" are those the job's own step printed
// (collective_records.h): they inform an alert, they drain nothing.
// conf/prometheus/preflight.rules.yml alerts on them.
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight::collective {

struct NcclMetrics {
  std::string node;
  std::string scope = "allocation";  // "allocation" or "intra"
  bool ok = false;
  double busbw = 0;      // bytes/s
  double threshold = 0;  // bytes/s, 0: none
  std::vector<std::string> suspects;
  double finished_unix = 0;
};

std::string NcclPrometheus(const NcclMetrics& m);

// The file name under textfile_dir: "preflight_<node>_nccl.prom".
std::string NcclMetricsFile(const std::string& node);

// Writes NcclPrometheus(m) atomically to textfile_dir/NcclMetricsFile(node);
// does nothing (Ok) when textfile_dir is unset.
Status WriteNcclMetrics(const Config& cfg, const NcclMetrics& m);

}  // namespace preflight::collective
