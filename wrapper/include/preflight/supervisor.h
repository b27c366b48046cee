// Run one command as a child in its own process group and relay signals to
// it, as preflight-run does inside a job. The caller's signal dispositions
// for the relayed signals (and SIGCHLD, SIGPIPE) are replaced while a
// RunSupervised call is active; one call at a time per process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "preflight/stallwatch.h"
#include "preflight/status.h"

namespace preflight {

struct ChildExit {
  int exit_code = 0;    // exit status, or 128+signal when killed by a signal
  int signal = 0;       // the terminating signal, 0 if it exited
  std::vector<int> relayed;  // signals forwarded to the child, in order
};

// Fork/exec argv (PATH searched), forward SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2, SIGCONT and SIGTSTP to the child's process group, wait.
// The child inherits stdout/stderr. Fails only if the child cannot be
// started (exit 127 semantics left to caller).
Expected<ChildExit> RunSupervised(const std::vector<std::string>& argv);

// What the full supervisor does besides relaying (preflight-run).
struct SuperviseOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;           // "K=V" added to / replacing this environment
  // Preemption: the first of these signals starts the checkpoint protocol
  // instead of being relayed: checkpoint_signal (0: none) goes to the
  // child's process group and checkpoint_request_file ("" : none) is
  // created; the child then has grace_s to exit. Later preemption signals
  // are not relayed (the child is already checkpointing). Past the grace
  // the group gets SIGTERM, and SIGKILL kill_wait_s after that.
  std::vector<int> preempt_signals;
  int checkpoint_signal = 0;
  std::string checkpoint_request_file;
  double grace_s = 90;
  double kill_wait_s = 10;
  // Stall watch; heartbeat_file is polled for mtime changes.
  StallOptions stall;
  std::string heartbeat_file;
  GpuUtilSource* gpu = nullptr;           // not owned; null: no GPU samples
  double gpu_sample_s = 5;
  bool kill_on_stall = false;             // any alert (stall or NaN) stops the child
  // With kill_on_stall, a stall alert's stop waits while this returns true
  // (hang attribution asking the job's NCCL, which needs it alive), at most
  // kill_hold_max_s. A NaN alert never waits. Null: no wait.
  std::function<bool()> kill_held;
  double kill_hold_max_s = 120;
  std::function<void(const Alert&)> on_alert;  // called from the loop, may be null
  std::function<void()> on_tick;          // about once a second (checkpoint pruning)
  // The child's stdout and stderr pass through pipes so the watch sees every
  // line; bytes are copied unchanged to these descriptors.
  int out_fd = 1;
  int err_fd = 2;
  size_t tail_lines = 200;                // last lines kept for failure classification
};

struct SuperviseResult {
  ChildExit exit;
  bool preempted = false;
  int preempt_signal = 0;
  bool grace_expired = false;             // preempted and had to be stopped
  std::vector<Alert> alerts;              // in order
  bool killed_for_alert = false;          // kill_on_stall fired
  std::vector<std::string> tail;          // last output lines, stdout and stderr interleaved
  double seconds = 0;
};

Expected<SuperviseResult> RunSupervised(const SuperviseOptions& o);

// "USR2" / "SIGUSR2" / "12" -> 12; "none" / "" -> 0.
Expected<int> ParseSignal(const std::string& s);
// "USR2,TERM" -> {12, 15}.
Expected<std::vector<int>> ParseSignalList(const std::string& s);
std::string SignalName(int sig);  // 12 -> "SIGUSR2"

}  // namespace preflight
