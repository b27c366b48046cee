// Fault attribution: the one rule that turns a failure inside the prolog or
// the epilog into what Slurm does with the node and the job (preflight(7),
// FAULT ATTRIBUTION). Every failure is classed before it decides the exit
// status:
//
//   node    the node's hardware or local state (a GPU check, local disk
//           EIO/EROFS, a mount that fails): exit 1, Slurm drains the node
//           with preflight's reason and requeues the job elsewhere.
//   user    what the job's user typed or placed (options, lists, trees,
//           names, sizes, a dataset that does not fit): exit 0, the node
//           stays in service; a record under state_dir makes the plugin's
//           task_init refuse to start the job's tasks with the reason, so
//           the job fails with it in its output. An error not otherwise
//           classed is the user's when it arose from the user's tree or
//           options.
//   config  the site's configuration (an unreadable or invalid site config,
//           a stage_dir others can write): exit 1, the node is drained once
//           with a reason naming the file, key or folder; an admin fixes it.
#pragma once

#include <optional>
#include <string>

namespace preflight {

enum class FaultOwner { kNone, kNode, kUser, kConfig };

struct FaultAction {
  bool drain = false;     // the prolog/epilog exits 1: Slurm drains the node
  bool fail_job = false;  // the job's tasks are refused with the reason
};

FaultAction ActionFor(FaultOwner owner);
const char* FaultOwnerName(FaultOwner owner);  // "node", "user", "config", "none"
// The inverse, for records and drain reasons; nullopt for any other word.
std::optional<FaultOwner> FaultOwnerFromName(const std::string& name);

}  // namespace preflight
