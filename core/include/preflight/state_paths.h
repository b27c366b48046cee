// The one owner of every path under state_dir: the files that pass between
// the plugin, the prolog, the epilog and the tools. Nothing else builds a
// state_dir path by hand.
//
//   <state_dir>/nodes/                  per node, kept across jobs (root 0755)
//     <node>.topo                       topology cache            topo_load -> plugin, tools
//     <node>.rails.json                 rails signature           prolog -> --nccl-check batch step
//     <node>.xid                        kernel-log cursor (Xid)   health checks, per boot
//     <node>.ib                         IB port memory (flaps)    health checks, per boot
//     <node>.ibcounters                 IB error counter baseline health checks, per boot
//     <node>.versions.json              driver/firmware versions  node checks -> healthcheck, --nccl-check, preflight fleet
//     <node>.comment                    the node Comment preflight set healthcheck (clears only its own)
//     <node>.drain-finisher             the newest drain finisher's claim   prolog, epilog -> --finish-drain
//     <node>.<tool>.json                last report of a job-less run (healthcheck)
//   <state_dir>/jobs/<job>/             per job, kept for on-call, pruned (PruneJobState) (root 0755)
//     <node>.gpus                       the job's GPUs on the node  prolog -> plugin (env)
//     <node>.prolog.txt                 prolog summary line        prolog -> plugin (job output)
//     <node>.env.jsonl                  one line per task's env    plugin -> tools
//     <node>.stage.json, .stage-error   staging result             prolog -> plugin, epilog, tools
//                                       (older releases also wrote <node>.stage.kv: no longer read)
//     <node>.ckpt.json                  the epilog's finishing copy   epilog -> on-call, tools
//     <node>.<tool>.json                report of prolog / epilog
// A node name is never empty in a path: "localhost" stands in.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/job_liveness.h"

namespace preflight::state {

std::string NodesDir(const Config& cfg);
std::string JobDir(const Config& cfg, const std::string& job);
// <state_dir>/nodes/<node><suffix>
std::string NodeFile(const Config& cfg, const std::string& node, const std::string& suffix);
// <state_dir>/jobs/<job>/<node><suffix>
std::string JobNodeFile(const Config& cfg, const std::string& job, const std::string& node, const std::string& suffix);

inline constexpr const char* kTopo = ".topo";
inline constexpr const char* kRails = ".rails.json";
inline constexpr const char* kXid = ".xid";
inline constexpr const char* kIb = ".ib";
inline constexpr const char* kIbCounters = ".ibcounters";
inline constexpr const char* kVersions = ".versions.json";
inline constexpr const char* kComment = ".comment";  // the node Comment the health check set
inline constexpr const char* kDrainFinisher = ".drain-finisher";  // drain_finisher.h: the newest claim
inline constexpr const char* kJobGpus = ".gpus";
inline constexpr const char* kPrologText = ".prolog.txt";
inline constexpr const char* kEnvRecord = ".env.jsonl";
inline constexpr const char* kStageError = ".stage-error";
inline constexpr const char* kStageJson = ".stage.json";  // the staging record (stage_job.h: ReadStageRecord)
inline constexpr const char* kCkptJson = ".ckpt.json";    // the epilog's checkpoint records (node_ckpt.h)

// Keeping state_dir in bounds (state_keep, state_keep_size; preflight(8)
// `state gc`). A job's folder is finished once an epilog wrote its result
// there (<node>.epilog.json). Finished folders go when their newest file is
// older than state_keep, then oldest first while all kept folders together
// exceed state_keep_size. A folder no epilog finished (slurmd died, the
// node rebooted) goes only after 4 x state_keep, since a running job's
// later steps still read it. `running_job` is never touched, nor any
// folder job_liveness.h keeps (MayRemoveRecords: slurmctld lists the job as
// not ended, was not asked about it, or could not be asked): age alone
// does not prove a job gone. Never follows a symlink, never removes
// across a mount. A picked folder that cannot be removed (an entry on
// another mount, immutable or append-only, a folder inside it; a failed
// unlink) is tried once per run: what is in the way is checked before
// anything goes, so such a folder keeps its records; it is reported once
// in `left`, kept, and gc goes on with the others (the size rule passes
// over it to the next oldest). Every job name and path in the text below
// is PrintableText (text.h): a folder's name may hold any byte.
struct StateGcResult {
  std::vector<std::string> removed;  // "<job> <bytes> <why>"
  std::vector<std::string> kept_live;  // "<job> <why>, but kept: <reason>": the rules picked it, Slurm kept it
  // "cannot remove PATH: REASON", one per folder picked and left (PATH the
  // folder or the entry in the way).
  std::vector<std::string> left;
  // "cannot read PATH: REASON": state_dir/jobs could not be looked at.
  std::vector<std::string> errors;
  size_t kept = 0;
  uint64_t kept_bytes = 0;
  uint64_t removed_bytes = 0;
};
// The jobs whose folders the age and size rules pick, before asking
// slurmctld (a dry run): what the shell asks AskSlurmJobs (slurmctl.h) about.
std::set<std::string> JobsToPrune(const Config& cfg, const std::string& running_job, double now_epoch);
StateGcResult PruneJobState(const Config& cfg, const std::string& running_job, double now_epoch, const SlurmJobs& slurm,
                            bool dry_run = false);

}  // namespace preflight::state
