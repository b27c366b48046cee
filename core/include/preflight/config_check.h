// What `preflight config check` checks beyond the parse (LoadConfig): the
// files and folders the config names, as seen from this host, with the
// rules the node binaries apply to them at first use, so a config that
// would drain nodes is caught before a job lands on one. Reads only;
// creates, moves and follows nothing.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "preflight/config.h"

namespace preflight {

struct ConfigFinding {
  enum class Level { kNote, kWarning, kError };
  Level level = Level::kNote;
  std::string message;  // names the key, the file or folder, and the problem
};

// Every finding for `cfg` on this host, in key order:
//   node_addresses: loaded as the stage fan-out and the host backend load
//     it (LoadNodeAddresses): a missing, oversized or unreadable file, a
//     bad address or node name, a node named twice -- an error naming the
//     file and line. (Each of these drains every node a multi-node stage
//     job lands on.)
//   stage_dir: CheckStageChain with the prolog's rules (uid 0); a path
//     still holding %n (no NODE given) is a note, nothing checked.
std::vector<ConfigFinding> CheckConfigOnHost(const Config& cfg);

// The chain of `dir` from "/" as the prolog's MakePrivateDirs would take
// it as euid `me`, then its `subdirs` (jobs, cache) where they exist:
//   a refusal (PrivateDirRefusal: a symlink, not a folder, another owner,
//     writable by others) -- an error, the node would be drained;
//   an entry of another user's in a sticky world-writable folder (/tmp, a
//     1777 scratch) -- a warning: the first stage job sets it aside;
//   a missing folder in a sticky world-writable one -- a warning: any user
//     can create it first (it would be set aside), so create it now;
//   a missing folder elsewhere -- fine, the prolog creates it.
// Stops at the first finding (what lies below it is not what the prolog
// would use).
std::vector<ConfigFinding> CheckStageChain(const std::string& dir, const std::vector<std::string>& subdirs, uid_t me);

}  // namespace preflight
