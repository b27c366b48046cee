// preflight-run's hang attribution (man preflight-run(1), HANG
// ATTRIBUTION): once a stall alert fired, and only then, ask the job's
// NCCL RAS socket a few times, a few seconds apart (ras_client.h), and
// apply the rule (hang_rule.h). Runs on its own thread so the supervisor
// keeps relaying signals; a stall restart waits for it (bounded by
// polls x (interval + connect + reply) seconds).
//
// Gates, each said in the finding's line: run_ras = no (the kill switch);
// the job's NCCL older than run_ras_min_nccl (polling crashed jobs before
// 2.27.3, NVIDIA/nccl#1669, #1718), known from the libnccl.so.2.X.Y its
// processes mapped or NCCL_VERSION (NGC images); an unknown version is asked.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "preflight/config.h"
#include "preflight/fsroot.h"
#include "preflight/hang_rule.h"
#include "preflight/ras_client.h"

namespace preflight {

struct HangProbeOptions {
  bool enabled = true;
  std::string min_nccl = "2.27.3";
  std::string nccl_version;  // the job's, when known ("" : unknown)
  RasQueryOptions query;
  unsigned polls = 3;        // reports taken (fewer when rule 1 holds at once)
  double interval_s = 5;
  std::function<std::string(const std::string& host)> node_of;
};

class HangProbe {
 public:
  explicit HangProbe(HangProbeOptions o);
  ~HangProbe();
  HangProbe(const HangProbe&) = delete;
  HangProbe& operator=(const HangProbe&) = delete;

  // Starts one attribution unless one is running; false when not started
  // (running, or off: then Take() has the line saying why).
  bool Start();
  bool Running() const { return running_; }
  // The finding of the attribution that ended, once.
  std::optional<HangFinding> Take();
  // The most seconds one attribution can take.
  double Bound() const;

 private:
  void Run();
  HangProbeOptions o_;
  std::thread t_;
  std::atomic<bool> running_{false};
  std::mutex mu_;
  std::optional<HangFinding> done_;
};

// The NCCL version the user's processes mapped (libnccl.so.2.X.Y in
// /proc/PID/maps of processes owned by uid, at most 4096 looked at), else
// "". pip's libnccl.so.2 carries no version: then "".
std::string NcclVersionOfUser(const FsRoot& fs, uid_t uid);

// RAS host (an address) -> node, for the job's nodes: the site's
// node_addresses (fabric addresses), each node's NodeAddr, and the names
// resolved. Unknown addresses are absent.
using HostNodeMap = std::map<std::string, std::string>;
HostNodeMap BuildHostNodeMap(const Config& cfg, const std::vector<std::string>& nodes);

}  // namespace preflight
