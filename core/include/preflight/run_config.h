// The job wrapper's site policy (wrapper/, preflight-run(1); config keys
// run_*): the value type config.cc's key table fills.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace preflight {

// preflight-run (man preflight-run(1)): site policy for the job wrapper
// (config keys run_*). Its command line overrides each of these for one run.
struct RunConfig {
  bool requeue = true;                  // may requeue the job at all
  uint64_t max_requeues = 3;            // preemption requeues per job
  uint64_t max_failure_restarts = 2;    // requeues after a retryable failure
  uint32_t grace_ms = 90000;            // checkpoint-and-exit time after preemption
  uint32_t kill_wait_ms = 10000;        // SIGTERM -> SIGKILL
  std::string preempt_signals = "USR2,TERM";
  std::string checkpoint_signal = "USR2";  // "none": only the request file
  std::string retry_nccl = "NCCL (WARN|error).*([Tt]imeout|timed out|unhandled system error|remote process exited)|Watchdog caught collective operation timeout";
  std::string retry_cuda = "CUDA error|cudaError|an illegal memory access|uncorrectable ECC error|Xid";
  std::string retry_node = "[Nn]ode failure|NODE_FAIL|Bus error|Input/output error|Transport endpoint is not connected";
  std::string nan_pattern = "\\b([Nn]a[Nn]|NAN)\\b";
  uint32_t stall_output_ms = 0;         // 0: off
  uint32_t stall_heartbeat_ms = 0;      // 0: off
  uint32_t stall_gpu_ms = 0;            // 0: off
  uint64_t gpu_idle_percent = 5;
  bool stall_restart = false;           // kill and restart on a stall, else alert only
  std::string alert_hook;               // command run on each alert
  uint64_t keep_checkpoints = 0;        // 0: keep all
  std::string checkpoint_marker = "COMPLETE";
  // Hang attribution through NCCL RAS (wrapper/hang_probe.h).
  bool ras = true;                      // the kill switch
  std::string ras_min_nccl = "2.27.3";  // older releases crashed when asked (NVIDIA/nccl#1669, #1718)
  // The plugin's per-job NCCL_RAS_ADDR port: lo + job id % (hi - lo + 1);
  // {0, 0}: NCCL_RAS_ADDR left alone (every job on a node shares 28028).
  std::pair<uint32_t, uint32_t> ras_ports{28100, 28999};
  // The GPU watch on every node (wrapper/node_watch.h): sample interval
  // while a stall watch is on; 0: off.
  uint32_t watch_gpus_ms = 10000;
};

}  // namespace preflight
