// Dataset staging's vocabulary (stage/, --stage; config keys stage_*): its
// value types and the parsers config.cc's key table uses for them.
#pragma once

#include <cstdint>
#include <string>

#include "preflight/status.h"

namespace preflight {

// The cache reuse check of --stage (stage_verify): files or dirs.
enum class StageVerify { kFiles, kDirs };
const char* StageVerifyName(StageVerify v);
Expected<StageVerify> ParseStageVerify(const std::string& s);

// Dataset staging (--stage; config keys stage_*).
struct StageConfig {
  // Dataset staging (--stage): node-local folder holding job views
  // (<dir>/jobs/<job>) and the cross-job cache (<dir>/cache);
  // empty disables staging. Quota 0: no limit. Workers 0: one per CPU.
  std::string dir;
  uint64_t cache_quota = 0;
  uint64_t workers = 0;
  uint32_t timeout_ms = 3600000;
  // Cache reuse check: "files" (stat + access of every file as the job
  // user) or "dirs" (directories only, for the uid that built the copy).
  StageVerify verify = StageVerify::kFiles;
  // Peer fan-out (stage_peer.h): a multi-node job's prologs share one read
  // of each source. Node i of the job's node list serves on
  // peer_port + i at peer_host ("%n": the node's name).
  bool peers = false;
  uint64_t peer_port = 6830;
  std::string peer_host = "%n";
  std::string munge_socket;  // empty: libmunge's default
};

}  // namespace preflight
