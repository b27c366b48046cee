// Reference for tests/gpu/run_nccl_check.sh: the plainest NCCL all-reduce
// loop (one process, ncclCommInitAll over NGPUS devices, grouped calls),
// timed as nccl-tests does (warm-up, then ITERS back-to-back operations
// between two stream synchronisations), float32 sum, out of place. Prints
// "bytes algbw_Bps busbw_Bps" per size, busbw = algbw * 2(n-1)/n.
//
//   nccl_ref_allreduce NGPUS WARMUP ITERS BYTES...
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
#define NCCL(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r)); return 1; } } while (0)

int main(int argc, char** argv) {
  if (argc < 5) { std::fprintf(stderr, "usage: %s NGPUS WARMUP ITERS BYTES...\n", argv[0]); return 2; }
  int n = std::atoi(argv[1]), warmup = std::atoi(argv[2]), iters = std::atoi(argv[3]);
  std::vector<size_t> sizes;
  size_t max = 0;
  for (int i = 4; i < argc; ++i) { sizes.push_back(std::strtoull(argv[i], nullptr, 10)); if (sizes.back() > max) max = sizes.back(); }
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<float*> send(n), recv(n);
  std::vector<cudaStream_t> streams(n);
  for (int i = 0; i < n; ++i) {
    CUDA(cudaSetDevice(i));
    CUDA(cudaMalloc(reinterpret_cast<void**>(&send[i]), max));
    CUDA(cudaMalloc(reinterpret_cast<void**>(&recv[i]), max));
    CUDA(cudaMemset(send[i], 0, max));
    CUDA(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  auto run = [&](size_t count, int times) -> int {
    for (int t = 0; t < times; ++t) {
      NCCL(ncclGroupStart());
      for (int i = 0; i < n; ++i) NCCL(ncclAllReduce(send[i], recv[i], count, ncclFloat32, ncclSum, comms[i], streams[i]));
      NCCL(ncclGroupEnd());
    }
    for (int i = 0; i < n; ++i) { CUDA(cudaSetDevice(i)); CUDA(cudaStreamSynchronize(streams[i])); }
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
  for (int i = 0; i < n; ++i) ncclCommDestroy(comms[i]);
  return 0;
}
