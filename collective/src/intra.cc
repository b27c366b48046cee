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
Status CheckIntraRanks(int ranks, int gpus) {
  if (ranks < 1 || ranks > kMaxIntraRanks)
    return Status::InvalidArgument("--ranks " + std::to_string(ranks) + ": expected 1 to " + std::to_string(kMaxIntraRanks) +
                                   " (the limit of ranks per node)");
  if (gpus > 0 && ranks > gpus)
    return Status::InvalidArgument("--ranks " + std::to_string(ranks) + ": more than this node's " + std::to_string(gpus) +
                                   " GPUs (one rank per GPU)");
  return Status::Ok();
}

CheckRun RunIntraNode(const Config& cfg, const std::string& node, Level level, const std::string& backend, int ranks) {
  CheckRun run;
  auto refuse = [&](const Status& s) {
    run.error = s.message();
    run.judgement.message = run.error;
    run.usage_error = true;
    return run;
  };
  if (ranks != 0) {  // 0: the default below
    Status r = CheckIntraRanks(ranks, 0);
    if (!r.ok()) return refuse(r);
  }
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
    if (ranks > 0) {
      Status r = CheckIntraRanks(ranks, inv.count);
      if (!r.ok()) return refuse(r);
    }
    if (ranks <= 0) ranks = std::min(inv.count, kMaxIntraRanks);
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
  threads.reserve(ranks);
  int not_started = -1;  // the first rank that got no thread: the cause of the others' aborts
  for (int r = 0; r < ranks; ++r) {
    try {
      threads.emplace_back([&, r] {
        try {  // an exception leaving a thread's function is std::terminate
          auto boot = MakeLocalBootstrap(group, r);
          auto b = MakeBackend(backend, *boot, cfg);
          if (!b) { results[r] = b.status(); return; }
          results[r] = RunAllReduceSweep(**b, sweep);
        } catch (const std::exception& e) {
          results[r] = Status::Unavailable("rank " + std::to_string(r) + ": " + e.what());
          AbortLocalGroup(*group, results[r].status().message());
        }
      });
    } catch (const std::exception& e) {
      // No thread for this rank (std::system_error): end the started ones'
      // waits and join them; a joinable std::thread destroyed would call
      // std::terminate.
      AbortLocalGroup(*group, "rank " + std::to_string(r) + " could not be started: " + e.what());
      results[r] = Status::Unavailable("cannot start rank " + std::to_string(r) + " of " + std::to_string(ranks) +
                                       " as a thread: " + e.what());
      for (int k = r + 1; k < ranks; ++k) results[k] = results[r];
      not_started = r;
      break;
    }
  }
  for (auto& t : threads) t.join();
  if (not_started >= 0) {  // the cause first, not a rank's "aborted" echo of it
    run.error = results[not_started].status().message();
    run.judgement.message = run.error;
    return run;
  }
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
  DrainReason d;
  d.check = reason_check::kNcclIntra;
  d.device = node + " (" + r.result.backend + ", " + std::to_string(r.result.nranks) + " ranks)";
  d.finding = r.judgement.message;
  if (r.judgement.threshold > 0 && r.error.empty()) {
    d.figure = RateText(r.judgement.busbw);
    d.threshold = ">= " + RateText(r.judgement.threshold);
  }
  return FormatReason(d);
}

std::string InterDrainReason(const std::string& node) {
  DrainReason d;
  d.check = reason_check::kNcclInter;
  d.device = node;
  d.finding = "both ring pairs below threshold";
  return FormatReason(d);
}

}  // namespace preflight::collective
