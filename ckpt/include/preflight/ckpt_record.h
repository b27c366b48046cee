// What happened to one checkpoint on one node: the record preflight-run
// and the epilog write to state_dir, the job output prints and the
// Prometheus textfile is made from. One writer (CkptRecordJson) and one
// reader (ParseCkptRecord).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/ckpt_persist.h"
#include "preflight/status.h"

namespace preflight {

enum class CkptState {
  kLocal,       // complete on local disk, not (yet) copied
  kPersisting,  // this node's part is being copied, or waits for other parts
  kDurable,     // durable on the shared tier with this node's part in it
  kFailed,      // the persist failed; `error` says why
};
const char* CkptStateName(CkptState s);  // "local", "persisting", "durable", "failed"
Expected<CkptState> ParseCkptState(const std::string& s);

struct CkptRecord {
  std::string name, run, node;
  std::string tier;                 // "" when no shared tier
  CkptState state = CkptState::kLocal;
  uint64_t bytes = 0, files = 0;    // this node's part
  double local_time = 0;            // when it became complete locally (epoch seconds)
  double persist_start = 0;         // epoch seconds, 0 when not started
  double persist_end = 0;           // when it became durable or failed; 0 while not
  double copy_seconds = 0;          // time spent copying this node's part
  std::vector<std::string> missing; // kPersisting: parts not arrived
  std::string error;                // kFailed

  // Bytes per second of this node's copy; 0 when nothing was timed.
  double Throughput() const { return copy_seconds > 0 ? bytes / copy_seconds : 0; }
};

// The record after a persist attempt that started at `start` (epoch seconds).
CkptRecord CkptRecordFromPersist(const CkptPersistRequest& req, const Expected<CkptPersistResult>& result,
                                 double start, double end);

// One JSON object (keys in a fixed order); `pretty` adds newlines.
std::string CkptRecordJson(const CkptRecord& r, bool pretty = false);
// Strict on types; unknown keys are ignored so that newer writers stay
// readable. Missing required keys (name, state) are errors.
Expected<CkptRecord> ParseCkptRecord(const std::string& json);

}  // namespace preflight
