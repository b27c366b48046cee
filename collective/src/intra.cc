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

bool Passed(const CheckRun& r) {
  if (!r.judgement.ok) return false;
  for (const auto& o : r.rest)
    if (!o.judgement.ok) return false;
  return true;
}

OpResult Deciding(const CheckRun& r) {
  if (r.judgement.ok)
    for (const auto& o : r.rest)
      if (!o.judgement.ok) return o;
  return OpResult{r.result, r.judgement};
}

void SetSweeps(CheckRun* run, const std::vector<Op>& ops, const Expected<std::vector<SweepResult>>& res, Op failed,
               double threshold) {
  if (!res || res->empty()) {
    run->error = res ? "no operation asked for" : res.status().message();
    run->judgement.message = run->error;
    run->result.op = res ? (ops.empty() ? Op::kAllReduce : ops[0]) : failed;
    return;
  }
  run->result = (*res)[0];
  run->judgement = Judge(run->result, threshold);
  for (size_t i = 1; i < res->size(); ++i) run->rest.push_back({(*res)[i], Judge((*res)[i], threshold)});
}

CheckRun RunIntraNode(const Config& cfg, const std::string& node, Level level, BackendKind backend, int ranks,
                      const std::vector<Op>& ops) {
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
  run.info.scope = ScopeName(Scope::kIntraNode);
  run.info.level = LevelName(level);
  run.info.nodes = {node};
  run.info.bootstrap = "local";
  run.result.backend = ResultBackendName(backend);
  if (!ops.empty()) run.result.op = ops[0];
  GpuInventory inv;
  if (backend == BackendKind::kNccl) {
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
  std::vector<Expected<std::vector<SweepResult>>> results(ranks, Status::Unavailable("not run"));
  std::vector<Op> failed(ranks, ops.empty() ? Op::kAllReduce : ops[0]);
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
          results[r] = RunSweeps(**b, ops, sweep, &failed[r]);
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
      SetSweeps(&run, ops, results[r], failed[r], threshold);
      return run;
    }
  }
  SetSweeps(&run, ops, results[0], failed[0], threshold);
  return run;
}

std::string IntraDrainReason(const CheckRun& r, const std::string& node) {
  DrainReason d;
  d.check = reason_check::kNcclIntra;
  d.device = node + " (" + r.result.backend + ", " + std::to_string(r.result.nranks) + " ranks)";
  // With several operations, which one failed (an all_reduce-only run reads as before).
  OpResult o = Deciding(r);
  const bool name_op = !r.rest.empty() && r.error.empty();
  d.finding = (name_op ? std::string(OpName(o.result.op)) + ": " : "") + o.judgement.message;
  if (o.judgement.threshold > 0 && r.error.empty()) {
    d.figure = RateText(o.judgement.busbw);
    d.threshold = ">= " + RateText(o.judgement.threshold);
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
