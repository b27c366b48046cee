#include "preflight/config.h"

#include "preflight/hostlist.h"
#include "preflight/check_names.h"
#include "preflight/topo_expect.h"

#include <algorithm>
#include <cerrno>
#include <initializer_list>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace preflight {

namespace {

// Path values need the node name; the table's setters take the raw text and
// LoadConfig/ApplyOverrides expand it first (only for type "path").
#define PF_PATH(field)                                                        \
  [](const Config& c) { return c.field; },                                    \
  [](Config& c, const std::string& v) { c.field = v; return Status::Ok(); }
#define PF_PARSED(field, parser, text)                                        \
  [](const Config& c) { return text(c.field); },                              \
  [](Config& c, const std::string& v) {                                       \
    auto r = parser(v);                                                       \
    if (!r) return r.status();                                                \
    c.field = *r;                                                             \
    return Status::Ok();                                                      \
  }

// A file or folder: absolute (a relative one would resolve against
// whatever directory slurmd, sbatch or the admin happen to run in); `req`:
// never empty.
Status AbsolutePath(const std::string& v, bool req) {
  if (v.empty()) return req ? Status::InvalidArgument("empty path (expected an absolute path)") : Status::Ok();
  if (v[0] != '/') return Status::InvalidArgument("relative path '" + v + "' (expected an absolute path, starting with '/')");
  return Status::Ok();
}
// A program or library: absolute, or a bare name that PATH or the dynamic
// loader resolves ("scontrol", "libnvidia-ml.so.1"); never relative with a '/'.
Status CommandPath(const std::string& v) {
  if (v.empty() || v[0] == '/' || v.find('/') == std::string::npos) return Status::Ok();
  return Status::InvalidArgument("relative path '" + v + "' (expected an absolute path or a bare name found on PATH)");
}
#define PF_CHECKED_PATH(field, check)                                         \
  [](const Config& c) { return c.field; },                                    \
  [](Config& c, const std::string& v) {                                       \
    Status st = check;                                                        \
    if (!st.ok()) return st;                                                  \
    c.field = v;                                                              \
    return Status::Ok();                                                      \
  }
#define PF_ABSPATH(field) PF_CHECKED_PATH(field, AbsolutePath(v, false))
#define PF_ABSPATH_REQ(field) PF_CHECKED_PATH(field, AbsolutePath(v, true))
#define PF_CMDPATH(field) PF_CHECKED_PATH(field, CommandPath(v))

#define PF_STRING(field) PF_PATH(field)

std::string LevelText(Level l) { return LevelName(l); }
std::string StringText(const std::string& s) { return s; }
// Enum-valued keys: their text is their name (each owner's *_config.h).
std::string OnFailureText(NcclOnFailure f) { return NcclOnFailureName(f); }
std::string PersistenceText(GpuPersistence p) { return GpuPersistenceName(p); }
std::string LinkLayerText(LinkLayer l) { return LinkLayerName(l); }
std::string StageVerifyText(StageVerify v) { return StageVerifyName(v); }
std::string CkptIoClassText(CkptIoClass c) { return CkptIoClassName(c); }
Expected<std::string> AnyString(const std::string& s) {
  if (s.empty()) return Status::InvalidArgument("empty value");
  return s;
}
Expected<Level> ParseLevelKey(const std::string& s) {
  if (s.empty()) return Status::InvalidArgument("empty level (expected quick, full or off)");
  return ParseLevel(s.c_str());
}

std::string Same(const std::string& s) { return s; }
// topo_rails: NIC names, none twice (topo/ checks them against the node's NICs).
Expected<std::vector<std::string>> ParseRailList(const std::string& s) {
  auto l = ParseList(s);
  if (!l) return l;
  for (size_t i = 0; i < l->size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if ((*l)[i] == (*l)[j]) return Status::InvalidArgument("NIC '" + (*l)[i] + "' named twice");
  return l;
}

Expected<std::string> ParsePairingKey(const std::string& s) {
  auto p = ParseExpectedPairing(s);
  if (!p) return p.status();
  return s;
}

// check_<name> = on|warn|off, one key per switchable check (check_names.h).
// The table holds plain function pointers, so each key gets its own
// instantiation, indexed into SwitchableChecks().
// gemm_profile: auto or a GPU gpu.gemm has a TFLOPS profile for (gemm.cc's
// GemmProfiles; checks/test/gemm_test.cc holds the two lists equal).
Expected<std::string> ParseGemmProfile(const std::string& s) {
  return OneOf(s, {"auto", "H100", "H100-PCIe", "H200", "B200", "A100", "L40S"});
}

Expected<CheckMode> ParseCheckMode(const std::string& s) {
  if (s == "on") return CheckMode::kOn;
  if (s == "warn") return CheckMode::kWarn;
  if (s == "off") return CheckMode::kOff;
  return Status::InvalidArgument("bad value '" + s + "' (expected on, warn or off)");
}
template <size_t I>
std::string GetCheckMode(const Config& c) {
  auto it = c.check_modes.find(SwitchableChecks()[I]);
  return CheckModeName(it == c.check_modes.end() ? CheckMode::kOn : it->second);
}
template <size_t I>
Status SetCheckMode(Config& c, const std::string& v) {
  auto m = ParseCheckMode(v);
  if (!m) return m.status();
  c.check_modes[SwitchableChecks()[I]] = *m;
  return Status::Ok();
}
constexpr size_t kMaxSwitches = 64;
template <size_t... I>
void AddCheckModeKeys(std::vector<ConfigKey>& keys, std::index_sequence<I...>) {
  static std::vector<std::string> names;  // the keys' name storage
  const auto& checks = SwitchableChecks();
  names.reserve(kMaxSwitches);
  const ConfigKey all[] = {ConfigKey{nullptr, "mode", nullptr, &GetCheckMode<I>, &SetCheckMode<I>}...};
  for (size_t i = 0; i < checks.size() && i < kMaxSwitches; ++i) {
    names.push_back(CheckKeyName(checks[i]));
    ConfigKey k = all[i];
    k.name = names.back().c_str();
    k.help = "Switch for this check: on (its fails drain), warn (its fails only warn), off (not run)";
    keys.push_back(k);
  }
}

}  // namespace

// Long on purpose (over 200 lines): it is the one key table, a row per key
// of the site config, in the order preflight.conf(5) documents them; a
// function per subsystem would scatter one vocabulary over several places.
const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey> kKeys = [] {
    std::vector<ConfigKey> keys = {
      {"state_dir", "path", "Directory for per-job result files and node state (root-owned)",
       PF_ABSPATH_REQ(state_dir)},
      {"state_keep", "duration", "How long finished jobs' records stay in state_dir/jobs (pruned by the epilog and `preflight state gc`); 0: no age bound",
       PF_PARSED(state_keep_ms, ParseDurationMs, DurationText)},
      {"state_keep_size", "size", "Most bytes finished jobs' records may take in state_dir/jobs, oldest pruned first; 0: no size bound",
       PF_PARSED(state_keep_bytes, ParseSize, SizeText)},
      {"textfile_dir", "path", "node_exporter textfile collector directory; empty disables metrics",
       PF_ABSPATH(textfile_dir)},
      {"dcgm_job_map_dir", "path", "Folder of dcgm-exporter's HPC job mapping (its --hpc-job-mapping-dir): the prolog lists the job in each of its GPUs' files, the epilog removes it; empty: off",
       PF_ABSPATH(dcgm_job_map_dir)},
      {"default_level", "level", "Check level for jobs that did not pass --nccl-check (off, quick, full)",
       PF_PARSED(default_level, ParseLevelKey, LevelText)},
      {"fsroot", "path", "Root under which /sys, /proc and /dev are read (fixture trees in tests)",
       PF_ABSPATH_REQ(fsroot)},
      {"topology_xml", "path", "hwloc XML file to load instead of probing this machine",
       PF_ABSPATH(topology_xml)},
      {"topo_env", "bool", "Set the topology-aware NCCL/RDMA environment in each task (jobs opt out with --preflight-env=off)",
       PF_PARSED(topo_env, ParseBool, BoolText)},
      {"nccl_gid_index", "bool", "Export NCCL_IB_GID_INDEX when all paired ports are RoCE with a validated RoCE v2 GID",
       PF_PARSED(nccl_gid_index, ParseBool, BoolText)},
      {"nccl_topo_file", "path", "NCCL_TOPO_FILE given to tasks (only for VMs with a virtual PCI tree); empty never sets it",
       PF_ABSPATH(nccl_topo_file)},
      {"topo_rails", "list", "Compute-rail NICs for NCCL_IB_HCA (e.g. mlx5_0,mlx5_1), where the PCIe tree does not tell; empty: rails are the NICs PIX/PXB/PHB to some GPU",
       PF_PARSED(topo_rails, ParseRailList, ListText)},
      {"topo_expect", "string", "Pinned GPU-NIC placement checked by the prolog, e.g. 0:mlx5_0,1:mlx5_1 (preflight topo prints it)",
       PF_PARSED(topo_expect, ParsePairingKey, std::string)},
      {"scratch_dir", "path", "Node-local scratch (NVMe) directory to check; empty skips the check",
       PF_ABSPATH(scratch_dir)},
      {"scratch_min_free", "size", "Minimum free space in scratch_dir",
       PF_PARSED(scratch_min_free_bytes, ParseSize, SizeText)},
      {"scratch_min_free_inodes", "count", "Minimum free inodes in scratch_dir",
       PF_PARSED(scratch_min_free_inodes, ParseCount, CountText)},
      {"set_drain_reason", "bool", "After a failed prolog check, set the node's drain reason to name it",
       PF_PARSED(set_drain_reason, ParseBool, BoolText)},
      {"scontrol", "path", "scontrol binary used for drain reasons and health-check resumes",
       PF_CMDPATH(scontrol)},
      {"slurm_conf", "path", "SLURM_CONF for those scontrol calls (empty: inherit)",
       PF_ABSPATH(slurm_conf)},
      {"slurm_query", "path", "preflight binary whose `slurm` command reads job, step and node records (libslurm, JSON)",
       PF_CMDPATH(slurm_query)},
      {"probe_timeout", "duration", "Upper bound for any single probe (e.g. 10s, 500ms)",
       PF_PARSED(probe_timeout_ms, ParseDurationMs, DurationText)},
      {"nvml_library", "path", "NVML library to dlopen (soname or path); absent: GPU checks are skipped",
       PF_CMDPATH(nvml_library)},
      {"nvml_fault_file", "path", "Test hook: fault file handed to the fake NVML in tests/fakes (PREFLIGHT_FAKE_NVML_FAULTS)",
       PF_ABSPATH(nvml_fault_file)},
      {"gpu_count", "count", "GPUs this node must show (0: as many as /dev/nvidiaN files under fsroot)",
       PF_PARSED(gpu_count, (CountIn<0, 1024>), CountText)},
      {"gpu_max_ecc_uncorrected", "count", "Most uncorrected ECC errors (volatile or aggregate) a GPU may have",
       PF_PARSED(gpu_max_ecc_uncorrected, ParseCount, CountText)},
      {"gpu_max_retired_pages", "count", "Most retired pages a GPU may have (any pending retirement fails)",
       PF_PARSED(gpu_max_retired_pages, ParseCount, CountText)},
      {"gpu_max_temp", "count", "Highest GPU temperature in degrees C",
       PF_PARSED(gpu_max_temp, (CountIn<0, 200>), CountText)},
      {"gpu_throttle_fail", "list", "Clock throttle reasons that fail a GPU (e.g. hw_slowdown,hw_thermal)",
       PF_PARSED(gpu_throttle_fail, ParseThrottleList, ListText)},
      {"gpu_pcie_gen", "count", "Lowest PCIe generation a GPU's link may be capable of (0: not checked)",
       PF_PARSED(gpu_pcie_gen, (CountIn<0, 16>), CountText)},
      {"gpu_pcie_width", "count", "Lowest PCIe link width of a GPU (0: the device's own maximum)",
       PF_PARSED(gpu_pcie_width, (CountIn<0, 64>), CountText)},
      {"gpu_nvlinks", "count", "NVLinks that must be up per GPU (0: every link NVML reports)",
       PF_PARSED(gpu_nvlinks, (CountIn<0, 64>), CountText)},
      {"gpu_persistence", "string", "Persistence mode the site expects: any, on, off",
       PF_PARSED(gpu_persistence, ParsePersistence, PersistenceText)},
      {"gpu_compute_mode", "string", "Compute mode the site expects: any, default, exclusive_process, prohibited",
       PF_PARSED(gpu_compute_mode, ParseComputeMode, Same)},
      {"xid_ignore", "list", "Xid codes never recorded (same as XID:ignore in xid_actions)",
       PF_PARSED(xid_ignore, ParseXidList, ListText)},
      {"xid_actions", "list", "Per-Xid action overriding NVIDIA's catalogue: XID:ACTION, ACTION drain_reset, drain, warn, user or ignore",
       PF_PARSED(xid_actions, ParseXidActions, XidActionsText)},
      {"xid_window", "duration", "How long a drain, warn or user Xid finding stays open after the event (0: until reboot)",
       PF_PARSED(xid_window_ms, ParseDurationMs, DurationText)},
      {"ib_hcas", "list", "HCAs that must be present and up (e.g. mlx5_0,mlx5_1; empty: every HCA found)",
       PF_PARSED(ib_hcas, ParseList, ListText)},
      {"ib_rate", "count", "Lowest port rate in Gb/s (0: not checked)",
       PF_PARSED(ib_rate, (CountIn<0, 100000>), CountText)},
      {"ib_link_layer", "string", "Link layer every port must have: any, InfiniBand, Ethernet",
       PF_PARSED(ib_link_layer, ParseLinkLayer, LinkLayerText)},
      {"ib_counter_warn", "list", "Port error counters (NAME:MAX) whose rise within ib_counter_window above MAX warns (ib.counters)",
       PF_PARSED(ib_counter_warn, ParseCounterLimits, CounterLimitsText)},
      {"ib_counter_fail", "list", "Port error counters (NAME:MAX) whose rise within ib_counter_window above MAX fails the node (ib.counters)",
       PF_PARSED(ib_counter_fail, ParseCounterLimits, CounterLimitsText)},
      {"fleet_fail_fields", "list", "Version fields (driver, vbios, inforom, hca_fw, kernel) whose difference from the majority of the node's hardware fails it; others warn (fleet.versions)",
       PF_PARSED(fleet_fail_fields, ParseFleetFields, ListText)},
      {"fleet_max_age", "duration", "Other nodes' version records older than this are not compared (0: any age)",
       PF_PARSED(fleet_max_age_ms, ParseDurationMs, DurationText)},
      {"cuda_runtime", "path", "CUDA runtime the bandwidth tier and the NCCL backend dlopen (default: CUDA 13's, else 12's, else 11's; a value set is the only one tried; absent: gpu.bandwidth is skipped, saying so)",
       PF_CMDPATH(cuda_runtime)},
      {"bw_profile", "string", "Bandwidth profile for gpu.bandwidth: auto (from the GPU name), H100, H200, B200, A100, L40S",
       PF_PARSED(bw_profile, ParseBwProfile, Same)},
      {"bw_min_fraction", "fraction", "Fraction of the profile's per-direction peak each H2D, D2H and P2P copy must reach",
       PF_PARSED(bw_min_fraction, ParseFraction, FractionText)},
      {"bw_bytes", "size", "Bytes per copy in gpu.bandwidth",
       PF_PARSED(bw_bytes, ParseSize, SizeText)},
      {"cublas_library", "path", "cuBLAS gpu.gemm dlopens (default: CUDA 13's libcublas.so.13, else 12's; absent: gpu.gemm is skipped, saying so)",
       PF_CMDPATH(cublas_library)},
      {"gemm_profile", "string", "TFLOPS profile for gpu.gemm: auto (from the GPU name), H100, H100-PCIe, H200, B200, A100, L40S",
       PF_PARSED(gemm_profile, ParseGemmProfile, Same)},
      {"gemm_min_fraction", "fraction", "Fraction of the profile's dense FP16 tensor TFLOPS each GPU's GEMM soak must reach (gpu.gemm)",
       PF_PARSED(gemm_min_fraction, ParseFraction, FractionText)},
      {"gemm_soak_seconds", "count", "Seconds every GPU runs the GEMM loop in gpu.gemm (1 to 3600)",
       PF_PARSED(gemm_soak_seconds, (CountIn<1, 3600>), CountText)},
      {"gemm_size", "count", "Side N of the N x N FP16 matrices gpu.gemm multiplies (256 to 16384)",
       PF_PARSED(gemm_size, (CountIn<256, 16384>), CountText)},
      {"dcgmi", "path", "DCGM's dcgmi, run by gpu.dcgm where installed (absent: the check is skipped, saying so)",
       PF_CMDPATH(dcgmi)},
      {"dcgm_level", "count", "dcgmi diag -r level at the full check level (1 quick .. 4 long; 0: never)",
       PF_PARSED(dcgm_level, ParseDcgmLevel, CountText)},
      {"dcgm_health_level", "count", "dcgmi diag -r level in the health check's idle sweep (0: not run there)",
       PF_PARSED(dcgm_health_level, ParseDcgmLevel, CountText)},
      {"dcgm_timeout", "duration", "Upper bound for one dcgmi diag run (no answer: the check fails)",
       PF_PARSED(dcgm_timeout_ms, ParseDurationMs, DurationText)},
      {"ib_counter_window", "duration", "Window over which ib.counters counts a counter's rise (0: since the previous check)",
       PF_PARSED(ib_counter_window_ms, ParseDurationMs, DurationText)},
      // preflight-run keys (man preflight-run(1)); patterns are POSIX EREs (glibc: \b works).
      {"run_requeue", "bool", "preflight-run may requeue the job (preemption, retryable failures)",
       PF_PARSED(run.requeue, ParseBool, BoolText)},
      {"run_max_requeues", "count", "preflight-run: most requeues after preemption per job",
       PF_PARSED(run.max_requeues, ParseCount, CountText)},
      {"run_max_failure_restarts", "count", "preflight-run: most requeues after a retryable failure per job",
       PF_PARSED(run.max_failure_restarts, ParseCount, CountText)},
      {"run_grace", "duration", "preflight-run: time the command gets to checkpoint and exit after preemption",
       PF_PARSED(run.grace_ms, ParseDurationMs, DurationText)},
      {"run_kill_wait", "duration", "preflight-run: SIGTERM to SIGKILL wait when stopping the command",
       PF_PARSED(run.kill_wait_ms, ParseDurationMs, DurationText)},
      {"run_preempt_signals", "string", "preflight-run: signals that mean preemption (e.g. USR2,TERM)",
       PF_STRING(run.preempt_signals)},
      {"run_checkpoint_signal", "string", "preflight-run: signal sent to ask for a checkpoint (none: file only)",
       PF_STRING(run.checkpoint_signal)},
      {"run_retry_nccl", "string", "preflight-run: output regex of retryable NCCL failures (empty: off)",
       PF_STRING(run.retry_nccl)},
      {"run_retry_cuda", "string", "preflight-run: output regex of retryable CUDA failures (empty: off)",
       PF_STRING(run.retry_cuda)},
      {"run_retry_node", "string", "preflight-run: output regex of retryable node failures (empty: off)",
       PF_STRING(run.retry_node)},
      {"run_nan_pattern", "string", "preflight-run: output regex that means the loss went NaN (empty: off)",
       PF_STRING(run.nan_pattern)},
      {"run_stall_output", "duration", "preflight-run: alert after this long without an output line (0: off)",
       PF_PARSED(run.stall_output_ms, ParseDurationMs, DurationText)},
      {"run_stall_heartbeat", "duration", "preflight-run: alert after this long without a heartbeat file update (0: off)",
       PF_PARSED(run.stall_heartbeat_ms, ParseDurationMs, DurationText)},
      {"run_stall_gpu", "duration", "preflight-run: alert after this long with every GPU idle (0: off)",
       PF_PARSED(run.stall_gpu_ms, ParseDurationMs, DurationText)},
      {"run_gpu_idle_percent", "count", "preflight-run: GPU utilisation at or below this is idle",
       PF_PARSED(run.gpu_idle_percent, (CountIn<0, 100>), CountText)},
      {"run_stall_restart", "bool", "preflight-run: kill and requeue on a stall or NaN, else alert only",
       PF_PARSED(run.stall_restart, ParseBool, BoolText)},
      {"run_alert_hook", "path", "preflight-run: command run on each alert (PREFLIGHT_ALERT_* in its env)",
       PF_PATH(run.alert_hook)},
      {"run_keep_checkpoints", "count", "preflight-run: newest complete checkpoints to keep (0: all)",
       PF_PARSED(run.keep_checkpoints, ParseCount, CountText)},
      {"run_checkpoint_marker", "string", "preflight-run: file whose presence marks a checkpoint complete",
       PF_STRING(run.checkpoint_marker)},
      {"run_ras", "bool", "preflight-run: on a stall, ask the job's NCCL RAS which node is behind (no: never ask)",
       PF_PARSED(run.ras, ParseBool, BoolText)},
      {"run_ras_min_nccl", "string", "preflight-run: oldest NCCL whose RAS is asked (older ones crashed when asked)",
       PF_PARSED(run.ras_min_nccl, ParseVersion, StringText)},
      {"run_ras_ports", "string", "Per-job NCCL_RAS_ADDR port range the plugin picks from (none: NCCL's 28028)",
       PF_PARSED(run.ras_ports, ParsePortRange, PortRangeText)},
      {"run_watch_gpus", "duration", "preflight-run: with a stall watch, sample every node's job GPUs this often (0: off)",
       PF_PARSED(run.watch_gpus_ms, ParseDurationMs, DurationText)},
      {"nccl_backend", "string", "Collective check backend: auto (NCCL when the job has GPUs, else host), nccl, host",
       PF_PARSED(nccl.backend, ParseNcclBackend, StringText)},
      {"nccl_profile", "string", "Node profile for collective thresholds (see preflight-nccl(1)), or auto",
       PF_PARSED(nccl.profile, AnyString, StringText)},
      {"nccl_min_busbw", "rate", "Minimum all-reduce bus bandwidth across the allocation (e.g. 40G), or auto",
       PF_PARSED(nccl.min_busbw, ParseRate, RateKeyText)},
      {"nccl_min_intra_busbw", "rate", "Minimum all-reduce bus bandwidth within one node, or auto",
       PF_PARSED(nccl.min_intra_busbw, ParseRate, RateKeyText)},
      {"nccl_max_bytes", "size", "Cap on the collective check's message size (0: none)",
       PF_PARSED(nccl.max_bytes, ParseSize, SizeText)},
      {"nccl_binary", "path", "preflight-nccl binary run by the plugin (root-run intra-node checks)",
       PF_CMDPATH(nccl.binary)},
      {"nccl_srun", "path", "srun used to launch the collective check steps",
       PF_CMDPATH(nccl.srun)},
      {"nccl_timeout", "duration", "Upper bound for each collective check step",
       PF_PARSED(nccl.timeout_ms, ParseDurationMs, DurationText)},
      {"nccl_on_failure", "string", "After a node is drained by the collective check: requeue the job without it, or fail it",
       PF_PARSED(nccl.on_failure, ParseNcclOnFailure, OnFailureText)},
      {"nccl_drain_internode", "bool", "Drain a node found only by user-run pairwise tests (trusts user processes)",
       PF_PARSED(nccl.drain_internode, ParseBool, BoolText)},
      {"nccl_straggler_fraction", "fraction", "Straggler rule: a node below this fraction of the allocation's median (its better ring pair, or its intra-node figure) is named; 0 < f < 1",
       PF_PARSED(nccl.straggler_fraction, ParseOpenFraction, FractionText)},
      {"node_addresses", "path", "hosts(5)-style file, ADDRESS NODE... per line: each node's address for preflight's traffic between nodes (host backend, stage fan-out); empty: the node name",
       PF_ABSPATH(node_addresses)},
      {"nccl_host_rate_file", "path", "Test seam: file with a send-rate cap for host-backend ranks on this node",
       PF_ABSPATH(nccl.host_rate_file)},
      {"nccl_library", "path", "NCCL the nccl backend dlopens (soname or path, e.g. a wheel's libnccl.so.2)",
       PF_CMDPATH(nccl.library)},
      {"stage_dir", "path", "Node-local folder for --stage job views and the dataset cache; empty disables --stage",
       PF_ABSPATH(stage.dir)},
      {"stage_cache_quota", "size", "Dataset cache size kept after each job (LRU, in-use never evicted); 0: no limit",
       PF_PARSED(stage.cache_quota, ParseSize, SizeText)},
      {"stage_workers", "count", "Copy threads per staged dataset on a local source; 0: one per CPU (2 to 64)",
       PF_PARSED(stage.workers, (CountIn<0, 1024>), CountText)},
      {"stage_remote_workers", "count",
       "Operations in flight per staged dataset on a network or FUSE source (nfs, lustre, gpfs, fuse, ...): "
       "walk, copy and warm check",
       PF_PARSED(stage.remote_workers, (CountIn<1, 256>), CountText)},
      {"stage_max_entries", "count", "Files, folders and symlinks one staged dataset may have (the copy's memory: about 400 B each)",
       PF_PARSED(stage.max_entries, (CountIn<1, 1000000000>), CountText)},
      {"stage_timeout", "duration", "Upper bound for staging all of a job's datasets on a node",
       PF_PARSED(stage.timeout_ms, ParseDurationMs, DurationText)},
      {"stage_verify", "string", "Cache reuse check: files (every entry's type, mode, size, inode, mtime, ctime and the user's read access) or dirs (directories only)",
       PF_PARSED(stage.verify, ParseStageVerify, StageVerifyText)},
      {"stage_peers", "bool", "A multi-node job's prologs share one read of each source (peer fan-out, munge-authenticated)",
       PF_PARSED(stage.peers, ParseBool, BoolText)},
      {"stage_peer_port", "count", "Peer fan-out: node i of the job's node list serves on this privileged TCP port + i (wrapped below 1024)",
       PF_PARSED(stage.peer_port, ParseStagePeerPort, CountText)},
      {"stage_peer_host", "string", "Peer fan-out: a job node's address; %n stands for its node name",
       PF_STRING(stage.peer_host)},
      {"stage_munge_socket", "path", "Peer fan-out: munged's socket; empty: libmunge's default",
       PF_ABSPATH(stage.munge_socket)},
      {"ckpt_dir", "path", "Node-local folder for each job's checkpoint folder <dir>/<job> ($PREFLIGHT_CKPT_LOCAL), persisted and freed by the epilog; %n is the node's name; empty: none",
       PF_ABSPATH(ckpt.dir)},
      {"ckpt_persist_to", "path", "Shared tier preflight-run persists checkpoints to when --persist-to is not given; %u is the job user's name; empty: none",
       PF_ABSPATH(ckpt.persist_to)},
      {"ckpt_epilog_budget", "duration", "Time the epilog may spend persisting a job's newest checkpoint; keep it well under EpilogTimeout",
       PF_PARSED(ckpt.epilog_budget_ms, ParseDurationMs, DurationText)},
      {"ckpt_interval", "duration", "How often preflight-run's agent on each node looks for a newly complete checkpoint",
       PF_PARSED(ckpt.interval_ms, ParseDurationMs, DurationText)},
      {"ckpt_io_class", "string", "I/O and CPU priority of a persist: idle (idle class, nice 19), low (best-effort 7, nice 10) or normal",
       PF_PARSED(ckpt.io_class, ParseCkptIoClass, CkptIoClassText)},
      {"ckpt_rate_cap", "size", "Bytes per second one node's persist may write; 0: no cap",
       PF_PARSED(ckpt.rate_cap, ParseSize, SizeText)},
      {"ckpt_keep_local", "count", "Durable checkpoints kept on local disk for a fast resume on the same node",
       PF_PARSED(ckpt.keep_local, (CountIn<0, 1000>), CountText)},
    };
    AddCheckModeKeys(keys, std::make_index_sequence<kMaxSwitches>());
    return keys;
  }();
  return kKeys;
}

#undef PF_PATH
#undef PF_CHECKED_PATH
#undef PF_ABSPATH
#undef PF_ABSPATH_REQ
#undef PF_CMDPATH
#undef PF_PARSED
#undef PF_STRING

namespace {

const ConfigKey* FindKey(const std::string& name) {
  for (const auto& k : ConfigKeys())
    if (name == k.name) return &k;
  return nullptr;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Status SetKey(Config& cfg, const std::string& key, const std::string& raw, const std::string& node) {
  const ConfigKey* k = FindKey(key);
  if (k == nullptr) {
    std::string shown;  // an invisible byte in the key is shown, not hidden
    for (unsigned char c : key) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      shown += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : std::string(b);
    }
    return Status::InvalidArgument("unknown key '" + shown + "'");
  }
  if (std::string(k->type) == "path" && !node.empty() && raw.find("%n") != std::string::npos) {
    Status v = ValidNodeName(node);  // %n makes the node name a path component
    if (!v.ok()) return v.Context("key '" + key + "'");
  }
  std::string value = std::string(k->type) == "path" ? ExpandNode(raw, node) : raw;
  Status s = k->set(cfg, value);
  if (!s.ok()) return s.Context("key '" + key + "'");
  return s;
}

}  // namespace

namespace {
// `lenient`: bad lines are skipped instead of ending the load.
Expected<Config> LoadConfigImpl(const std::string& path, const std::string& node, bool required, bool lenient) {
  Config cfg;
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (!required && err == ENOENT) return cfg;
    return Status::FromErrno(err, "cannot read config " + path);
  }
  cfg.source = path;
  std::set<std::string> seen;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    // A UTF-8 byte-order mark (editors on Windows write one) is not part of
    // the first key.
    if (lineno == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    line = Trim(line);
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(lineno);
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      if (lenient) continue;
      return Status::InvalidArgument(where + ": expected 'key = value', got '" + line + "'");
    }
    std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (!seen.insert(key).second) {
      if (lenient) continue;
      return Status::InvalidArgument(where + ": key '" + key + "' given twice");
    }
    Status s = SetKey(cfg, key, value, node);
    if (!s.ok() && !lenient) return Status::InvalidArgument(where + ": " + s.message());
  }
  if (in.bad()) return Status::FromErrno(errno, "reading config " + path);
  return cfg;
}
}  // namespace

Expected<Config> LoadConfig(const std::string& path, const std::string& node, bool required) {
  return LoadConfigImpl(path, node, required, false);
}

Config LoadConfigLenient(const std::string& path, const std::string& node) {
  auto c = LoadConfigImpl(path, node, false, true);
  return c ? *c : Config();
}

Status ApplyOverrides(Config& cfg, const std::vector<std::string>& kv, const std::string& origin,
                      const std::string& node) {
  for (const auto& item : kv) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument(origin + " '" + item + "': expected key=value");
    Status s = SetKey(cfg, item.substr(0, eq), item.substr(eq + 1), node);
    if (!s.ok()) return Status::InvalidArgument(origin + " '" + item + "': " + s.message());
  }
  return Status::Ok();
}

std::string DumpConfig(const Config& cfg) {
  std::ostringstream out;
  for (const auto& k : ConfigKeys()) out << k.name << " = " << k.get(cfg) << "\n";
  return out.str();
}

}  // namespace preflight
