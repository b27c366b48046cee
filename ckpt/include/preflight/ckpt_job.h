// A job's persist plan and the one persist round that both shells run:
// preflight-run's per-node agent during the job (every few seconds) and
// the epilog's finishing copy after it (once, within its budget). Both run
// it as the job's user.
//
// THE PLAN. preflight-run writes it on each node of the job, into the
// node's local checkpoint dir, as `.preflight-persist.json` (atomically,
// the user's file): the shared tier, the run id, the nodes whose parts make
// a checkpoint, the convention, retention and verification. The epilog's
// child reads it back as the user, so nothing root does depends on it. It
// is bounded (kCkptPlanMaxBytes, kCkptMaxNodes) and every field is checked
// as the library checks its own arguments.
//
// THE ROUND (PersistRound). The local checkpoints complete on this node,
// newest first, newer than the newest one already durable on the tier for
// this node's part: each is persisted (PersistCkpt) until one is durable.
// One that waits for other nodes' parts (kWaiting) does not stop the
// round: the next older complete one is persisted too, because a node that
// died while writing the newest one never sends its part, and the newest
// checkpoint complete on every node must still reach the tier. At most
// `max_attempts` checkpoints are tried per round. Then local retention
// (CkptLocalGc: only what is durable) and tier retention (CkptTierGc: the
// newest `keep_shared` durable ones; partial folders of runs other than
// this one are left for gc) run when asked. The newest durable one is
// remembered (kCkptDurableWatermark), so that a round after local
// retention removed it does not take an older one for the newest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/ckpt_config.h"
#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_persist.h"
#include "preflight/ckpt_record.h"
#include "preflight/ckpt_verify.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr char kCkptPlanFile[] = ".preflight-persist.json";
inline constexpr size_t kCkptPlanMaxBytes = 1 << 20;
// In the local dir: "NAME TIME", the newest checkpoint a round found durable
// with this node's part; complete checkpoints older than it are never
// persisted again, even once local retention removed NAME.
inline constexpr char kCkptDurableWatermark[] = ".preflight-durable-newest";

struct CkptPlan {
  std::string tier;                // the shared tier, an absolute path
  std::string run;                 // ValidCkptRun: "<job>.<restart>"
  std::vector<std::string> nodes;  // the nodes whose parts make a checkpoint, the first the coordinator
  CkptConvention convention = CkptConvention::kMarker;
  std::string marker = "COMPLETE";  // kMarker
  uint64_t keep_shared = 0;         // durable checkpoints kept on the tier; 0: all
  uint64_t keep_local = 1;          // durable checkpoints kept on local disk
  CkptVerify verify = CkptVerify::kSizes;  // the commit's check

  // The convention as seen from `node` (NeMo: the coordinator is the first node).
  CkptConventionSpec ConventionFor(const std::string& node) const;
};

// Checks every field: InvalidArgument naming it.
Status ValidCkptPlan(const CkptPlan& p);
std::string CkptPlanJson(const CkptPlan& p);
Expected<CkptPlan> ParseCkptPlan(const std::string& json);
// <local_dir>/.preflight-persist.json, written atomically (mode 0600) / read
// back (NotFound when there is none; larger than kCkptPlanMaxBytes refused).
Status WriteCkptPlan(const std::string& local_dir, const CkptPlan& p);
Expected<CkptPlan> ReadCkptPlan(const std::string& local_dir);

struct CkptRoundOptions {
  unsigned threads = 8;
  double deadline = 0;             // MonotonicSeconds(); 0: none
  uint64_t rate_cap = 0;           // bytes per second each copy writes at most; 0: none
  unsigned max_attempts = 3;       // checkpoints tried per round
  bool local_gc = true;            // CkptLocalGc after the persists
  bool tier_gc = true;             // CkptTierGc after a commit
  CkptFaultHook fault;             // tests only
};

struct CkptRoundResult {
  std::vector<CkptRecord> records;  // one per checkpoint tried, in the order tried
  std::string newest_durable;       // the newest checkpoint durable with this node's part, "" for none
  uint64_t bytes_not_durable = 0;   // bytes of complete local checkpoints newer than newest_durable
  std::vector<std::string> removed_local, removed_shared;
  std::vector<std::string> notes;   // retention's notes, errors that did not stop the round
  bool timed_out = false;           // the deadline passed before the round was done
};

// One round for `node` over `local_dir` (see above). Errors only when the
// local dir or the tier cannot be read at all; a failed persist is a
// record with state kFailed.
Expected<CkptRoundResult> PersistRound(const std::string& local_dir, const CkptPlan& plan, const std::string& node,
                                       const CkptRoundOptions& o);

// The calling thread's I/O priority for a persist (ioprio_set(2),
// IOPRIO_WHO_PROCESS of this thread): idle class, best-effort level 7, or
// left as it is. Honoured by the BFQ and CFQ schedulers; mq-deadline and
// none ignore it (then only ckpt_rate_cap bounds a persist's share).
// At the end of a run, once its agents have stopped: this run's partial
// folders on the tier of checkpoints that completed on `node` before the
// newest durable one on the tier (by its manifest's time) are removed. Agents and
// epilogs copy only checkpoints newer than that one, so nobody would ever
// complete them: a copy a newer commit overtook (this node's part sent, the
// others' skipped for the newer one), which would otherwise hold a part of
// a checkpoint on the shared tier until the next run. Partial folders of
// names this node does not hold complete, or holds as newer, are kept (an
// epilog may still send them). Returns the entries removed.
Expected<std::vector<std::string>> RemoveOvertakenCopies(const std::string& local_dir, const CkptPlan& plan,
                                                         const std::string& node);

// The calling thread's (and the threads it starts after) priority for a
// persist: kIdle the idle I/O class and nice kCkptIdleNice; kLow best-effort
// I/O level 7 and nice kCkptLowNice; kNormal unchanged. Nice is only raised.
inline constexpr int kCkptLowNice = 10;
inline constexpr int kCkptIdleNice = 19;
Status SetCkptIoClass(CkptIoClass c);

}  // namespace preflight
