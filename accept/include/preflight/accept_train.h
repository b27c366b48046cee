// The training stage of preflight accept: a short run of a training command
// on every node of the allocation, watched per node by a tap
// (`preflight accept --train-tap`, one srun task per node) that timestamps
// its progress lines, and the step-rate figures judged from them.
//
// A progress line (preflight-accept(1)): a step number after the word
// `step`, `step:` or `iter` (any case, a word of its own), and optionally a
// number after `loss`, `loss:` or `loss=`; a loss of nan or inf is not
// finite. It matches the lines of torchtitan ("step:  1  loss:  8.1661
// grad_norm: ..."), nanoGPT-style loops ("iter 20: loss 4.2143, time
// 31.1ms", "step 0, loss: 10.89") and preflight's example ("step 7 loss
// 0.1429"). No training log carries a time a tap could rely on, so the time
// is the tap's: seconds since it started the command.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "preflight/status.h"

namespace preflight::accept {

struct ProgressLine {
  long step = 0;
  bool has_loss = false;
  bool loss_finite = true;
  double loss = 0;
};
std::optional<ProgressLine> ParseProgressLine(std::string_view line);
// A line that says a collective or the GPU failed: NCCL's "NCCL WARN" and
// "ncclInternalError"-style codes, "CUDA error", a watchdog's collective
// timeout, a Python traceback.
bool IsTrainErrorLine(std::string_view line);

// What the tap prints (T: seconds since the command started, 3 decimals).
// Its output travels through srun and the run's capped capture, so it is a
// sample, not every line: the first progress line, the first with a loss,
// the first whose loss is not finite, then the newest one at most once per
// RateWindow(bound):
//   #accept-train-node NAME       first: the node ($SLURMD_NODENAME, else the host name)
//   #accept-train T STEP LOSS     LOSS a number, "nan" (not finite) or "-"
//   #accept-train-error T TEXT    the first 20 error lines, each cut at 200 bytes
//   #accept-train-gpu T N UTIL W  once per RateWindow: the node's N GPUs'
//                                 mean utilisation (percent) and total power
//   #accept-train-gpu-off REASON  once, when the GPUs cannot be sampled
//   #accept-train-ckpt saved NAME the newest complete checkpoint after the
//                                 run ("-": none); the round trip only
//   #accept-train-ckpt from NAME  the resume run: the one it resumes from
//                                 (relayed: $PREFLIGHT_RESUME_FROM, whole)
//   #accept-train-ckpt off REASON no round trip on this node (its folder)
//   #accept-train-ckpt made DIR   the folder was made (--train-make)
//   #accept-train-ckpt left DIR REASON  the folder could not be removed
//   #accept-train-end HOW LINES LAST
//                                 HOW: "exit CODE", "signal N" or "bound"
//                                 (still running at the bound: stopped);
//                                 LINES its output lines; LAST its last
//                                 non-empty line, cut at 200 bytes
// Bounds: a line is read up to 4096 bytes (the rest of it is dropped); the
// command gets SIGTERM at the bound and its process group SIGKILL 10 s later
// (TrainTapArgs::grace).
inline constexpr const char* kTapNode = "#accept-train-node ";
inline constexpr const char* kTapStep = "#accept-train ";
inline constexpr const char* kTapError = "#accept-train-error ";
inline constexpr const char* kTapEnd = "#accept-train-end ";
inline constexpr const char* kTapGpu = "#accept-train-gpu ";
inline constexpr const char* kTapGpuOff = "#accept-train-gpu-off ";
inline constexpr const char* kTapCkpt = "#accept-train-ckpt ";

// One look at the node's GPUs (the shell's: NVML through the dlopen'ed
// library; none on a CPU-only node).
struct GpuLook {
  int gpus = 0;
  double util_mean = 0;  // percent
  double power_w = 0;    // all of them together
};
using GpuProbe = std::function<Expected<GpuLook>()>;

// The newest complete checkpoint folder's name in a checkpoint directory
// ("" for none), as preflight-run chooses the one it resumes from (the
// shell's: the wrapper's NewestCompleteCheckpoint with the site's marker).
using NewestCheckpoint = std::function<Expected<std::string>(const std::string& dir)>;

// The checkpoint round trip (preflight-accept(1)): the training run goes
// under preflight-run with a checkpoint directory of its own; at the bound
// preflight-run alone gets SIGTERM, a preemption, and asks the command to
// checkpoint within its grace. A second, short run on the same nodes
// resumes from the newest complete checkpoint; its first progress line
// says where it went on from. Then the directory is removed.
struct TrainRoundTrip {
  std::vector<std::string> runner;  // preflight-run and its options, up to "--checkpoint-dir"
  std::string dir;                  // this node's checkpoint directory (created by the first run)
  NewestCheckpoint newest;
  bool resume = false;              // the second run: stop at its first progress line, then remove dir
  std::string off;                  // why there is no round trip on this node (said; the run goes on)
  bool clean = false;               // no run: only remove dir (the resume run cannot be had)
  bool make = false;                // no run: only make dir (the shared tier's round trip)
                                    // (either with `off`: no run, only the off line)
  // The round trip through a shared tier (one preflight-run around the
  // srun of the taps, on the batch node): the command runs here without a
  // runner, and this signal and SIGTERM, which srun forwards from
  // preflight-run, go on to its process group; a SIGTERM ends it as the
  // bound does. The resume run's checkpoint is $PREFLIGHT_RESUME_FROM, the
  // folder is neither made nor removed here (--train-make, --train-clean).
  int relay_signal = 0;             // 0: not relayed
};

struct TrainTapArgs {
  std::vector<std::string> cmd;  // run as given (argv[0] searched in PATH)
  double seconds = 30;           // the bound
  double grace = 10;             // SIGTERM at the bound, SIGKILL this much later
  GpuProbe gpus;                 // null: no GPU lines
  TrainRoundTrip trip;           // runner empty: the command alone, no round trip
};
// Runs the command with its output on a pipe, prints the tap's lines on
// stdout; returns 0 once it printed #accept-train-end, 2 when the command
// could not be started (said on stdout as the end line "exit 127").
int RunTrainTap(const TrainTapArgs& a);

// The round trip's rules (train_trip.cc).
// The step a checkpoint folder's name carries: its last run of digits
// ("step-60", "iter_0000060", "global_step60": 60); -1 when none.
long CheckpointStep(const std::string& name);
// preflight-run's grace to checkpoint at the bound of a run of `seconds`:
// a tenth of it, 10 to 60 s.
double CheckpointGrace(double seconds);
// The tap's own grace around preflight-run: its grace, its 5 s kill wait
// and 5 s to spare.
double RunnerGrace(double seconds);
// The resume run's bound (it stops at its first progress line): a fifth of
// the training run, 15 to 60 s.
double ResumeSeconds(double seconds);
// The round trip's command line: `cmd` by /bin/sh -c, the shell catching
// the checkpoint signal (`trap : SIG`), so that preflight-run's signal to
// the process group does not kill the shell (dash never execs a -c
// command's last process) while the command checkpoints; a caught signal is
// back to its default in the command, which sets its own handler.
std::vector<std::string> RoundTripShell(const std::string& cmd, const std::string& checkpoint_signal);
// preflight-run's arguments for the round trip, `preflight_run` its path and
// `pass_args` the site config options (--config, --set): no requeue, no
// shared tier, no stall restart, no GPU watch of its own (the tap samples),
// the grace above; ends with "--checkpoint-dir" (TrainRoundTrip::runner).
// `tier`: the shared tier's folder, "none" for none; `local`: the node-local
// checkpoint directory, "" when the caller appends it (the tap does).
std::vector<std::string> RoundTripRunner(const std::string& preflight_run, const std::vector<std::string>& pass_args,
                                         double seconds, const std::string& tier = "none",
                                         const std::string& local = "");
// The round trip through a shared tier: `timeout --foreground` around
// RoundTripRunner, so that at `seconds` preflight-run alone gets SIGTERM
// (a preemption: it asks its srun, and so every node's command, to
// checkpoint) and SIGKILL RunnerGrace later; then "--" and the srun.
// `convention`: preflight-run's --checkpoint-convention ("" its default).
std::vector<std::string> TierRunner(const std::string& preflight_run, const std::vector<std::string>& pass_args,
                                    double seconds, const std::string& tier, const std::string& local,
                                    const std::string& convention = "");
// How long preflight-run takes after its command at most: its agent's last
// round (60 s, preflight-run(1)) and 10 s to spare.
inline constexpr double kTierLastRound = 70;
// The shared tier's folder for the round trip: `tier` and a private name
// (".preflight-accept-TAG-tier") accept makes and removes.
std::string RoundTripTier(const std::string& tier, const std::string& tag);
// RoundTripDir with "%n" for the node, as preflight-run expands it on each node.
std::string RoundTripDirPattern(const std::string& storage_path, const std::string& tag);
// This node's checkpoint directory for the round trip: the storage path
// (%n its node's, as the storage stage reads it) and a private name
// (".preflight-accept-NODE-TAG-train") the run removes at its end.
Expected<std::string> RoundTripDir(const std::string& storage_path, const std::string& node, const std::string& tag);

// One node's tap output, read back.
struct TapRecord {
  std::string node;
  std::vector<std::pair<double, long>> steps;  // (t, step), in order
  long first_loss_step = -1;                   // the first step printed with a loss (-1 none)
  bool loss_nonfinite = false;
  double last_loss = 0;
  bool has_loss = false;
  std::vector<std::string> errors;             // "T TEXT"
  std::string end;                             // HOW ("" when the tap never ended: a lost node)
  long lines = 0;                              // the command's output lines
  std::string last;                            // its last non-empty line
  std::vector<GpuLook> gpu;                    // the GPU samples
  std::string gpu_off;                         // why there are none ("" when there are)
  bool ckpt_tried = false;                     // a round-trip run (a ckpt line came)
  std::string ckpt_saved;                      // "saved": the name, "" none
  std::string ckpt_from;                       // "from": the name (relayed: the path), "" none
  std::string ckpt_off;                        // "off": why
  std::string ckpt_left;                       // "left": DIR REASON
  bool ckpt_made = false;                      // "made": the folder was made
};
TapRecord ReadTap(const std::string& text);

// Steps per second between consecutive samples, at the later one's time:
// (t, rate). Empty for fewer than two samples.
std::vector<std::pair<double, double>> StepRate(const std::vector<std::pair<double, long>>& steps);
// How often the tap samples in a run bounded to `seconds`: a twentieth, at least 1 s.
double RateWindow(double seconds);

}  // namespace preflight::accept
