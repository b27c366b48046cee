// Retention on both tiers and the cleaning of what dead copies left.
//
// Shared tier (CkptTierGc, run by the persister after each commit and by
// preflight-run at the start of each run: CleanEarlierRuns): keep the newest `keep` durable checkpoints,
// counting only those that verify (CheckCkptDurable), and remove older
// durable ones. So an older checkpoint goes only once `keep` newer ones are
// durable, and the newest durable one, the last loadable, is never
// removed. Nothing else is removed by retention: a committed NAME without
// its marker is repaired (verified, then marked), a marked one that does
// not verify and a folder preflight did not write are left alone and named
// in the notes. A partial folder whose parts have all arrived is committed
// (the commit verifies everything first); any other partial folder is
// removed only when the caller's predicate says its run is dead (without
// being read), else left alone. Removal renames to `.trash-...` first, so
// a half-removed folder is never visible under its name; trash is removed
// by whoever sees it.
//
// Local disk (CkptLocalGc): remove only checkpoints whose part on this node
// is durable (LocalPartDurable), beyond the newest `keep` complete ones;
// never an incomplete one (the trainer may be writing it), never while a
// persist of this node runs (it holds the same lock).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_resume.h"
#include "preflight/ckpt_verify.h"
#include "preflight/status.h"

namespace preflight {

// Pure: of the ok candidates, the names beyond the newest `keep` (keep 0:
// none), oldest first. Candidates not ok are never in the result.
std::vector<std::string> PlanTierRetention(const std::vector<CkptCandidate>& shared, uint64_t keep);

struct CkptTierGcOptions {
  uint64_t keep = 0;  // durable checkpoints kept; 0: retention off (repair and cleaning still run)
  CkptVerifyOptions verify;
  // Whether the run that owns a partial folder is dead (its job ended and
  // will not write again). Absent: no partial folder is removed.
  std::function<bool(const std::string& run)> run_dead;
};

struct CkptTierGcResult {
  std::vector<std::string> removed;   // durable checkpoints removed by retention
  std::vector<std::string> repaired;  // marked after verification
  std::vector<std::string> committed;  // partial folders committed
  std::vector<std::string> stale;     // partial folders of dead runs removed
  std::vector<std::string> notes;     // what was left alone, and why
};

Expected<CkptTierGcResult> CkptTierGc(const std::string& tier, const CkptTierGcOptions& o);

// Pure: the complete local checkpoints that may go: beyond the newest
// `keep` complete ones, and in `durable`. Oldest first.
std::vector<std::string> PlanLocalRetention(const std::vector<LocalCkpt>& local, const std::set<std::string>& durable,
                                            uint64_t keep);

struct CkptLocalGcOptions {
  uint64_t keep = 1;  // complete local checkpoints kept for a fast resume; 0: every durable one goes
  std::string tier, node;
  CkptConventionSpec convention;
  CkptVerifyOptions verify;  // of the tier's copy before a local one goes
};

// Removes the local checkpoints PlanLocalRetention allows; returns their
// paths. Unavailable while a persist of this node holds the lock.
Expected<std::vector<std::string>> CkptLocalGc(const std::string& local_dir, const CkptLocalGcOptions& o);

}  // namespace preflight
