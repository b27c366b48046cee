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

std::string ResolveBackend(const std::string& choice, bool gpus_requested) {
  if (choice == "auto") return gpus_requested ? "nccl" : "host";
  return choice;
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

Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& backend, Bootstrap& boot, const Config& cfg,
                                               double user_rate_cap, double deadline) {
  if (backend == "host") {
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
  if (backend == "nccl") {
    auto b = MakeNcclBackend(boot, NcclOptionsFor(cfg));
    if (!b) return Status::Failed("GPU check asked for, but the NCCL backend cannot run on " + boot.Node() + ": " +
                                  b.status().message());
    return b;
  }
  return FailBackendGather(boot, Status::InvalidArgument("unknown backend '" + backend + "' (expected auto, nccl or host)"));
}

}  // namespace preflight::collective
