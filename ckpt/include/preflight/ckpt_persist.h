// Making a checkpoint that is complete on node-local disk durable on a
// shared tier, from outside the training process: preflight-run's
// background persister during the job and the epilog's finishing copy
// after it both call PersistCkpt, as the job's user.
//
// THE PROTOCOL. A checkpoint NAME of run R (the job and its restart count)
// is made of one part per node, the nodes the caller names (every node of
// the job when every node writes its ranks' files; the first alone when
// one rank writes everything). Each node, holding the flock on
// <local>/.preflight-persist.lock so that one copy per node runs at a time:
//   1. copies its part of <local>/NAME into <tier>/.partial-R-NAME/ (a
//      hidden folder no reader looks into), many pieces at once, each file
//      hashed (XXH3) as it is written, every file and then every folder
//      fsynced; the convention's per-node proof files (COMPLETE,
//      .preflight-part) are left out;
//   2. writes its part manifest (every entry, size and checksum) to
//      .partial-R-NAME/.preflight-parts/<node>, atomically, last. A part
//      with a manifest is never written again in that run;
//   3. tries the commit (CommitCkpt, ckpt_commit.h). The commit goes on only
//      when the parts folder holds a manifest for every node the parts name,
//      so whichever node completes the set commits; the others find parts
//      missing and return (kWaiting). The commit: merges the part manifests
//      (a path two nodes hold must be the same bytes), writes the
//      convention's marker file (an empty COMPLETE) into the folder, checks
//      every file against the manifests (sizes; checksums on request),
//      removes what no manifest lists (a dead attempt's leftovers), writes
//      the combined manifest .preflight-manifest (fsynced), renames
//      .partial-R-NAME to NAME, fsyncs the tier, and writes the marker
//      .preflight-durable, naming the manifest's digest, last.
//
// THE GUARANTEES.
//   - NAME on the tier is durable only with the marker and a manifest that
//     the marker names and that verifies (CheckCkptDurable): every entry
//     there, every size right, checksums when asked. Nothing else is ever
//     offered for resume or counted by retention.
//   - Every byte a durable NAME lists was written and fsynced before its
//     part manifest, every manifest before the rename, the rename before
//     the marker. A crash at any point leaves either a hidden partial
//     folder (the next attempt of any node, or gc, carries on: a node
//     without its part manifest copies its part again, a complete set of
//     parts is committed) or NAME without the marker (the next commit
//     attempt or gc verifies it, then writes the marker): never a
//     checkpoint that looks complete and is not.
//   - Exactly one rename wins when nodes commit at once; the others find
//     NAME with the same manifest and succeed. A NAME already on the tier
//     with other contents is never replaced.
//   - Partial folders carry their run id, so runs never mix parts; a dead
//     run's partial folder is removed only when the caller says that run
//     is dead (ckpt_retention.h), and never read for resume.
//   - The copy follows no symlink; it keeps symlinks whose targets are
//     relative without "..", as symlinks, and refuses every other symlink,
//     FIFO, socket and device with an error naming it, before writing.
//     Every bound (entries, depth, name and path lengths, nodes) is a
//     constant of ckpt_manifest.h with its own error.
//   - Nothing here changes users or runs anything as root: the caller
//     runs it as the job's user.
//
// On NFS a node may not see another's last part manifest at once (the
// client's attribute cache): then nobody commits in that round, and the
// next attempt (the epilog, the next run, gc) does; the commit is idempotent.
#pragma once

#include <string>
#include <vector>

#include "preflight/ckpt_commit.h"
#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_fault.h"
#include "preflight/ckpt_verify.h"
#include "preflight/status.h"

namespace preflight {

struct CkptPersistRequest {
  std::string local_dir;           // the node's checkpoint dir, holding NAME
  std::string name;                // the checkpoint (ValidCkptName)
  std::string tier;                // the shared tier: an existing directory
  std::string run;                 // ValidCkptRun: the job id and restart count, say "1234.0"
  std::string node;                // this node
  std::vector<std::string> nodes;  // every node whose part makes NAME, this one included (any order)
  CkptConventionSpec convention;
  double complete_time = 0;        // LocalCkpt::time of NAME here
};

struct CkptPersistOptions {
  unsigned threads = 8;      // copy pieces and verified files in flight
  double deadline = 0;       // MonotonicSeconds(); 0: none (the epilog passes its budget)
  uint64_t rate_cap = 0;     // bytes per second this call's copy writes at most (ckpt_rate_cap); 0: none
  CkptVerifyOptions verify;  // the commit's check of the partial folder
  CkptFaultHook fault;       // tests only
};

struct CkptPersistResult {
  CkptCommitState state = CkptCommitState::kWaiting;
  bool copied = false;               // this call copied the part (false: it was there, or NAME was)
  uint64_t files = 0, bytes = 0;     // copied by this call
  double seconds = 0;                // the copy's
  std::vector<std::string> missing;  // kWaiting: the parts not there yet
  bool committed_here = false;
  std::string path;                  // <tier>/NAME once durable
};

// Steps 1 to 3 above for this node's part. Returns kDurable when NAME is
// durable with this node's part in it, kWaiting when other parts are
// missing. Errors: Unavailable when another persist of this node holds the
// lock; InvalidArgument for a refused entry or a broken bound (before
// anything is written); Failed for a conflict or a part that does not
// verify; Timeout past the deadline; the errno's status otherwise (ENOSPC,
// EIO: sys_errno() says which). A failure leaves only hidden state that the
// next attempt or gc finishes or removes.
Expected<CkptPersistResult> PersistCkpt(const CkptPersistRequest& req, const CkptPersistOptions& o);

// Whether this node's part of <local_dir>/NAME is durable on the tier: NAME
// there is durable (CheckCkptDurable at `v`), names `node` among its parts,
// and holds every file, folder and symlink of the local part (less the
// per-node proof files) with the same type, size and target, and the same
// bytes where sampled (the first and last 64 KiB of up to 16 files: another
// run's checkpoint of this name, same sizes, is not this one). Ok when so;
// Failed saying why not. What local retention asks before deleting.
Status LocalPartDurable(const std::string& local_dir, const std::string& name, const std::string& tier,
                        const std::string& node, const CkptConventionSpec& convention, const CkptVerifyOptions& v);

}  // namespace preflight
