// The collective check's vocabulary (collective/, spank_plugin/'s
// --nccl-check; preflight-nccl(1); config keys nccl_*): its value types and
// the parsers config.cc's key table uses for them.
#pragma once

#include <cstdint>
#include <string>

#include "preflight/status.h"

#ifndef PREFLIGHT_DEFAULT_NCCL_BINARY
#define PREFLIGHT_DEFAULT_NCCL_BINARY "/usr/bin/preflight-nccl"
#endif

namespace preflight {

// What --nccl-check does with a job whose check failed (nccl_on_failure).
enum class NcclOnFailure { kRequeue, kFail };
const char* NcclOnFailureName(NcclOnFailure f);
Expected<NcclOnFailure> ParseNcclOnFailure(const std::string& s);
// nccl_backend: auto, nccl, host.
Expected<std::string> ParseNcclBackend(const std::string& s);

// --nccl-check collective test (man preflight-nccl(1); config keys nccl_*).
// Rates in bytes/s; 0 means "auto": from the node profile for the detected hardware.
struct NcclConfig {
  std::string backend = "auto";    // auto, nccl, host
  std::string profile = "auto";    // a built-in profile name, or auto
  double min_busbw = 0;            // allocation-wide all-reduce
  double min_intra_busbw = 0;      // one node's ranks
  uint64_t max_bytes = 0;          // cap on message sizes (0: none)
  std::string binary = PREFLIGHT_DEFAULT_NCCL_BINARY;
  std::string srun = "srun";
  uint32_t timeout_ms = 600000;    // bound on each check step
  NcclOnFailure on_failure = NcclOnFailure::kRequeue;
  bool drain_internode = false;    // trust user-run pairwise results to drain
  // The straggler rule (collective/straggler.h): a node whose ring pairs
  // (or intra-node figure) fall below this fraction of the allocation's
  // median is named; check_nccl_straggler says what happens then.
  double straggler_fraction = 0.5;
  // Test seam: a file holding a send-rate cap (e.g. "5M") for the host
  // backend's ranks on this node; absent file, no cap.
  std::string host_rate_file;
  // NCCL for the nccl backend (soname or path; nccl_library), e.g. the
  // libnccl.so.2 of a Python wheel (nvidia-nccl-cu13) off the loader's path.
  std::string library = "libnccl.so.2";
};

}  // namespace preflight
