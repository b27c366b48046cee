// File helpers with the publish-only-when-complete contract.
#pragma once

#include <string>
#include <sys/types.h>

#include "preflight/status.h"

namespace preflight {

// mkdir -p with `mode` for the directories it creates.
Status MakeDirs(const std::string& path, mode_t mode = 0755);
// Write to PATH.tmp.PID, fsync, rename over PATH: readers see the old file or
// the whole new one, never a part.
Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode = 0644);
Expected<std::string> ReadWholeFile(const std::string& path);

}  // namespace preflight
