// The collective check: one harness (nccl-tests style) that owns the size
// sweep, warm-up, timing, verification and the verdict, over backends that
// only move data (collective_backend.h), whose ranks find each other through
// a bootstrap (collective_bootstrap.h). JSON and text output are built from
// the results afterwards and never touch the measurement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "preflight/collective_backend.h"
#include "preflight/collective_bootstrap.h"
#include "preflight/collective_ops.h"
#include "preflight/config.h"
#include "preflight/options.h"
#include "preflight/status.h"

namespace preflight::collective {

// --- the harness ------------------------------------------------------------
// All-reduce, as nccl-tests defines it: each rank holds `count` elements;
// algbw = bytes / time; busbw = algbw * 2(n-1)/n (what each link carries in
// a ring, so it is comparable across rank counts).
double AllReduceBusFactor(int nranks);
uint64_t AllReduceCount(uint64_t bytes);  // float elements for a message of `bytes`
// The input rank r puts at element i, and the sum every rank must receive.
// Small integers, so float sums are exact and any lost or doubled
// contribution shows.
float AllReduceInput(int rank, uint64_t i);
float AllReduceExpected(int nranks, uint64_t i);

struct SweepOptions {
  std::vector<uint64_t> sizes;  // bytes per rank
  int warmup = 2;
  int iters = 5;
  uint64_t verify_max_elems = 16u << 20;  // beyond this, verify head and tail only
};
// quick: 4 sizes up to 256 MiB; full: doubling from 1 MiB to 8 GiB; both
// capped at max_bytes (0: no cap); when the cap removes every size, the cap
// itself is the only size.
SweepOptions SweepForLevel(Level level, uint64_t max_bytes);

struct SizeResult {
  uint64_t bytes = 0;  // as nccl-tests reports it (collective_ops.h)
  uint64_t count = 0;  // bytes / 4, nccl-tests' count column
  double seconds = 0;  // per operation, slowest rank
  double algbw = 0;    // bytes/s
  double busbw = 0;    // bytes/s
  uint64_t wrong = 0;  // elements that differed from the expected sum, worst rank
};

struct SweepResult {
  Op op = Op::kAllReduce;
  std::string backend;
  int nranks = 0;
  std::vector<SizeResult> sizes;
  double seconds = 0;  // whole sweep, this rank
};

// Collective: every rank runs it with the same options. Sizes OpCount
// makes 0 (below one chunk per rank) are left out; none left is InvalidArgument.
Expected<SweepResult> RunSweep(Backend& b, Op op, const SweepOptions& opt);
Expected<SweepResult> RunAllReduceSweep(Backend& b, const SweepOptions& opt);
// Each operation's sweep in turn on one backend; the first error ends it,
// with the operation named in the message and in `*failed` (when given).
Expected<std::vector<SweepResult>> RunSweeps(Backend& b, const std::vector<Op>& ops, const SweepOptions& opt,
                                             Op* failed = nullptr);

// The verdict: every size verified, and the bus bandwidth at the largest
// size (where the link is saturated) at least `min_busbw` (0: no threshold).
// The same threshold serves every operation: busbw is normalised to what
// one link carries (the bus factor), so a healthy fabric reaches about the
// same figure whatever the operation, as nccl-tests' tables show.
struct Judgement {
  bool ok = false;
  double busbw = 0;      // at the largest size
  double threshold = 0;
  std::string message;   // "busbw 9.1 GB/s >= 8 GB/s" / "... < ..." / wrong data
};
Judgement Judge(const SweepResult& r, double min_busbw);

// --- thresholds: node profiles -----------------------------------------------
// A built-in profile per common machine; the site picks one with nccl_profile
// or sets the figures directly (nccl_min_busbw, nccl_min_intra_busbw).
struct NodeProfile {
  const char* name;
  const char* gpu_match;  // substring of the GPU name ("" matches the host backend)
  int gpus;
  double intra_busbw;     // bytes/s, all-reduce over the node's GPUs
  double inter_busbw;     // bytes/s, all-reduce across nodes (per the NICs)
};
const std::vector<NodeProfile>& NodeProfiles();
// The profile named by cfg.nccl.profile, or for "auto" the one matching the
// detected GPUs (name substring and count), else nullptr.
const NodeProfile* PickProfile(const Config& cfg, BackendKind backend, const GpuInventory& gpus);
// Threshold in bytes/s for a check over several nodes (intra=false) or one
// node's ranks; an explicit config value wins over the profile. `source` says
// where it came from, for the report.
double Threshold(const Config& cfg, const NodeProfile* p, bool intra, std::string* source);

// --- output, built from the results -------------------------------------------
struct RunInfo {
  std::string scope;      // "allocation", "intra-node", "pair"
  std::string level;
  std::vector<std::string> nodes;
  std::string bootstrap;  // "pmix", "local"
  std::string threshold_source;
  std::string profile;
};
// One document per sweep; "test" is the operation (OpName).
std::string ResultJson(const SweepResult& r, const Judgement& j, const RunInfo& info);
// nccl-tests-like table, then the explicit footer line "# OK: ..." or "# FAILED: ...".
std::string ResultText(const SweepResult& r, const Judgement& j, const RunInfo& info);
std::string RateText(double bytes_per_s);  // "1.23 GB/s", decimal units as nccl-tests

}  // namespace preflight::collective
