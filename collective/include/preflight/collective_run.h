// Running the collective check: backend choice, the intra-node check (all
// of one node's ranks as threads of one process, no launcher), and the
// allocation-level orchestration the SPANK plugin drives from the batch step.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

#include "preflight/collective.h"
#include "preflight/collective_records.h"
#include "preflight/config.h"
#include "preflight/fleet.h"
#include "preflight/rails.h"
#include "preflight/options.h"
#include "preflight/straggler.h"

namespace preflight::collective {

// Whether the job step was given GPUs: CUDA_VISIBLE_DEVICES / SLURM_STEP_GPUS
// / SLURM_JOB_GPUS non-empty (and not Slurm's "NoDevFiles").
bool GpusRequested(const std::vector<std::pair<std::string, std::string>>& env);

// kAuto -> kNccl when GPUs were requested, else kHost; the others as they are.
BackendKind ResolveBackend(BackendKind choice, bool gpus_requested);

// What one preflight-nccl launch measures: the allocation's sweep (and,
// with --pairs, its ring pairs after it), one node's ranks (the label of
// the root-run intra-node check), or ring pairs alone. The one spelling of
// each is ScopeName's, the "kind" of a result record.
enum class Scope { kAllocation, kIntraNode, kPairs };
const char* ScopeName(Scope s);
Expected<Scope> ParseScope(const std::string& s);

// The send-rate cap from cfg.nccl.host_rate_file (0 when unset or absent).
Expected<double> HostRateCap(const Config& cfg);

// Build the backend for one rank (kNccl or kHost). For kNccl an unusable GPU stack is an
// error naming the node and library: the caller reports FAILED, not pass.
// `user_rate_cap` (bytes/s, 0 none) is $PREFLIGHT_NCCL_HOST_RATE of a
// user-run rank: the user's own knob on the user's own processes, as
// NCCL_* variables are for NCCL; root-run checks never read it.
// `deadline` (monotonic seconds, 0: none) bounds the host backend's
// connecting and transfers (HostOptions::deadline); NCCL has no such bound
// here, the step's watchdog (nccl_timeout) is what ends a hung NCCL call.
Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind backend, Bootstrap& boot, const Config& cfg,
                                               double user_rate_cap = 0, double deadline = 0);

// One operation's sweep and its verdict.
struct OpResult {
  SweepResult result;
  Judgement judgement;
};

// One finished check, with its inputs, ready for output.
struct CheckRun {
  // The first operation's (all_reduce unless --ops says otherwise); when
  // `error` is set, `result` has no sizes and names the operation that failed.
  SweepResult result;
  Judgement judgement;
  std::vector<OpResult> rest;  // the other operations', in the order asked (--ops)
  RunInfo info;
  std::string error;  // set when the check could not run (then judgement.ok is false)
  bool usage_error = false;  // `error` is the caller's request (bad --ranks): exit 2, never a drain
};
// Every operation passed.
bool Passed(const CheckRun& r);
// The sweep the run's verdict rests on: the first that failed, else the first.
OpResult Deciding(const CheckRun& r);
// Fills `run` from RunSweeps' answer for `ops`, each judged against
// `threshold`; an error goes to run->error, naming `failed`.
void SetSweeps(CheckRun* run, const std::vector<Op>& ops, const Expected<std::vector<SweepResult>>& res, Op failed,
               double threshold);

// The most ranks --intra-node runs as threads of one process. Above any
// node's GPU count (8 today, 72 GPUs per NVLink domain are 4 per node); a
// thread per rank with its own sockets and buffers, so 100000 would exhaust
// the process, and 5000 ran past a minute.
inline constexpr int kMaxIntraRanks = 64;
// --ranks for --intra-node: 1..kMaxIntraRanks, and no more than the node's
// GPUs where they are known (`gpus` > 0; the nccl backend, one GPU per rank).
Status CheckIntraRanks(int ranks, int gpus);

// All ranks of one node as threads over the local bootstrap: `ranks` ranks
// (0: one per visible GPU for nccl, 2 for host), threshold from
// nccl_min_intra_busbw or the node profile, every operation of `ops` in turn.
CheckRun RunIntraNode(const Config& cfg, const std::string& node, Level level, BackendKind backend, int ranks,
                      const std::vector<Op>& ops = {Op::kAllReduce});

// The drain reason for a failed intra-node check (drain_reason.h:
// "preflight[node] nccl.intra NODE (BACKEND, N ranks): busbw ... [got X, want >= Y]").
std::string IntraDrainReason(const CheckRun& r, const std::string& node);
// The drain reason for a node in two failed ring pairs ("preflight[node] nccl.inter NODE: ...").
std::string InterDrainReason(const std::string& node);

// --- allocation orchestration (batch step, root) ------------------------------
// Inputs the plugin reads from Slurm; plain data so it can be unit-tested.
struct Allocation {
  std::string job_id;
  std::vector<std::string> nodes;   // expanded, in allocation order
  int ranks_per_node = 1;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::vector<std::string> env;     // the job's environment ("K=V"), for user-run steps
  std::string config_path;          // --config for every preflight-nccl started
  std::vector<std::string> sets;    // --set KEY=VALUE for them (plugstack overrides)
  // The nodes the job named (-w/--nodelist; slurmctld's ReqNodeList): a
  // requeue without one of them could never start (FinalAction).
  std::vector<std::string> required_nodes;
};

struct AllocationOutcome {
  bool passed = false;
  std::vector<std::string> drained;  // nodes the root-run checks drained
  std::vector<std::string> suspects; // from user-run pairwise tests (not drained unless configured)
  bool requeue = false;              // the plugin should requeue the job excluding Excluded()
  double busbw = 0;                  // bytes/s, from the allocation step's record (0: none); the user's figure
  double threshold = 0;              // bytes/s, same record (0: none)
  std::string text;                  // for the job's output
  // The straggler rule (straggler.h) over the step's ring pairs, and what
  // check_nccl_straggler made of it ("on", "warn"; "" when not run).
  StragglerVerdict stragglers;
  std::vector<ResultRecord> pairs;   // the ring pairs measured (records of the user's step)
  std::string straggler_mode;
  // Nodes this job's requeue leaves out: drained ones and, with
  // check_nccl_straggler=on, the stragglers (ExcNodeList: this job only;
  // only a drain takes a node from other jobs).
  std::vector<std::string> Excluded() const;
};

// What a failed check does with the job once `excluded` (Excluded()) is
// known: requeue it without them (nccl_on_failure=requeue), or fail it.
// A job that named one of them (`required`, -w) is failed with the reason
// instead of requeued: without that node it could never start, and a
// straggler on a shared node may be another job's traffic, not the node's
// fault. `text` is the job output's closing line.
struct FinalActionResult {
  bool requeue = false;
  std::string text;
};
FinalActionResult FinalAction(const std::vector<std::string>& excluded, const std::vector<std::string>& required,
                              bool on_failure_requeue);

// The outcome as JSON, for <state_dir>/jobs/<job>/nccl.json (the job's
// result record: verdict, figures, pairs, stragglers, drained, requeue).
std::string AllocationOutcomeJson(const AllocationOutcome& o, const std::vector<std::string>& nodes);

// The drain reason for a straggler (nccl_drain_internode=yes and
// check_nccl_straggler=on).
std::string StragglerDrainReason(const Straggler& s);

// Run the allocation-wide check as the job's user (srun --mpi=pmix), and on
// failure localize: the intra-node check on every node in parallel, run as
// root by the plugin in each node's slurmstepd (it drains a failing node
// itself); then, if no node failed alone, ring pairs between nodes as the
// user. See preflight-nccl(1) SECURITY for who decides what.
AllocationOutcome RunAllocationCheck(const Config& cfg, const Allocation& a, Level level);

// The environment of the check's srun steps: the allow-listed part of the
// batch job's (`job_env`), plus the localization marker when `intra`.
std::vector<std::string> LaunchEnv(const std::vector<std::string>& job_env, bool intra);

// The allocation's rail signatures (rails.h), each read on its node by a
// user step, compared: the odd node is named in `text` (job output). Run
// by RunAllocationCheck before the collective on 2+ nodes.
struct RailsOutcome {
  RailsComparison comparison;
  std::string text;
};
RailsOutcome RailsAcross(const Config& cfg, const Allocation& a);

// The same for the nodes' version records (fleet.h: driver, VBIOS, InfoROM, HCA
// firmware, kernel): "preflight: versions: n2: driver ..., the other 3
// nodes have ..." in the job output. Names only (a user step).
struct VersionsOutcome {
  FleetComparison comparison;
  std::string text;
};
VersionsOutcome VersionsAcross(const Config& cfg, const Allocation& a);

// The nodes' gpu.gemm records (gemm_record.h) of job `job`, compared: a GPU
// below 90% of the allocation's median TFLOPS or with another GEMM result
// than the allocation's majority is named ("preflight: gemm: n2 GPU3: ...");
// "" when fewer than two nodes recorded a soak of this job (no full level).
std::string GemmAcrossText(const NodeRecordSet& recs, const std::string& job);

// Ring pairs (i, i+1 mod n) between n nodes, pair i failed or not: the
// nodes in two failed pairs (n >= 3); with two nodes nobody can be singled out.
std::vector<size_t> InterNodeSuspects(size_t n, const std::vector<bool>& pair_failed);

// One line for the job's AdminComment after a failed check, so the job's
// next start can say why it was requeued (Slurm truncates the output file).
std::string RequeueNote(const AllocationOutcome& o, const std::vector<std::string>& nodes, const std::string& restarts);

// Environment variable that marks a localization step; the plugin's
// privileged task hook runs the root intra-node check when it sees it.
inline constexpr const char* kIntraStepEnv = "PREFLIGHT_NCCL_STEP";

// Run argv as uid/gid/groups (setgroups, setregid, setreuid, in that
// order), stdin on /dev/null, stdout+stderr captured (capped at 256 KiB),
// killed with its process group after timeout_ms. `env` is the whole
// environment of the child.
Expected<std::pair<int, std::string>> RunAs(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                            uid_t uid, gid_t gid, const std::vector<gid_t>& groups, unsigned timeout_ms);

}  // namespace preflight::collective
