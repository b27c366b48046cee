// Which checkpoint a (re)started job resumes from, across the two tiers:
// the newest one that is complete and verifies, with the reason each newer
// one was passed over, as lines the job output prints.
//
// On the shared tier only durable checkpoints (CheckCkptDurable at the
// requested verification) are offered; a committed one without its marker,
// a partial folder (parts missing), a manifest or size mismatch, a folder
// not written by preflight are named with their reason. On local disk a
// checkpoint complete by its convention is offered only when the caller
// allows it: one node's local view says nothing about the other nodes'
// parts, so preflight-run allows it for a one-node job (or once every
// node agreed). Order is by completion time (the local proof's mtime; on
// the tier the latest of the parts' local times, kept in the manifest),
// ties by name; a checkpoint complete locally and durable on the tier is
// offered from local disk.
#pragma once

#include <string>
#include <vector>

#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_verify.h"
#include "preflight/status.h"

namespace preflight {

enum class CkptWhere { kLocal, kShared };
const char* CkptWhereName(CkptWhere w);  // "local disk", "shared tier"

struct CkptCandidate {
  std::string name, path;
  CkptWhere where = CkptWhere::kShared;
  double time = 0;
  bool ok = false;
  std::string why;  // !ok: in words
};

struct CkptResumeChoice {
  bool found = false;
  CkptCandidate chosen;
  std::vector<CkptCandidate> passed_over;  // newer than the chosen (every one when none), newest first

  // "preflight: resume from NAME on the shared tier (PATH)", then one
  // "preflight: not resuming from NAME (where): why" per passed-over one.
  std::vector<std::string> Lines() const;
};

// Pure: the newest candidate that is ok; a name ok on both tiers counts
// once, from local disk.
CkptResumeChoice PickCkptResume(std::vector<CkptCandidate> candidates);

struct CkptResumeInputs {
  std::string local_dir;  // "" for none
  CkptConventionSpec convention;
  bool allow_local = false;
  std::string tier;  // "" for none
  CkptVerifyOptions verify;
};

// The candidates of both tiers (reading: each tier's listing, the markers,
// the manifests, and the files as `verify` says), then PickCkptResume.
// Errors only when a tier cannot be listed at all.
Expected<CkptResumeChoice> ChooseCkptResume(const CkptResumeInputs& in);

// The candidates on the shared tier, each with its verdict (ChooseCkptResume's first half).
Expected<std::vector<CkptCandidate>> SharedCkptCandidates(const std::string& tier, const CkptVerifyOptions& verify);

}  // namespace preflight
