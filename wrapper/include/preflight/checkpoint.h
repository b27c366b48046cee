// Checkpoints in a job's --checkpoint-dir, as preflight-run sees them.
//
// Contract (man preflight-run(1)): every checkpoint is one directory directly
// under the checkpoint dir; the application writes it completely, then
// creates the marker file (default "COMPLETE") inside it as its last step. A
// directory without the marker is incomplete (being written, or left by a
// crash) and is never offered for resume. Entries whose names start with '.'
// and plain files are ignored. "Newest" is by the marker's mtime, ties
// broken by name, so a step counter need not be zero-padded. The rule is
// the marker convention of ckpt/ (ckpt_convention.h), which owns what
// "complete" means for every framework convention.
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

struct Checkpoint {
  std::string name;     // directory name
  std::string path;     // dir + "/" + name
  bool complete = false;
  double mtime = 0;     // marker mtime when complete, else the directory's
};

// All checkpoint directories, oldest first. A missing dir is an empty list.
Expected<std::vector<Checkpoint>> ListCheckpoints(const std::string& dir, const std::string& marker);

// Path of the newest complete checkpoint, "" when there is none.
Expected<std::string> NewestCompleteCheckpoint(const std::string& dir, const std::string& marker);

// Keep the newest `keep` complete checkpoints (keep 0: prune nothing).
// Deletes complete ones beyond the newest `keep`, and incomplete ones older
// than the newest complete one (abandoned writes); never an incomplete one
// newer than that (it may be in progress), so an older checkpoint goes only
// once a newer one is complete. Returns the paths deleted; the first failure
// stops it.
Expected<std::vector<std::string>> PruneCheckpoints(const std::string& dir, const std::string& marker,
                                                    uint64_t keep);

// Whether this process can create (and delete) a file in `dir`: a probe
// file ".preflight-run-probe.<pid>" is made and removed, so read-only mounts,
// ACLs and ownership all count. The error names the directory and errno.
Status CheckpointDirWritable(const std::string& dir);

}  // namespace preflight
