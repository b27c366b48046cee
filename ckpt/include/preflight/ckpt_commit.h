// The commit of a checkpoint on the shared tier once every node's part has
// arrived, its repair, and the one definition of "durable". The protocol
// and its guarantees are written down in ckpt_persist.h.
#pragma once

#include <string>
#include <vector>

#include "preflight/ckpt_fault.h"
#include "preflight/ckpt_manifest.h"
#include "preflight/ckpt_verify.h"
#include "preflight/status.h"

namespace preflight {

struct CkptCommitOptions {
  CkptVerifyOptions verify;  // of the partial folder before the rename, and of NAME on repair
  CkptFaultHook fault;
};

enum class CkptCommitState {
  kWaiting,  // not every part has arrived; nothing was changed
  kDurable,  // NAME is durable (committed now, found committed, or repaired)
};

struct CkptCommitResult {
  CkptCommitState state = CkptCommitState::kWaiting;
  std::vector<std::string> arrived;  // kWaiting: the parts there
  std::vector<std::string> missing;  // kWaiting: the parts not there (empty when no part named them yet)
  bool committed_here = false;       // this call renamed the partial folder
  bool repaired = false;             // this call wrote a missing marker for a renamed NAME
  uint64_t files = 0, bytes = 0;
};

// Commits `.partial-<run>-NAME` in `tier` when every part its manifests
// name has arrived, or finishes a NAME renamed but not marked. Safe from
// any node, any number of times, concurrently: exactly one caller's rename
// succeeds, the others find NAME with the same manifest and succeed too.
// A NAME already on the tier with other contents is an error (kFailed) and
// this run's partial folder is left for gc; so are parts that disagree (two
// nodes holding one path with different bytes) and files that do not
// verify. Nothing that was durable is changed by a failure.
Expected<CkptCommitResult> CommitCkpt(const std::string& tier, const std::string& run, const std::string& name,
                                      const CkptCommitOptions& o);

// Finishes NAME in `tier` if it has a combined manifest and no marker (a
// commit that stopped between the rename and the marker): verifies it per
// `o.verify`, then writes the marker. A marked NAME is checked as by
// CheckCkptDurable. kFailed when it does not verify; it is then left as
// it is, never offered.
Expected<CkptCommitResult> RepairCkpt(const std::string& tier, const std::string& name, const CkptCommitOptions& o);

// Whether NAME in `tier` is durable: a directory (not a symlink) holding
// the marker, a combined manifest whose digest the marker names, for NAME,
// and every entry of it verifying per `v`. The manifest when durable;
// otherwise why not (kFailed for a checkpoint that is not durable, the
// errno's status when the tier could not be read).
Expected<CkptManifest> CheckCkptDurable(const std::string& tier, const std::string& name, const CkptVerifyOptions& v);

// The marker's text for a manifest's bytes.
std::string CkptMarkerText(const std::string& manifest_bytes);

}  // namespace preflight
