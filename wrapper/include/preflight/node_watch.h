// preflight-run's GPU watch on every node of the job (issue 31, item 2):
// the node agent (run_persist.h: the same per-node step the checkpoint
// persist runs in) samples each of the node's job GPUs through NVML
// (utilisation, power against its enforced limit, memory) and prints one
// line per sample; the batch node's preflight-run reads the lines from the
// step's output and keeps each node's state. At a stall, after NCCL RAS
// (hang_rule.h) named no one, the watch names:
//   - a node whose agent went silent (no line for 3 intervals while others
//     report): lost, or its agent killed;
//   - a node whose GPUs are idle while other nodes' GPUs spin (busy at low
//     power: waiting in a collective the idle node never reached).
// Every node spinning names no one (a collective hang with no node behind
// on its GPUs). The owner of the line format; nothing else reads it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "preflight/hang_rule.h"
#include "preflight/status.h"

namespace preflight {

struct GpuReading {
  unsigned index = 0;      // NVML index
  unsigned util = 0;       // percent
  double power_w = 0;      // draw
  double limit_w = 0;      // enforced limit (0: not known)
  uint64_t mem_used_mib = 0, mem_total_mib = 0;
};

// Samples the GPUs of this node's job; the real one is NVML (dlopen'ed),
// the tests' the fake library behind the same path.
class GpuSampler {
 public:
  virtual ~GpuSampler() = default;
  virtual Expected<std::vector<GpuReading>> Sample() = 0;
};
// The GPUs whose minor numbers are in `minors` (all when empty).
Expected<std::unique_ptr<GpuSampler>> OpenNvmlSampler(const std::string& library, const std::vector<int>& minors);

// "preflight-watch 1 NODE idx:util:power_w:limit_w:mem_used:mem_total ..."
// (a node with no GPU sample: "preflight-watch 1 NODE - REASON").
inline constexpr const char* kWatchLinePrefix = "preflight-watch 1 ";
std::string WatchLine(const std::string& node, const std::vector<GpuReading>& gpus);
std::string WatchLineUnavailable(const std::string& node, const std::string& why);
struct WatchSample {
  std::string node;
  std::vector<GpuReading> gpus;
  std::string unavailable;  // why there are no readings
};
Expected<WatchSample> ParseWatchLine(const std::string& line);

enum class GpuState { kUnknown, kIdle, kSpinning, kBusy, kMixed };
struct WatchThresholds {
  unsigned idle_percent = 5;      // run_gpu_idle_percent
  unsigned busy_percent = 90;
  double spin_power_fraction = 0.35;  // busy below this share of the limit: spinning
};
// One node's sample: every GPU in the same class, else kMixed.
GpuState ClassifyNode(const std::vector<GpuReading>& gpus, const WatchThresholds& t);

// The agent's side: a thread that samples (OpenNvmlSampler over `library`)
// every interval_s and says one WatchLine; when NVML is missing or fails
// on this node, a WatchLineUnavailable line instead (the node is then not
// judged by its GPUs). Stop() ends it within one interval.
class GpuWatchLoop {
 public:
  GpuWatchLoop(const std::string& library, const std::vector<int>& minors, const std::string& node, double interval_s,
               std::function<void(const std::string&)> say);
  ~GpuWatchLoop();
  void Stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread t_;
};

// The batch node's view of every node's lines. Thread-safe (lines arrive
// on the agent's output thread, the finding is asked on the main one).
class NodeWatch {
 public:
  // `start`: when the agents were started (monotonic seconds); a node never
  // heard from counts as silent only 3 intervals after it.
  NodeWatch(std::vector<std::string> nodes, double interval_s, WatchThresholds t, double start);
  // true when the line was a watch line (consumed).
  bool OnLine(const std::string& line, double now);
  // The finding at a stall, `now` monotonic seconds; kNoReport when no
  // line ever arrived.
  HangFinding Attribute(double now) const;
  bool AnyLine() const;

 private:
  struct NodeState {
    double last = -1;          // when its last line arrived
    GpuState state = GpuState::kUnknown, before = GpuState::kUnknown;
    std::string figures;       // "util 100%, 80 W of 700 W" of its first GPU
    std::string unavailable;
  };
  mutable std::mutex mu_;
  std::vector<std::string> nodes_;
  double interval_s_;
  WatchThresholds t_;
  double start_;
  std::map<std::string, NodeState> state_;
};

}  // namespace preflight
