/* Test seam: a CUDA runtime stand-in with the ABI of the calls preflight's
 * NCCL backend resolves (cudaError_t is an int-sized enum, cudaSuccess = 0,
 * cudaErrorNoDevice = 100), reporting a machine with no GPU. A real CPU-only
 * node with the CUDA runtime installed behaves the same way. */
#include <stddef.h>

int cudaGetDeviceCount(int* n) { *n = 0; return 0; }
int cudaSetDevice(int d) { (void)d; return 100; }
int cudaMalloc(void** p, size_t n) { (void)p; (void)n; return 100; }
int cudaFree(void* p) { (void)p; return 0; }
int cudaMemcpy(void* d, const void* s, size_t n, int k) { (void)d; (void)s; (void)n; (void)k; return 100; }
int cudaStreamCreateWithFlags(void** s, unsigned f) { (void)s; (void)f; return 100; }
int cudaStreamSynchronize(void* s) { (void)s; return 100; }
int cudaStreamDestroy(void* s) { (void)s; return 0; }
const char* cudaGetErrorString(int e) { return e == 100 ? "no CUDA-capable device is detected" : "unknown error"; }
int cudaDeviceGetPCIBusId(char* b, int n, int d) { (void)b; (void)n; (void)d; return 100; }
