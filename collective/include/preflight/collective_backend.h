// What moves the data of a collective check: the host TCP backend, or NCCL
// over CUDA (both dlopen'ed). Backends only move data; the harness
// (collective.h) times, verifies and judges.
//
// Thread safety: a Backend is used by one thread; several backends (one per
// local rank) may run in one process on different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "preflight/collective_bootstrap.h"
#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight::collective {

// Which backend moves the data: the site's nccl_backend or --backend. kAuto
// is a choice only (ResolveBackend turns it into one of the others); the
// one spelling of each is BackendKindName's ("auto", "nccl", "host"), the
// name a result carries is Backend::Name() ("nccl", "host-tcp").
enum class BackendKind { kAuto, kNccl, kHost };
const char* BackendKindName(BackendKind k);
Expected<BackendKind> ParseBackendKind(const std::string& s);
// The name a result carries for a resolved kind: Backend::Name() of what
// MakeBackend builds for it, known before (or without) building one. The
// backends' Name() return these same constants.
inline constexpr const char* kNcclResultName = "nccl";
inline constexpr const char* kHostResultName = "host-tcp";
const char* ResultBackendName(BackendKind k);

// --- backend: moves data, nothing else ------------------------------------
// Float32 collectives (sums where they reduce) from a send buffer to a
// receive buffer (out of place, so the input stays valid across iterations
// and the last result can be verified). Buffers live where the backend
// wants them (GPU memory for NCCL); the harness reaches them only through
// SetInput/GetOutput. Counts follow NCCL's calls (collective_ops.h's
// OpCount): every operation fits buffers of Prepare's max_count when
// count * Size() <= max_count (all_reduce: count <= max_count).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* Name() const = 0;  // kNcclResultName, kHostResultName
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  virtual std::string Device() const = 0;  // what this rank drives, for the report
  virtual Status Prepare(uint64_t max_count) = 0;
  virtual Status SetInput(const float* host, uint64_t count) = 0;
  // Each may return before completion; an operation this backend cannot
  // run (a symbol missing from an old NCCL) is an error value naming it.
  virtual Status AllReduce(uint64_t count) = 0;      // count elements in, count out
  virtual Status AllGather(uint64_t count) = 0;      // count in, Size() * count out (rank r's at r * count)
  virtual Status ReduceScatter(uint64_t count) = 0;  // Size() * count in, this rank's summed chunk of count out
  virtual Status AllToAll(uint64_t count) = 0;       // chunk p of count elements to rank p; chunk q out from rank q
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
  // This node's address (node_addresses.h): other nodes' ranks connect to
  // it and this rank connects to them from it; ranks of the same node use
  // loopback (empty: advertise this host's first IPv4 address).
  std::string address;
  unsigned timeout_ms = 60000;  // any single wait for a peer
  // Monotonic seconds (clock.h) by which the backend must be done (0:
  // none): connecting and every transfer fail with Timeout past it. What
  // bounds one ring pair's measurement (pairs.cc), so a cut link fails its
  // pair in time instead of holding the others until nccl_timeout.
  double deadline = 0;
};
// TCP ring all-reduce between ranks (reduce-scatter then all-gather, n-1
// steps each, full duplex), the algorithm NCCL's ring uses, so the bus
// bandwidth formula holds; all-gather and reduce-scatter are the two
// halves alone. All-to-all relays chunks around the same ring (a chunk for
// the rank k hops away travels k links), so its busbw on the host backend
// is about 2/n of what a switched fabric would give: correct data, a
// pessimistic figure. Listen addresses are exchanged through `boot`.
Expected<std::unique_ptr<Backend>> MakeHostBackend(Bootstrap& boot, const HostOptions& opt);

struct NcclOptions {
  // dlopen names: the CUDA runtime as CudaRuntimeNames (dl_library.h) says
  // (the default, then CUDA 12's and 11's; a name the site set alone); nccl,
  // then libnccl.so. From the config: NcclOptionsFor.
  std::string cudart = kCudaRuntimeSoname;
  std::string nccl = "libnccl.so.2";
  int device = -1;  // -1: the bootstrap's local rank
};
// NCCL over CUDA, both dlopen'ed (one build runs on GPU-less nodes). The
// ncclUniqueId goes through `boot`. Unavailable with the library or device
// named when there is no usable GPU: callers turn that into a failure when a
// GPU check was asked for, never a pass.
Expected<std::unique_ptr<Backend>> MakeNcclBackend(Bootstrap& boot, const NcclOptions& opt);
// The config's cuda_runtime and nccl_library keys.
NcclOptions NcclOptionsFor(const Config& cfg);

// What the NCCL backend can see on this node without initialising NCCL:
// device count and name (for the node profile). Unavailable when CUDA can't load.
struct GpuInventory {
  int count = 0;
  std::string name;  // of device 0, e.g. "NVIDIA H100 80GB HBM3"
};
Expected<GpuInventory> ProbeGpus(const NcclOptions& opt);

}  // namespace preflight::collective
