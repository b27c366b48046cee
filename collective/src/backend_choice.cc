#include "preflight/collective_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/node_addresses.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"

namespace preflight::collective {

// --- backends ---------------------------------------------------------------------
bool GpusRequested(const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& kv : env) {
    if (kv.first != "CUDA_VISIBLE_DEVICES" && kv.first != "SLURM_STEP_GPUS" && kv.first != "SLURM_JOB_GPUS") continue;
    if (!kv.second.empty() && kv.second != "NoDevFiles") return true;
  }
  return false;
}

const char* BackendKindName(BackendKind k) {
  switch (k) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kNccl: return "nccl";
    case BackendKind::kHost: return "host";
  }
  return "auto";
}

Expected<BackendKind> ParseBackendKind(const std::string& s) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kNccl, BackendKind::kHost})
    if (s == BackendKindName(k)) return k;
  return Status::InvalidArgument("bad value '" + s + "' (expected auto, nccl or host)");
}

const char* ResultBackendName(BackendKind k) { return k == BackendKind::kNccl ? kNcclResultName : kHostResultName; }

BackendKind ResolveBackend(BackendKind choice, bool gpus_requested) {
  if (choice == BackendKind::kAuto) return gpus_requested ? BackendKind::kNccl : BackendKind::kHost;
  return choice;
}

const char* ScopeName(Scope s) {
  switch (s) {
    case Scope::kAllocation: return "allocation";
    case Scope::kIntraNode: return "intra-node";
    case Scope::kPairs: return "pairs";
  }
  return "allocation";
}

Expected<Scope> ParseScope(const std::string& s) {
  for (Scope k : {Scope::kAllocation, Scope::kIntraNode, Scope::kPairs})
    if (s == ScopeName(k)) return k;
  return Status::InvalidArgument("bad value '" + s + "' (expected allocation, intra-node or pairs)");
}

Expected<double> HostRateCap(const Config& cfg) {
  if (cfg.nccl.host_rate_file.empty()) return 0.0;
  auto text = ReadWholeFile(cfg.nccl.host_rate_file);
  if (!text) return text.status().code() == Status::Code::kNotFound ? Expected<double>(0.0) : text.status();
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto r = ParseRate(t);
  if (!r) return r.status().Context(cfg.nccl.host_rate_file);
  return r;
}

Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind backend, Bootstrap& boot, const Config& cfg,
                                               double user_rate_cap, double deadline) {
  if (backend == BackendKind::kHost) {
    HostOptions ho;
    auto addr = NodeAddress(cfg, boot.Node());
    if (!addr) return FailBackendGather(boot, addr.status());
    ho.address = *addr;
    ho.deadline = deadline;
    auto cap = HostRateCap(cfg);
    if (!cap) return FailBackendGather(boot, cap.status());
    ho.send_rate_cap = *cap;
    if (user_rate_cap > 0 && (ho.send_rate_cap == 0 || user_rate_cap < ho.send_rate_cap)) ho.send_rate_cap = user_rate_cap;
    ho.timeout_ms = cfg.nccl.timeout_ms;
    return MakeHostBackend(boot, ho);
  }
  if (backend == BackendKind::kNccl) {
    auto b = MakeNcclBackend(boot, NcclOptionsFor(cfg));
    if (!b) return Status::Failed("GPU check asked for, but the NCCL backend cannot run on " + boot.Node() + ": " +
                                  b.status().message());
    return b;
  }
  return FailBackendGather(boot, Status::InvalidArgument("backend 'auto' is a choice, not a backend (ResolveBackend first)"));
}

}  // namespace preflight::collective
