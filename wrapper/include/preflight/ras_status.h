// NCCL's RAS report (NCCL 2.24+, the STATUS command of its client socket;
// man preflight-run(1), HANG ATTRIBUTION), parsed into one model whichever
// format the job's NCCL spoke. The owner of that format here: nothing else
// in preflight reads RAS output.
//
// Two formats, from NCCL's src/ras/client_support.cc (described, not
// copied; see /work notes of issue 31):
//  - JSON (SET FORMAT json, NCCL 2.28.7+): per communicator, every rank with
//    its launched-operation counts per collective type, and the missing
//    ranks with "unresponsive"/"considered_dead". 2.28.7 and 2.28.9 omit a
//    comma in each missing rank ("nvml_dev": N <newline> "status"); that
//    one defect is repaired before parsing.
//  - text (every release): the DEAD and INCOMPLETE process lists ("Process
//    PID on node HOST managing GPU G"), per-communicator INCOMPLETE ranks
//    and MISMATCH blocks ("N ranks have launched up to operation K", the
//    outlier ranks listed by "Rank R -- GPU G managed by process P on node
//    HOST"). 2.24-2.25 print one MISMATCH block for all collectives,
//    2.26+ one per collective type: both read the same way.
//
// Bounds: the caller caps the reply (kRasMaxReplyBytes); the parsers keep
// at most kRasMaxRanks ranks and kRasMaxComms communicators and say so.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

inline constexpr size_t kRasMaxReplyBytes = 8u << 20;
inline constexpr size_t kRasMaxRanks = 65536;
inline constexpr size_t kRasMaxComms = 4096;
inline constexpr size_t kRasCollectives = 5;  // Broadcast, Reduce, AllGather, ReduceScatter, AllReduce
const char* RasCollectiveName(size_t i);

// A job process as RAS names it: its node's address, pid, GPU.
struct RasProcess {
  std::string host;  // an IP address as NCCL prints it ("unknown" possible)
  long pid = -1;
  std::string gpu;   // "5", "0,1", "" when not given
};

struct RasRank {
  long rank = -1;
  RasProcess proc;
};

// A rank that launched fewer operations of one collective type than the
// most advanced ranks of its communicator.
struct RasLag {
  std::string collective;  // "AllReduce", ...; "" for 2.24-2.25 text (all types together)
  RasRank rank;
  uint64_t launched = 0;   // its count
  uint64_t ahead = 0;      // the most any rank of the communicator launched
  bool none = false;       // text: "have not launched any operations"
};

struct RasComm {
  std::string id;                // "#0-0 (27a079b828ff1a75)" (text) or "0xae94...:..." (JSON)
  long size = 0;                 // ranks in the communicator (0: not said)
  std::vector<RasRank> missing;  // ranks RAS has no data from
  std::vector<RasLag> lags;      // behind ranks, as far as the reply names them
  bool mismatch = false;         // counts differ (the text may list no rank when the laggards are many)
};

struct RasSnapshot {
  std::string nccl_version;        // "2.29.2", "" when the reply did not say
  std::string format;              // "json" or "text"
  std::vector<RasProcess> dead;          // considered dead (unreachable)
  std::vector<RasProcess> unresponsive;  // missing data, not (yet) dead
  std::vector<RasComm> comms;
  long timeouts = 0;
  std::vector<std::string> notes;  // what was cut or not understood, one line each
};

// Either format, told apart by the first non-blank byte ('{': JSON).
Expected<RasSnapshot> ParseRasStatus(const std::string& reply);
Expected<RasSnapshot> ParseRasJson(const std::string& reply);
Expected<RasSnapshot> ParseRasText(const std::string& reply);

// "2.28.7" < "2.29.2"; numeric per dot-separated part, missing parts 0.
// false when either is not a version ("" included).
bool RasVersionLess(const std::string& a, const std::string& b);
bool ValidRasVersion(const std::string& v);

}  // namespace preflight
