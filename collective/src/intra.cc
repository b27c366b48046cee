#include "preflight/collective_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"

namespace preflight::collective {

// --- intra-node ---------------------------------------------------------------------
CheckRun RunIntraNode(const Config& cfg, const std::string& node, Level level, const std::string& backend, int ranks) {
  CheckRun run;
  run.info.scope = "intra-node";
  run.info.level = LevelName(level);
  run.info.nodes = {node};
  run.info.bootstrap = "local";
  run.result.backend = backend == "nccl" ? "nccl" : "host-tcp";
  GpuInventory inv;
  if (backend == "nccl") {
    auto p = ProbeGpus(NcclOptionsFor(cfg));
    if (!p) {
      run.error = "GPU check asked for, but the NCCL backend cannot run on " + node + ": " + p.status().message();
      run.judgement.message = run.error;
      return run;
    }
    inv = *p;
    if (ranks <= 0) ranks = inv.count;
    if (ranks <= 0) {
      run.error = "GPU check asked for, but no CUDA device is visible on " + node;
      run.judgement.message = run.error;
      return run;
    }
  } else if (ranks <= 0) {
    ranks = 2;
  }
  const NodeProfile* prof = PickProfile(cfg, backend, inv);
  run.info.profile = prof ? prof->name : "";
  double threshold = Threshold(cfg, prof, true, &run.info.threshold_source);

  auto group = MakeLocalGroup(ranks, node, cfg.nccl.timeout_ms);
  std::vector<Expected<SweepResult>> results(ranks, Status::Unavailable("not run"));
  SweepOptions sweep = SweepForLevel(level, cfg.nccl.max_bytes);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto boot = MakeLocalBootstrap(group, r);
      auto b = MakeBackend(backend, *boot, cfg);
      if (!b) { results[r] = b.status(); return; }
      results[r] = RunAllReduceSweep(**b, sweep);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!results[r]) {
      run.error = results[r].status().message();
      run.judgement.message = run.error;
      return run;
    }
  }
  run.result = *results[0];
  run.judgement = Judge(run.result, threshold);
  return run;
}

std::string IntraDrainReason(const CheckRun& r, const std::string& node) {
  std::string s = std::string(kNcclDrainPrefix) + " intra-node " + node + " (" + r.result.backend + ", " +
                  std::to_string(r.result.nranks) + " ranks): " + r.judgement.message;
  if (s.size() > 200) s.resize(200);
  return s;
}

}  // namespace preflight::collective
