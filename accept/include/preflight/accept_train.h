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
// sample, not every line: the first progress line, the first whose loss is
// not finite, then the newest one at most once per RateWindow(bound):
//   #accept-train-node NAME       first: the node ($SLURMD_NODENAME, else the host name)
//   #accept-train T STEP LOSS     LOSS a number, "nan" (not finite) or "-"
//   #accept-train-error T TEXT    the first 20 error lines, each cut at 200 bytes
//   #accept-train-gpu T N UTIL W  once per RateWindow: the node's N GPUs'
//                                 mean utilisation (percent) and total power
//   #accept-train-gpu-off REASON  once, when the GPUs cannot be sampled
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

// One look at the node's GPUs (the shell's: NVML through the dlopen'ed
// library; none on a CPU-only node).
struct GpuLook {
  int gpus = 0;
  double util_mean = 0;  // percent
  double power_w = 0;    // all of them together
};
using GpuProbe = std::function<Expected<GpuLook>()>;

struct TrainTapArgs {
  std::vector<std::string> cmd;  // run as given (argv[0] searched in PATH)
  double seconds = 30;           // the bound
  double grace = 10;             // SIGTERM at the bound, SIGKILL this much later
  GpuProbe gpus;                 // null: no GPU lines
};
// Runs the command with its output on a pipe, prints the tap's lines on
// stdout; returns 0 once it printed #accept-train-end, 2 when the command
// could not be started (said on stdout as the end line "exit 127").
int RunTrainTap(const TrainTapArgs& a);

// One node's tap output, read back.
struct TapRecord {
  std::string node;
  std::vector<std::pair<double, long>> steps;  // (t, step), in order
  bool loss_nonfinite = false;
  double last_loss = 0;
  bool has_loss = false;
  std::vector<std::string> errors;             // "T TEXT"
  std::string end;                             // HOW ("" when the tap never ended: a lost node)
  long lines = 0;                              // the command's output lines
  std::string last;                            // its last non-empty line
  std::vector<GpuLook> gpu;                    // the GPU samples
  std::string gpu_off;                         // why there are none ("" when there are)
};
TapRecord ReadTap(const std::string& text);

// Steps per second between consecutive samples, at the later one's time:
// (t, rate). Empty for fewer than two samples.
std::vector<std::pair<double, double>> StepRate(const std::vector<std::pair<double, long>>& steps);
// How often the tap samples in a run bounded to `seconds`: a twentieth, at least 1 s.
double RateWindow(double seconds);

}  // namespace preflight::accept
