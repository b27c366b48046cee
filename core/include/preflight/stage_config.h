// Dataset staging's vocabulary (stage/, --stage; config keys stage_*): its
// value types and the parsers config.cc's key table uses for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "preflight/status.h"

namespace preflight {

// The cache reuse check of --stage (stage_verify): files or dirs.
enum class StageVerify { kFiles, kDirs };
const char* StageVerifyName(StageVerify v);
Expected<StageVerify> ParseStageVerify(const std::string& s);

// stage_peer_port: a privileged port (1 to 1023), so that only root can
// listen where a child of the fan-out connects (preflight(7), PEER FAN-OUT
// SECURITY). The error says so.
Expected<uint64_t> ParseStagePeerPort(const std::string& s);
// Node i of a job's node list serves on port + i, wrapped within
// [port, 1023]: never an unprivileged port, never past 65535. Nodes of one
// job have their own addresses, so a wrapped port is shared by no two
// listeners of one job.
uint16_t StagePeerPortFor(uint64_t port, size_t i);

// Dataset staging (--stage; config keys stage_*).
struct StageConfig {
  // Dataset staging (--stage): node-local folder holding job views
  // (<dir>/jobs/<job>) and the cross-job cache (<dir>/cache);
  // empty disables staging. Quota 0: no limit. Workers 0: one per CPU.
  std::string dir;
  uint64_t cache_quota = 0;
  uint64_t workers = 0;         // stage_workers: threads for a local source; 0: one per CPU
  uint64_t remote_workers = 32; // stage_remote_workers: operations in flight for a network/FUSE source
  uint32_t timeout_ms = 3600000;
  // stage_max_entries: files, folders and symlinks one dataset may have; the
  // copy keeps each entry's manifest lines in memory (about 400 bytes
  // measured: 392 MB peak for 1M), so this bounds the prolog's memory
  // (about 2 GB at the default).
  uint64_t max_entries = 5000000;
  // Cache reuse check: "files" (stat + access of every file as the job
  // user) or "dirs" (directories only, for the uid that built the copy).
  StageVerify verify = StageVerify::kFiles;
  // Peer fan-out (stage_peer.h): a multi-node job's prologs share one read
  // of each source. Node i of the job's node list serves on
  // StagePeerPortFor(peer_port, i) at peer_host ("%n": the node's name).
  bool peers = false;
  uint64_t peer_port = 900;
  std::string peer_host = "%n";
  std::string munge_socket;  // empty: libmunge's default
};

}  // namespace preflight
