// NCCL backend: libcudart and libnccl are dlopen'ed into a struct of
// function pointers filled once; the headers under /usr/local/cuda/include
// give the exact types (decltype of the declarations) at build time only.
// A missing library or symbol is Unavailable with its name, never an abort:
// this code also runs on GPU-less nodes and inside root-run checks.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <mutex>

#include "preflight/collective.h"
#include "preflight/dl_library.h"

namespace preflight::collective {
namespace {

struct CudaApi {
  decltype(&::cudaGetDeviceCount) GetDeviceCount = nullptr;
  decltype(&::cudaSetDevice) SetDevice = nullptr;
  cudaError_t (*Malloc)(void**, size_t) = nullptr;  // cudaMalloc is overloaded in C++
  decltype(&::cudaFree) Free = nullptr;
  decltype(&::cudaMemcpy) Memcpy = nullptr;
  decltype(&::cudaStreamCreateWithFlags) StreamCreateWithFlags = nullptr;
  decltype(&::cudaStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cudaStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cudaGetErrorString) GetErrorString = nullptr;
  decltype(&::cudaDeviceGetPCIBusId) DeviceGetPCIBusId = nullptr;
};

struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  // Optional: only the operations that use them need them (ncclSend and
  // ncclRecv came with NCCL 2.7), so an older NCCL still runs all_reduce;
  // the operation that finds one null fails naming it (NcclBackend::Have).
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
};

// Driver API, only for the device name (profile matching); optional.
using CuInitFn = int (*)(unsigned);
using CuDeviceGetFn = int (*)(int*, int);
using CuDeviceGetNameFn = int (*)(char*, int, int);

struct Loaded {
  CudaApi cuda;
  NcclApi nccl;
  bool cuda_ok = false, nccl_ok = false;
  Status cuda_status, nccl_status;
  std::string nccl_name;  // the library asked for, for messages
};

// Loaded once per process (handles are kept for the process lifetime).
Loaded& Load(const NcclOptions& opt, bool want_nccl) {
  static Loaded l;
  static std::once_flag cuda_once, nccl_once;
  std::call_once(cuda_once, [&] {
    auto opened = OpenFirstLibrary(CudaRuntimeNames(opt.cudart));
    if (!opened) { l.cuda_status = Status::Unavailable("cannot load the CUDA runtime: " + opened.status().message()); return; }
    void* h = opened->handle;
    std::string miss;
    CudaApi& c = l.cuda;
    ResolveSymbol(h, "cudaGetDeviceCount", c.GetDeviceCount, &miss);
    ResolveSymbol(h, "cudaSetDevice", c.SetDevice, &miss);
    ResolveSymbol(h, "cudaMalloc", c.Malloc, &miss);
    ResolveSymbol(h, "cudaFree", c.Free, &miss);
    ResolveSymbol(h, "cudaMemcpy", c.Memcpy, &miss);
    ResolveSymbol(h, "cudaStreamCreateWithFlags", c.StreamCreateWithFlags, &miss);
    ResolveSymbol(h, "cudaStreamSynchronize", c.StreamSynchronize, &miss);
    ResolveSymbol(h, "cudaStreamDestroy", c.StreamDestroy, &miss);
    ResolveSymbol(h, "cudaGetErrorString", c.GetErrorString, &miss);
    ResolveSymbol(h, "cudaDeviceGetPCIBusId", c.DeviceGetPCIBusId, &miss);
    if (!miss.empty()) { l.cuda_status = Status::Unavailable(opened->name + ": missing symbols " + miss); return; }
    l.cuda_ok = true;
  });
  if (want_nccl) {
    std::call_once(nccl_once, [&] {
      // nccl_library (default libnccl.so.2), then the unversioned name a
      // development install has.
      auto opened = OpenFirstLibrary({opt.nccl, "libnccl.so"});
      if (!opened) { l.nccl_status = Status::Unavailable("cannot load NCCL: " + opened.status().message()); return; }
      void* h = opened->handle;
      std::string miss;
      NcclApi& n = l.nccl;
      ResolveSymbol(h, "ncclGetVersion", n.GetVersion, &miss);
      ResolveSymbol(h, "ncclGetUniqueId", n.GetUniqueId, &miss);
      ResolveSymbol(h, "ncclCommInitRank", n.CommInitRank, &miss);
      ResolveSymbol(h, "ncclCommDestroy", n.CommDestroy, &miss);
      ResolveSymbol(h, "ncclCommAbort", n.CommAbort, &miss);
      ResolveSymbol(h, "ncclAllReduce", n.AllReduce, &miss);
      ResolveSymbol(h, "ncclGetErrorString", n.GetErrorString, &miss);
      if (!miss.empty()) { l.nccl_status = Status::Unavailable(opt.nccl + ": missing symbols " + miss); return; }
      std::string optional;  // null where absent: see NcclApi
      ResolveSymbol(h, "ncclAllGather", n.AllGather, &optional);
      ResolveSymbol(h, "ncclReduceScatter", n.ReduceScatter, &optional);
      ResolveSymbol(h, "ncclGroupStart", n.GroupStart, &optional);
      ResolveSymbol(h, "ncclGroupEnd", n.GroupEnd, &optional);
      ResolveSymbol(h, "ncclSend", n.Send, &optional);
      ResolveSymbol(h, "ncclRecv", n.Recv, &optional);
      l.nccl_name = opt.nccl;
      l.nccl_ok = true;
    });
  }
  return l;
}

std::string Hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

bool Unhex(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n) return false;
  auto v = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  for (size_t i = 0; i < n; ++i) static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v(s[2 * i]) * 16 + v(s[2 * i + 1]));
  return true;
}

class NcclBackend : public Backend {
 public:
  NcclBackend(Loaded& l, int rank, int size, int device)
      : c_(l.cuda), n_(l.nccl), lib_(l.nccl_name), rank_(rank), size_(size), dev_(device) {}
  ~NcclBackend() override {
    if (comm_) n_.CommDestroy(comm_);
    if (send_) c_.Free(send_);
    if (recv_) c_.Free(recv_);
    if (ctl_) c_.Free(ctl_);
    if (stream_) c_.StreamDestroy(stream_);
  }

  Status Cuda(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) return Status::Ok();
    return Status::IOError("GPU" + std::to_string(dev_) + ": " + what + ": " + c_.GetErrorString(e));
  }
  Status Nccl(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return Status::Ok();
    return Status::IOError("GPU" + std::to_string(dev_) + " rank " + std::to_string(rank_) + ": " + what + ": " +
                           n_.GetErrorString(r));
  }

  // One AllGather on `boot`, also on failure (see kBackendGatherKey).
  Status Init(Bootstrap& boot) {
    Status s = Cuda(c_.SetDevice(dev_), "cudaSetDevice");
    char bus[32] = {0};
    if (s.ok() && c_.DeviceGetPCIBusId(bus, sizeof bus, dev_) == cudaSuccess) bus_ = bus;
    if (s.ok()) s = Cuda(c_.StreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ncclUniqueId id{};
    if (s.ok() && rank_ == 0) s = Nccl(n_.GetUniqueId(&id), "ncclGetUniqueId");
    auto ids = boot.AllGather(kBackendGatherKey, !s.ok() ? "error: " + s.message() : rank_ == 0 ? Hex(&id, sizeof id) : "ok");
    if (!s.ok()) return s;
    if (!ids) return ids.status().Context("exchanging the ncclUniqueId");
    for (size_t r = 0; r < ids->size(); ++r)
      if ((*ids)[r].rfind("error: ", 0) == 0) return Status::Failed("rank " + std::to_string(r) + ": " + (*ids)[r].substr(7));
    if (!Unhex((*ids)[0], &id, sizeof id)) return Status::IOError("bad ncclUniqueId from rank 0");
    if (!(s = Nccl(n_.CommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank")).ok()) return s;
    return Cuda(c_.Malloc(&ctl_, 64 * sizeof(double)), "cudaMalloc");
  }

  const char* Name() const override { return kNcclResultName; }
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string Device() const override { return "GPU" + std::to_string(dev_) + (bus_.empty() ? "" : " " + bus_); }

  // Called once per operation's sweep: buffers already large enough stay.
  Status Prepare(uint64_t max_count) override {
    if (send_ && recv_ && max_count <= max_) return Status::Ok();
    if (send_) c_.Free(send_);
    if (recv_) c_.Free(recv_);
    send_ = recv_ = nullptr;
    max_ = 0;
    Status s = Cuda(c_.Malloc(&send_, max_count * sizeof(float)), "cudaMalloc (send)");
    if (!s.ok()) return s;
    max_ = max_count;
    return Cuda(c_.Malloc(&recv_, max_count * sizeof(float)), "cudaMalloc (recv)");
  }
  Status SetInput(const float* host, uint64_t count) override {
    if (count > max_) return Status::InvalidArgument("nccl backend: input larger than prepared");
    return Cuda(c_.Memcpy(send_, host, count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  Status AllReduce(uint64_t count) override {
    return Nccl(n_.AllReduce(send_, recv_, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
  }
  Status AllGather(uint64_t count) override {
    Status s = Have(n_.AllGather, "ncclAllGather", "all_gather");
    if (!s.ok()) return s;
    return Nccl(n_.AllGather(send_, recv_, count, ncclFloat32, comm_, stream_), "ncclAllGather");
  }
  Status ReduceScatter(uint64_t count) override {
    Status s = Have(n_.ReduceScatter, "ncclReduceScatter", "reduce_scatter");
    if (!s.ok()) return s;
    return Nccl(n_.ReduceScatter(send_, recv_, count, ncclFloat32, ncclSum, comm_, stream_), "ncclReduceScatter");
  }
  // As nccl-tests' alltoall: one send and one receive per peer (itself
  // included) fused in a group, so they progress together.
  Status AllToAll(uint64_t count) override {
    Status s = Have(n_.GroupStart, "ncclGroupStart", "all_to_all");
    if (s.ok()) s = Have(n_.GroupEnd, "ncclGroupEnd", "all_to_all");
    if (s.ok()) s = Have(n_.Send, "ncclSend", "all_to_all");
    if (s.ok()) s = Have(n_.Recv, "ncclRecv", "all_to_all");
    if (!s.ok()) return s;
    if (!(s = Nccl(n_.GroupStart(), "ncclGroupStart")).ok()) return s;
    const float* in = static_cast<const float*>(send_);
    float* out = static_cast<float*>(recv_);
    for (int p = 0; p < size_ && s.ok(); ++p) {
      s = Nccl(n_.Send(in + count * p, count, ncclFloat32, p, comm_, stream_), "ncclSend");
      if (s.ok()) s = Nccl(n_.Recv(out + count * p, count, ncclFloat32, p, comm_, stream_), "ncclRecv");
    }
    Status end = Nccl(n_.GroupEnd(), "ncclGroupEnd");  // also after a failed call: the group must be closed
    return s.ok() ? end : s;
  }
  Status Wait() override { return Cuda(c_.StreamSynchronize(stream_), "cudaStreamSynchronize"); }
  Status GetOutput(float* host, uint64_t offset, uint64_t count) override {
    if (offset + count > max_) return Status::InvalidArgument("nccl backend: read past the buffer");
    return Cuda(c_.Memcpy(host, static_cast<float*>(recv_) + offset, count * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy D2H");
  }
  Status MaxAcrossRanks(std::vector<double>& v) override {
    if (v.size() > 64) return Status::InvalidArgument("nccl backend: too many control values");
    Status s = Cuda(c_.Memcpy(ctl_, v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    if (!s.ok()) return s;
    if (!(s = Nccl(n_.AllReduce(ctl_, ctl_, v.size(), ncclFloat64, ncclMax, comm_, stream_), "ncclAllReduce (control)")).ok())
      return s;
    if (!(s = Wait()).ok()) return s;
    return Cuda(c_.Memcpy(v.data(), ctl_, v.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }

 private:
  template <class F>
  Status Have(F fn, const char* symbol, const char* op) const {
    if (fn) return Status::Ok();
    return Status::Unavailable(lib_ + " has no " + symbol + " (an NCCL too old for it): " + op + " cannot run");
  }

  CudaApi& c_;
  NcclApi& n_;
  std::string lib_;
  int rank_, size_, dev_;
  std::string bus_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  void *send_ = nullptr, *recv_ = nullptr, *ctl_ = nullptr;
  uint64_t max_ = 0;
};

}  // namespace

NcclOptions NcclOptionsFor(const Config& cfg) {
  NcclOptions o;
  o.cudart = cfg.cuda_runtime;
  o.nccl = cfg.nccl.library;
  return o;
}

Expected<GpuInventory> ProbeGpus(const NcclOptions& opt) {
  Loaded& l = Load(opt, false);
  if (!l.cuda_ok) return l.cuda_status;
  int n = 0;
  cudaError_t e = l.cuda.GetDeviceCount(&n);
  if (e != cudaSuccess) return Status::Unavailable(std::string("cudaGetDeviceCount: ") + l.cuda.GetErrorString(e));
  GpuInventory inv;
  inv.count = n;
  // The name through the driver API (cuDeviceGetName has had one ABI since CUDA 2).
  if (void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    auto init = reinterpret_cast<CuInitFn>(::dlsym(h, "cuInit"));
    auto get = reinterpret_cast<CuDeviceGetFn>(::dlsym(h, "cuDeviceGet"));
    auto name = reinterpret_cast<CuDeviceGetNameFn>(::dlsym(h, "cuDeviceGetName"));
    int dev = 0;
    char buf[256] = {0};
    if (init && get && name && n > 0 && init(0) == 0 && get(&dev, 0) == 0 && name(buf, sizeof buf, dev) == 0) inv.name = buf;
  }
  return inv;
}

Expected<std::unique_ptr<Backend>> MakeNcclBackend(Bootstrap& boot, const NcclOptions& opt) {
  auto inv = ProbeGpus(opt);
  if (!inv) return FailBackendGather(boot, inv.status());
  int dev = opt.device >= 0 ? opt.device : boot.LocalRank();
  if (inv->count == 0) return FailBackendGather(boot, Status::Unavailable("no CUDA device visible (cudaGetDeviceCount = 0)"));
  if (dev >= inv->count)
    return FailBackendGather(boot, Status::Unavailable("rank " + std::to_string(boot.Rank()) + " on " + boot.Node() +
                                                       " wants GPU" + std::to_string(dev) + " but only " +
                                                       std::to_string(inv->count) + " are visible"));
  Loaded& l = Load(opt, true);
  if (!l.nccl_ok) return FailBackendGather(boot, l.nccl_status);
  auto b = std::make_unique<NcclBackend>(l, boot.Rank(), boot.Size(), dev);
  Status s = b->Init(boot);
  if (!s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace preflight::collective
