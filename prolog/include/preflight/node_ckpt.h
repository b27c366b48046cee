// The node side of checkpoint persistence (ckpt_dir; issue 30), Slurm-free:
// the prolog makes each job's local checkpoint folder, the epilog finishes
// the job's copy to the shared tier and frees the folder. node_phase.cc
// calls both; the SPANK plugin's task_init points the tasks at the folder
// ($PREFLIGHT_CKPT_LOCAL, ckpt_config.h: CkptJobDir).
//
// PROLOG (root, every node): <ckpt_dir>/<job>, ckpt_dir with %n expanded
// by the config (not for a job that runs as root). The chain up to ckpt_dir is made as stage_dir's is
// (MakePrivateDirs: root-owned, no symlink, nobody else may write; mode
// 0711 so the user can pass through), the job folder in it is made by root
// and handed to the job's user (chown, 0700). A folder of that name left
// by an earlier run of the same job (a requeue: its checkpoints were not
// all durable) and owned by the job's user is kept for the resume; one
// owned by anyone else is renamed aside (`<job>.set-aside.<uid>.<time>`),
// never given to this user. Failure classes (fault.h): a chain others can
// write or that holds a symlink is the site's (kConfig: drained once,
// named); a user's entry in a sticky world-writable folder of the chain
// is set aside, and a user who keeps racing that only loses the folder
// (kUser: logged, the job runs without $PREFLIGHT_CKPT_LOCAL); anything
// else (the disk) is the node's (kNode).
//
// EPILOG (root): when the job folder exists, a child forked by the epilog
// drops fully to the job's user (supplementary groups, setresgid,
// setresuid, no_new_privs, its own process group, killed with its parent)
// and does everything that touches the folder's contents: ReadCkptPlan;
// with a plan, PersistRound with deadline = ckpt_epilog_budget (again
// while this node's part waits for the other nodes' parts to arrive, until
// the budget is spent); then, when nothing complete is left that is not
// durable (or there is no plan: nothing was asked to persist), it removes
// the folder's contents. Its report comes back over a pipe (bounded:
// kCkptChildReportMax). The parent waits at most the budget plus
// kCkptEpilogSlack, then kills the child's process group. Then root
// rmdir()s the job folder only when it is empty (never following a link).
//
// Nothing here drains the node: a plan that does not parse, a tier that
// is full or failing, a child that is killed are the job's outcome,
// logged in the epilog's result and the node's log. KEEPING: a newest
// complete checkpoint that is not durable (budget spent, tier failed), an
// unreadable plan or a killed child leave the folder as it is: the next
// run of the job on this node resumes from it (or persists it); once it
// is older than state_keep and slurmctld says the job ended, the epilog or
// health check of a later job removes it (GcCkptJobs: its contents as
// their owner, then rmdir). Incomplete checkpoints are never copied.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "preflight/ckpt_job.h"
#include "preflight/config.h"
#include "preflight/fault.h"
#include "preflight/job.h"
#include "preflight/job_liveness.h"
#include "preflight/report.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr double kCkptEpilogSlack = 15;          // seconds past the budget before the kill
inline constexpr size_t kCkptChildReportMax = 1 << 20;  // bytes the parent reads from the child
inline constexpr size_t kCkptGcPerRun = 8;               // stale folders removed per epilog or health check
inline constexpr double kCkptGcSeconds = 60;             // each, as its owner, at most

struct CkptDirResult {
  bool made = false;                  // the folder exists for the job's user
  FaultOwner owner = FaultOwner::kNone;  // when !made and something failed
  std::string message;                // the failure, or "" when not asked (no ckpt_dir)
  std::vector<std::string> warnings;  // set-asides
};
// The prolog's part (see above). Run as root it chowns to job.uid/job.gid;
// run as another user (tests) the folder stays the caller's.
CkptDirResult MakeCkptJobDir(const Config& cfg, const JobContext& job);

// What the user child reports back (one JSON object).
struct CkptChildReport {
  bool had_plan = false;
  std::string tier;         // the plan's
  double newest_durable_time = 0;  // epoch seconds of round.newest_durable's .preflight-durable; 0: none
  std::string plan_error;   // the plan was there and unreadable, or the child could not become the user
  std::string round_error;  // PersistRound failed as a whole
  CkptRoundResult round;    // records, newest_durable, bytes_not_durable, notes, timed_out
  bool cleared = false;     // the folder's contents were removed
  std::string clear_error;  // what could not be removed
  std::string kept_reason;  // why the contents were kept, "" when cleared
};
std::string CkptChildReportJson(const CkptChildReport& r);
Expected<CkptChildReport> ParseCkptChildReport(const std::string& json);

// The child's work on `dir` for `node`, in the calling process (already
// the user): the round(s) until `deadline` (MonotonicSeconds) and the
// clearing. Exposed for tests.
CkptChildReport CkptFinishAsUser(const std::string& dir, const std::string& node, double deadline);

struct CkptEpilogResult {
  bool requested = false;     // the job folder was there
  std::string dir;
  CkptChildReport report;
  std::string child_error;    // the child was killed, crashed or said nothing
  bool removed = false;       // the job folder is gone
  std::vector<std::string> lines;  // what happened, for the log and the result ("checkpoint ...")
  CheckResult check;          // "ckpt" for the epilog's result
};
// The epilog's part (see above). `budget_s`: cfg.ckpt.epilog_budget_ms
// unless tests give less. Writes the records to state_dir
// (<node>.ckpt.json) and the metrics to textfile_dir
// (preflight_<node>_ckpt.prom); never fails the epilog.
CkptEpilogResult FinishCkptForJob(const Config& cfg, const JobContext& job);

// The lines naming what became durable and what did not fit.
std::vector<std::string> CkptOutcomeLines(const CkptChildReport& r, const std::string& child_error, double budget_s);
// The Prometheus textfile: preflight_ckpt_newest_durable_timestamp_seconds
// (when the newest checkpoint durable with this node's part became
// durable; 0: none), preflight_ckpt_bytes_not_durable,
// preflight_ckpt_epilog_ok (0: something complete was left not durable),
// preflight_ckpt_epilog_timestamp_seconds, labelled {node}.
std::string CkptPrometheus(const std::string& node, const CkptChildReport& r, const std::string& child_error,
                           double now_epoch);
// The records file: {"job","node","dir","records":[CkptRecordJson...],...}.
std::string CkptStateJson(const std::string& job, const std::string& node, const CkptEpilogResult& r);

// GC of job folders left behind (kept because not durable, or their
// epilog never ran): the jobs of entries of ckpt_dir (a job's folder or
// one set aside for it) whose mtime is older than state_keep, other than
// `running_job`; what the shell asks slurmctld about (AskSlurmJobs).
std::set<std::string> StaleCkptJobs(const Config& cfg, const std::string& running_job, double now_epoch);
// Of those, each that job_liveness.h lets go (MayRemoveRecords: answered,
// ended or unknown) is emptied by a child as the folder's owner (fully
// dropped, kCkptGcSeconds at most) and rmdir()ed by root; at most
// kCkptGcPerRun per run. One line per folder removed, kept or left.
std::vector<std::string> GcCkptJobs(const Config& cfg, const std::string& running_job, double now_epoch,
                                    const SlurmJobs& slurm);

}  // namespace preflight
