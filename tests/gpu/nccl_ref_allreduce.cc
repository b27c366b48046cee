// Reference for tests/gpu/run_nccl_check.sh: the plainest NCCL all-reduce
// loop (one process, ncclCommInitAll over NGPUS devices, grouped calls),
// timed as nccl-tests does (warm-up, then ITERS back-to-back operations
// between two stream synchronisations), float32 sum, out of place. Prints
// "bytes algbw_Bps busbw_Bps" per size, busbw = algbw * 2(n-1)/n.
//
//   nccl_ref_allreduce NGPUS WARMUP ITERS BYTES...
//   env: REF_CUDART (default libcudart.so.13, then .12), REF_NCCL (default libnccl.so.2)
//
// Built here by CMake (target nccl-ref-allreduce) against the real CUDA and
// NCCL headers under CUDA_ROOT (types only, decltype of their
// declarations); both libraries are dlopen'ed at run time, so the binary
// travels in the GPU bundle (tests/gpu/bundle.sh) and loads the GPU
// machine's own CUDA runtime and NCCL (e.g. a Python wheel's libnccl.so.2,
// named by path). The calls used have kept their ABI across NCCL 2.x and
// CUDA 11..13.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
struct Api {
  decltype(&::cudaSetDevice) SetDevice;
  cudaError_t (*Malloc)(void**, size_t);  // cudaMalloc is overloaded in C++
  decltype(&::cudaMemset) Memset;
  decltype(&::cudaStreamCreateWithFlags) StreamCreateWithFlags;
  decltype(&::cudaStreamSynchronize) StreamSynchronize;
  decltype(&::cudaGetErrorString) GetErrorString;
  decltype(&::ncclGetVersion) GetVersion;
  decltype(&::ncclCommInitAll) CommInitAll;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclGroupStart) GroupStart;
  decltype(&::ncclGroupEnd) GroupEnd;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclGetErrorString) NcclErrorString;
} api;

void* Open(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
    std::fprintf(stderr, "nccl_ref_allreduce: %s\n", ::dlerror());
  }
  return nullptr;
}

template <class T>
bool Sym(void* h, const char* name, T& out) {
  out = reinterpret_cast<T>(::dlsym(h, name));
  if (!out) std::fprintf(stderr, "nccl_ref_allreduce: missing symbol %s\n", name);
  return out != nullptr;
}

bool Load() {
  const char* cu = std::getenv("REF_CUDART");
  const char* nc = std::getenv("REF_NCCL");
  void* c = Open(cu && *cu ? std::vector<std::string>{cu} : std::vector<std::string>{"libcudart.so.13", "libcudart.so.12"});
  void* n = Open({nc && *nc ? nc : "libnccl.so.2"});
  if (!c || !n) return false;
  return Sym(c, "cudaSetDevice", api.SetDevice) & Sym(c, "cudaMalloc", api.Malloc) & Sym(c, "cudaMemset", api.Memset) &
         Sym(c, "cudaStreamCreateWithFlags", api.StreamCreateWithFlags) &
         Sym(c, "cudaStreamSynchronize", api.StreamSynchronize) & Sym(c, "cudaGetErrorString", api.GetErrorString) &
         Sym(n, "ncclGetVersion", api.GetVersion) & Sym(n, "ncclCommInitAll", api.CommInitAll) &
         Sym(n, "ncclCommDestroy", api.CommDestroy) & Sym(n, "ncclGroupStart", api.GroupStart) &
         Sym(n, "ncclGroupEnd", api.GroupEnd) & Sym(n, "ncclAllReduce", api.AllReduce) &
         Sym(n, "ncclGetErrorString", api.NcclErrorString);
}
}  // namespace

#define CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, api.GetErrorString(e)); return 1; } } while (0)
#define NCCL(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { std::fprintf(stderr, "%s: %s\n", #x, api.NcclErrorString(r)); return 1; } } while (0)

int main(int argc, char** argv) {
  if (argc < 5) { std::fprintf(stderr, "usage: %s NGPUS WARMUP ITERS BYTES...\n", argv[0]); return 2; }
  if (!Load()) return 3;
  int version = 0;
  NCCL(api.GetVersion(&version));
  std::fprintf(stderr, "nccl_ref_allreduce: NCCL %d (built with the headers of %d)\n", version, NCCL_VERSION_CODE);
  int n = std::atoi(argv[1]), warmup = std::atoi(argv[2]), iters = std::atoi(argv[3]);
  std::vector<size_t> sizes;
  size_t max = 0;
  for (int i = 4; i < argc; ++i) { sizes.push_back(std::strtoull(argv[i], nullptr, 10)); if (sizes.back() > max) max = sizes.back(); }
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL(api.CommInitAll(comms.data(), n, devs.data()));
  std::vector<float*> send(n), recv(n);
  std::vector<cudaStream_t> streams(n);
  for (int i = 0; i < n; ++i) {
    CUDA(api.SetDevice(i));
    CUDA(api.Malloc(reinterpret_cast<void**>(&send[i]), max));
    CUDA(api.Malloc(reinterpret_cast<void**>(&recv[i]), max));
    CUDA(api.Memset(send[i], 0, max));
    CUDA(api.StreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  auto run = [&](size_t count, int times) -> int {
    for (int t = 0; t < times; ++t) {
      NCCL(api.GroupStart());
      for (int i = 0; i < n; ++i) NCCL(api.AllReduce(send[i], recv[i], count, ncclFloat32, ncclSum, comms[i], streams[i]));
      NCCL(api.GroupEnd());
    }
    for (int i = 0; i < n; ++i) { CUDA(api.SetDevice(i)); CUDA(api.StreamSynchronize(streams[i])); }
    return 0;
  };
  for (size_t bytes : sizes) {
    size_t count = bytes / sizeof(float);
    if (run(count, warmup)) return 1;
    auto t0 = std::chrono::steady_clock::now();
    if (run(count, iters)) return 1;
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double algbw = count * sizeof(float) / sec;
    std::printf("%zu %.6e %.6e\n", count * sizeof(float), algbw, algbw * 2.0 * (n - 1) / n);
  }
  for (int i = 0; i < n; ++i) api.CommDestroy(comms[i]);
  return 0;
}
