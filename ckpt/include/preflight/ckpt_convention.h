// Which checkpoint folders in a node's local checkpoint dir are complete
// for this node, by the convention of the framework that wrote them. One
// owner of the notion of "complete" for every convention; preflight-run's
// COMPLETE marker is the `marker` convention.
//
// A checkpoint is a directory directly under the checkpoint dir whose name
// does not start with '.'. On a multi-node job each node's local dir holds
// only its own ranks' files: a node's *part*. The rules below decide when
// this node's part is complete; the durable commit (ckpt_persist.h) then
// waits for every node's part.
//
//   marker     (preflight-run's contract) the part is complete when it holds
//              a regular file named by `marker` (default COMPLETE), which
//              the application writes last on every node.
//   dcp        PyTorch Distributed Checkpoint and torchtitan. DCP's save
//              ends with a collective: the coordinator gathers every rank's
//              write result and only then writes `.metadata`, and every rank
//              returns from save() only after that. So `.metadata` proves the
//              part of the coordinator's node, and save() returning on any
//              rank proves every node's part. The other nodes have no
//              `.metadata`: there the part is complete when the application
//              has written the per-node marker `.preflight-part` (an empty
//              regular file) after dcp.save() returned, on each node (local
//              rank 0 is enough):
//                dcp.save(state, checkpoint_id=path)
//                if int(os.environ["LOCAL_RANK"]) == 0:
//                    open(os.path.join(path, ".preflight-part"), "w").close()
//   megatron   Megatron-LM: `iter_NNNNNNN` folders (or `release`) and the
//              tracker `latest_checkpointed_iteration.txt`, written by global
//              rank 0 after the save's closing barrier. The tracker proves
//              exactly the iteration it names (an older iter_ folder may be a
//              torn save that a rollback later passed), and only on the node
//              that has it; elsewhere `.preflight-part` as for dcp.
//   deepspeed  DeepSpeed: tag folders and the file `latest` naming the newest
//              tag, written by rank 0 after the save: the tag named proves
//              itself on that node; elsewhere `.preflight-part`.
//   nemo       NeMo: rank 0 creates `<base>-unfinished` beside a checkpoint
//              before any rank writes it and removes it after the closing
//              barrier (also while deleting one), where <base> is the name
//              without a trailing ".ckpt" and then "-EMA". So a checkpoint
//              with that marker present is never complete; its absence is
//              proof only on the coordinator's node (`coordinator`), because
//              the marker is written there alone; elsewhere `.preflight-part`.
//              Only checkpoint folders are handled (NeMo's dist-ckpt format),
//              not single .ckpt files.
//
// In every convention a present `.preflight-part` counts as proof for the
// node, except that NeMo's -unfinished marker always wins. "Newest" is by
// the time the proof appeared (the proof file's mtime; for NeMo's absence,
// the folder's), ties broken by name length and then name, so that a step
// counter need not be zero-padded. Time order, not step order, is what a
// rollback needs: a step saved again after resuming from an older one is
// the newer checkpoint.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

enum class CkptConvention { kMarker, kDcp, kMegatron, kDeepSpeed, kNemo };

// "marker", "dcp" (also "torchtitan"), "megatron", "deepspeed", "nemo".
Expected<CkptConvention> ParseCkptConvention(const std::string& s);
const char* CkptConventionName(CkptConvention c);

inline constexpr char kCkptPartMarker[] = ".preflight-part";
inline constexpr char kDcpMetadata[] = ".metadata";
inline constexpr char kMegatronTracker[] = "latest_checkpointed_iteration.txt";
inline constexpr char kDeepSpeedLatest[] = "latest";
inline constexpr char kNemoUnfinishedSuffix[] = "-unfinished";
inline constexpr size_t kCkptTrackerMaxBytes = 4096;

struct CkptConventionSpec {
  CkptConvention kind = CkptConvention::kMarker;
  std::string marker = "COMPLETE";  // kMarker: the file written last
  bool coordinator = false;         // kNemo: this node hosts global rank 0
};

// What lstat said about one name.
enum class CkptEntryKind { kMissing, kFile, kDir, kSymlink, kOther };
struct CkptListedEntry {
  std::string name;
  CkptEntryKind kind = CkptEntryKind::kMissing;
  double mtime = 0;
};

// A checkpoint dir as far as the rules need it: its entries, for each entry
// that is a directory the probe names lstat'ed inside it (ProbeNames), and
// the convention's tracker file. Filled by ListCkptDir; tests build it.
struct CkptDirListing {
  std::vector<CkptListedEntry> top;
  std::map<std::string, std::vector<CkptListedEntry>> probes;  // dir name -> probes, kMissing when absent
  bool tracker_present = false;  // a regular file
  std::string tracker;           // its text, at most kCkptTrackerMaxBytes
  double tracker_mtime = 0;
};

// The names the rules look for inside each checkpoint folder.
std::vector<std::string> CkptProbeNames(const CkptConventionSpec& spec);
// The convention's tracker file in the checkpoint dir, "" when none.
std::string CkptTrackerName(CkptConvention c);

// Reads `dir` for the rules: one readdir, an lstat per entry and per probe,
// the tracker. A missing dir is an empty listing.
Expected<CkptDirListing> ListCkptDir(const std::string& dir, const CkptConventionSpec& spec);

struct LocalCkpt {
  std::string name;
  bool complete = false;
  double time = 0;        // when the proof appeared; the folder's mtime when incomplete
  std::string evidence;   // what proved it, e.g. "COMPLETE", ".metadata", "tracker"
  std::string why_not;    // when incomplete, in words
};

// The rules, over a listing: every checkpoint folder, oldest first.
std::vector<LocalCkpt> ClassifyCkpts(const CkptDirListing& listing, const CkptConventionSpec& spec);

// ListCkptDir then ClassifyCkpts.
Expected<std::vector<LocalCkpt>> LocalCkpts(const std::string& dir, const CkptConventionSpec& spec);

// Per-node proof files, left out of the part each node copies (their
// contents may differ between nodes): the marker and `.preflight-part`.
std::vector<std::string> CkptPartSkipNames(const CkptConventionSpec& spec);
// The file the commit writes (empty) into the durable copy so that it is
// complete by the application's own convention too: the marker for
// kMarker, "" otherwise (dcp's .metadata is copied with the coordinator's
// part; trackers live outside checkpoint folders).
std::string CkptCommitMarker(const CkptConventionSpec& spec);

}  // namespace preflight
