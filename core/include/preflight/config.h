// The site configuration: one struct, one key table, strict parsing. The
// value types and parsers of each subsystem's keys are in its own header
// (health_config.h, nccl_config.h, stage_config.h, ckpt_config.h, run_config.h; the
// shared syntax in config_values.h); the table that names every key, its
// help and its parser is config.cc's, in one place.
//
// File format (conf/preflight.conf): one `key = value` a line; `#` starts a
// comment; blank lines ignored; a key given twice is an error. In path-valued
// keys `%n` becomes the node name (as in slurm.conf) and `%%` a literal `%`.
//
// Precedence, lowest to highest: built-in defaults < site config file <
// plugstack.conf arguments (plugin) or --set KEY=VALUE (binaries). The
// environment never changes the site config: a job's user controls the
// environment, the admin controls the config.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "preflight/check_names.h"
#include "preflight/config_values.h"
#include "preflight/dl_library.h"
#include "preflight/health_config.h"
#include "preflight/nccl_config.h"
#include "preflight/options.h"
#include "preflight/run_config.h"
#include "preflight/stage_config.h"
#include "preflight/ckpt_config.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr const char* kDefaultConfigPath = "/etc/preflight/preflight.conf";
#ifndef PREFLIGHT_DEFAULT_SLURM_QUERY
#define PREFLIGHT_DEFAULT_SLURM_QUERY "/usr/sbin/preflight"
#endif


struct Config {
  // Where per-job results (JSON) and node state live. Root-owned.
  std::string state_dir = "/var/lib/preflight";
  // How long and how much of <state_dir>/jobs is kept for on-call
  // (state_paths.h: PruneJobState); 0: no bound of that kind.
  uint32_t state_keep_ms = 7u * 24 * 3600 * 1000;
  uint64_t state_keep_bytes = 256ull << 20;
  // node_exporter textfile collector directory; empty disables metrics.
  std::string textfile_dir;
  // dcgm-exporter's --hpc-job-mapping-dir (gpu_job_map.h): one file per
  // GPU listing the jobs on it, written by the prolog, pruned by the
  // epilog; empty: not written.
  std::string dcgm_job_map_dir;
  // Level used for jobs that did not pass --nccl-check (off: check only on request).
  Level default_level = Level::kOff;
  // One root for /sys, /proc and /dev reads (tests point it at a fixture tree).
  std::string fsroot = "/";
  // hwloc XML to load instead of probing the machine (empty: probe).
  std::string topology_xml;
  // Topology-aware NCCL/RDMA environment per task (--preflight-env).
  bool topo_env = true;
  // Export NCCL_IB_GID_INDEX when every paired port is RoCE with a validated
  // RoCE v2 GID.
  bool nccl_gid_index = true;
  // NCCL_TOPO_FILE to set for tasks (VMs whose PCI tree is virtual); empty: never set.
  std::string nccl_topo_file;
  // Pinned GPU-NIC placement ("0:mlx5_0,1:mlx5_1"); empty skips the check.
  std::string topo_expect;
  // NICs that are compute rails (topo.h: ClassifyRails); empty: from the
  // PCIe tree. Names checked against the node's NICs where used.
  std::vector<std::string> topo_rails;

  // Node-local scratch (NVMe) check; empty scratch_dir skips it.
  std::string scratch_dir;
  uint64_t scratch_min_free_bytes = 1ull << 30;
  uint64_t scratch_min_free_inodes = 10000;

  // After a failed prolog check, set the node's drain reason to name the
  // check (a detached, time-bounded scontrol; see man preflight(7)).
  bool set_drain_reason = true;
  std::string scontrol = "scontrol";
  // SLURM_CONF for the scontrol calls (empty: inherit slurmd's environment).
  std::string slurm_conf;
  // `preflight` (admin) binary whose `slurm job|steps|nodes` prints
  // slurmctld's records as JSON: every read of a job, step or node goes
  // through it, never through scontrol's text (see core/slurmctl.h).
  std::string slurm_query = PREFLIGHT_DEFAULT_SLURM_QUERY;
  // Upper bound for any single probe.
  uint32_t probe_timeout_ms = 10000;

  // GPU checks (NVML, dlopen'ed; see man preflight(7) "Node health checks").
  std::string nvml_library = "libnvidia-ml.so.1";
  // Test hook: exported as PREFLIGHT_FAKE_NVML_FAULTS to the NVML probe
  // (the fake library in tests/fakes/ reads it; the real NVML ignores it).
  std::string nvml_fault_file;
  uint64_t gpu_count = 0;                 // 0: count /dev/nvidia<N> under fsroot
  uint64_t gpu_max_ecc_uncorrected = 0;   // volatile and aggregate
  uint64_t gpu_max_retired_pages = 60;
  uint64_t gpu_max_temp = 85;             // degrees C
  std::vector<std::string> gpu_throttle_fail = {"hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal"};
  uint64_t gpu_pcie_gen = 0;              // 0: not checked
  uint64_t gpu_pcie_width = 0;            // 0: the device's own maximum
  uint64_t gpu_nvlinks = 0;               // 0: every link NVML reports must be up
  GpuPersistence gpu_persistence = GpuPersistence::kAny;
  std::string gpu_compute_mode = "any";   // any, default, exclusive_process, prohibited
  // Xid codes never recorded (v1 key; the catalogue in xid.cc now classes
  // 13/31/43 as the user's and 45 as ignore, so the default is empty).
  std::vector<std::string> xid_ignore;
  // Per-Xid overrides of the catalogue's action ("79:drain_reset,13:ignore").
  XidActions xid_actions;
  // How long a drain, warn or user Xid finding stays open (0: until reboot).
  uint32_t xid_window_ms = 24 * 3600 * 1000;
  // Interconnect checks (sysfs under fsroot).
  std::vector<std::string> ib_hcas;       // empty: every HCA found
  uint64_t ib_rate = 0;                   // minimum Gb/s; 0: not checked
  LinkLayer ib_link_layer = LinkLayer::kAny;
  // ib.counters (ib_counters.h): most a port error counter may rise between
  // two checks before it warns / fails. Warn defaults: infiniband-diags'
  // ibcheckerrs thresholds; fail: ten times those for the physical-layer ones.
  CounterLimits ib_counter_warn = {
      {"symbol_error", 10}, {"link_error_recovery", 10}, {"port_rcv_errors", 10},
      {"port_rcv_remote_physical_errors", 100}, {"port_rcv_switch_relay_errors", 100},
      {"port_xmit_discards", 100}, {"port_xmit_constraint_errors", 100}, {"port_rcv_constraint_errors", 100},
      {"local_link_integrity_errors", 10}, {"excessive_buffer_overrun_errors", 10}, {"VL15_dropped", 100}};
  // Rises are counted over a window of this length (0: since the previous check).
  uint32_t ib_counter_window_ms = 3600 * 1000;
  CounterLimits ib_counter_fail = {
      {"symbol_error", 100}, {"link_error_recovery", 100}, {"port_rcv_errors", 100},
      {"local_link_integrity_errors", 100}, {"excessive_buffer_overrun_errors", 100}};
  // fleet.versions (fleet.h): fields whose difference from the majority of
  // this hardware's nodes fails (others warn); records older than the age
  // are not compared (0: any age).
  std::vector<std::string> fleet_fail_fields = {"driver", "hca_fw"};
  uint32_t fleet_max_age_ms = 7u * 24 * 3600 * 1000;
  // gpu.bandwidth (bandwidth.h), full level: CUDA runtime to dlopen, the
  // profile (auto: from the GPU name), the fraction of its per-direction
  // peak each copy must reach, and the bytes per copy.
  // Default: CUDA 13's soname, then CUDA 12's and 11's (CudaRuntimeNames,
  // dl_library.h); a value set in the config is the only one tried. The NCCL
  // backend loads the same runtime the same way.
  std::string cuda_runtime = kCudaRuntimeSoname;
  std::string bw_profile = "auto";
  double bw_min_fraction = 0.6;
  uint64_t bw_bytes = 256ull << 20;
  // gpu.gemm (gemm.h), full level: the cuBLAS to dlopen (default CUDA 13's
  // soname, then 12's, as cuda_runtime), the TFLOPS profile (auto: from the
  // GPU name), the fraction of its dense FP16 peak each GPU must reach, how
  // long every GPU runs the GEMM loop, and the matrices' side (N x N x N).
  std::string cublas_library = "libcublas.so.13";
  std::string gemm_profile = "auto";
  double gemm_min_fraction = 0.5;  // healthy GPUs reach about 0.65 to 0.8 (gemm.cc)
  uint64_t gemm_soak_seconds = 60;  // the parser allows 1..3600; 0 (tests only): one batch
  uint64_t gemm_size = 8192;
  // gpu.dcgm (dcgm.h): dcgmi binary, diag level at full (0: never), in the
  // health check (0: not run there), and the bound on one diag.
  std::string dcgmi = "dcgmi";
  uint64_t dcgm_level = 1;
  uint64_t dcgm_health_level = 0;
  uint32_t dcgm_timeout_ms = 300000;
  // A hosts(5)-style file, "ADDRESS NODE..." per line: the address each
  // node uses for preflight's own traffic between nodes (the host backend's
  // ring, the stage fan-out), e.g. its fabric's IPoIB address. Empty: the
  // node name, resolved (node_addresses.h).
  std::string node_addresses;
  RunConfig run;    // run_* keys
  NcclConfig nccl;  // nccl_* keys (the collective check)
  StageConfig stage;  // stage_* keys (--stage)
  CkptConfig ckpt;    // ckpt_* keys (checkpoint persistence)

  // Per-check switches, by check name ("gpu.xid"); absent: on (check_names.h).
  std::map<std::string, CheckMode> check_modes;

  // Where the config was read from (empty: defaults only).
  std::string source;
};

struct ConfigKey {
  const char* name;
  const char* type;     // "path", "bool", "size", "count", "duration", "level", "string"
  const char* help;     // one line, for `preflight config keys` and the man page
  std::string (*get)(const Config&);
  Status (*set)(Config&, const std::string& value);
};

const std::vector<ConfigKey>& ConfigKeys();

// Parse the file at `path`. `%n` in path values expands to `node` (left as is
// when node is empty). If `required` is false a missing file yields defaults.
// Errors read "FILE:LINE: key 'K': CAUSE".
Expected<Config> LoadConfig(const std::string& path, const std::string& node, bool required);
// What can be read of a broken config: every line that parses, the bad
// ones skipped (defaults for the rest; defaults alone when the file cannot
// be read). Only for reporting the config error itself (the prolog drains
// its node naming file, line and key, with the site's scontrol); never to
// run checks with.
Config LoadConfigLenient(const std::string& path, const std::string& node);

// Apply `key=value` overrides (plugstack arguments, --set); errors name the
// origin given, e.g. "plugstack.conf argument 'foo=1': unknown key 'foo'".
Status ApplyOverrides(Config& cfg, const std::vector<std::string>& kv, const std::string& origin,
                      const std::string& node);

// The whole config as `key = value` lines (for `preflight config show`).
std::string DumpConfig(const Config& cfg);

}  // namespace preflight
