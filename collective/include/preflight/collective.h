// The collective check: one harness (nccl-tests style) that owns the size
// sweep, warm-up, timing, verification and the verdict, over backends that
// only move data. JSON and text output are built from the results afterwards
// and never touch the measurement.
//
// Thread safety: a Backend is used by one thread; several backends (one per
// local rank) may run in one process on different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/options.h"
#include "preflight/status.h"

namespace preflight::collective {

// --- bootstrap: how ranks find each other ---------------------------------
// AllGather is collective: every rank calls it with the same key, in the same
// order; the result holds every rank's value, indexed by rank.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual const char* Name() const = 0;  // "pmix", "local"
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  virtual int LocalRank() const = 0;     // rank among the ranks on this node
  virtual int LocalSize() const = 0;
  virtual std::string Node() const = 0;  // this rank's node name
  virtual Expected<std::vector<std::string>> AllGather(const std::string& key, const std::string& mine) = 0;
};

// Ranks that are threads of one process (unit tests, the root-run intra-node
// check). Create one LocalGroup, then one LocalBootstrap per thread.
class LocalGroup;
std::shared_ptr<LocalGroup> MakeLocalGroup(int size, std::string node, unsigned timeout_ms);
std::unique_ptr<Bootstrap> MakeLocalBootstrap(std::shared_ptr<LocalGroup> group, int rank);

// A group of some of `parent`'s ranks (`members`, by parent rank), for
// tests between node pairs inside one launch. Used only by members; every
// AllGather is still the parent's (a fence over all ranks), so each
// non-member must make the same calls on the parent with an empty value.
std::unique_ptr<Bootstrap> MakeSubBootstrap(Bootstrap& parent, std::vector<int> members);

// Real PMIx through the launcher (Slurm's mpi/pmix: `srun --mpi=pmix`):
// PMIx_Init, then Put/Commit/Fence(collect)/Get per AllGather. Unavailable
// when not started under a PMIx server. `node` overrides the node name
// (default $SLURMD_NODENAME, else the host name).
Expected<std::unique_ptr<Bootstrap>> MakePmixBootstrap(const std::string& node);

// --- backend: moves data, nothing else ------------------------------------
// Float32 sum all-reduce from a send buffer to a receive buffer (out of
// place, so the input stays valid across iterations and the last result can
// be verified). Buffers live where the backend wants them (GPU memory for
// NCCL); the harness reaches them only through SetInput/GetOutput.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* Name() const = 0;  // "nccl", "host-tcp"
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  virtual std::string Device() const = 0;  // what this rank drives, for the report
  virtual Status Prepare(uint64_t max_count) = 0;
  virtual Status SetInput(const float* host, uint64_t count) = 0;
  virtual Status AllReduce(uint64_t count) = 0;  // may return before completion
  virtual Status Wait() = 0;                     // all issued operations complete
  virtual Status GetOutput(float* host, uint64_t offset, uint64_t count) = 0;
  // Element-wise max of a few doubles across ranks (timings, error counts).
  virtual Status MaxAcrossRanks(std::vector<double>& values) = 0;
};

// Every backend constructor below calls AllGather(kBackendGatherKey, ...)
// on its bootstrap exactly once, also when it fails before or during setup
// (it then contributes "error: WHY"), so no rank is left waiting in a fence
// for one that gave up; callers that fail before calling a constructor must
// make that one call themselves (see FailBackendGather).
inline constexpr const char* kBackendGatherKey = "backend";
Status FailBackendGather(Bootstrap& boot, const Status& why);

struct HostOptions {
  // Test seam for "a slow node": cap on the bytes per second this rank sends
  // (0: none). Comes from the node's nccl_host_rate_file.
  double send_rate_cap = 0;
  // Address other ranks connect to (empty: this host's first IPv4 address).
  std::string address;
  unsigned timeout_ms = 60000;  // any single wait for a peer
};
// TCP ring all-reduce between ranks (reduce-scatter then all-gather, n-1
// steps each, full duplex), the algorithm NCCL's ring uses, so the bus
// bandwidth formula holds. Listen addresses are exchanged through `boot`.
Expected<std::unique_ptr<Backend>> MakeHostBackend(Bootstrap& boot, const HostOptions& opt);

struct NcclOptions {
  std::string cudart = "libcudart.so";   // dlopen names; tried with fallbacks
  std::string nccl = "libnccl.so.2";
  int device = -1;  // -1: the bootstrap's local rank
};
// NCCL over CUDA, both dlopen'ed (one build runs on GPU-less nodes). The
// ncclUniqueId goes through `boot`. Unavailable with the library or device
// named when there is no usable GPU: callers turn that into a failure when a
// GPU check was asked for, never a pass.
Expected<std::unique_ptr<Backend>> MakeNcclBackend(Bootstrap& boot, const NcclOptions& opt);

// What the NCCL backend can see on this node without initialising NCCL:
// device count and name (for the node profile). Unavailable when CUDA can't load.
struct GpuInventory {
  int count = 0;
  std::string name;  // of device 0, e.g. "NVIDIA H100 80GB HBM3"
};
Expected<GpuInventory> ProbeGpus(const NcclOptions& opt);

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
  uint64_t bytes = 0;
  uint64_t count = 0;
  double seconds = 0;  // per operation, slowest rank
  double algbw = 0;    // bytes/s
  double busbw = 0;    // bytes/s
  uint64_t wrong = 0;  // elements that differed from the expected sum, worst rank
};

struct SweepResult {
  std::string backend;
  int nranks = 0;
  std::vector<SizeResult> sizes;
  double seconds = 0;  // whole sweep, this rank
};

// Collective: every rank runs it with the same options.
Expected<SweepResult> RunAllReduceSweep(Backend& b, const SweepOptions& opt);

// The verdict: every size verified, and the bus bandwidth at the largest
// size (where the link is saturated) at least `min_busbw` (0: no threshold).
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
// The profile named by cfg.nccl_profile, or for "auto" the one matching the
// detected GPUs (name substring and count), else nullptr.
const NodeProfile* PickProfile(const Config& cfg, const std::string& backend, const GpuInventory& gpus);
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
std::string ResultJson(const SweepResult& r, const Judgement& j, const RunInfo& info);
// nccl-tests-like table, then the explicit footer line "# OK: ..." or "# FAILED: ...".
std::string ResultText(const SweepResult& r, const Judgement& j, const RunInfo& info);
std::string RateText(double bytes_per_s);  // "1.23 GB/s", decimal units as nccl-tests

}  // namespace preflight::collective
