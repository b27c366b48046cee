/* Test seam: a CUDA runtime stand-in with one "device" whose memory is host
 * memory (same ABI as fake_cudart_nodev.c), so the NCCL backend's own code
 * (buffers, offsets, counts) runs here behind a fake NCCL. */
#include <stdlib.h>
#include <string.h>

int cudaGetDeviceCount(int* n) { *n = 1; return 0; }
int cudaSetDevice(int d) { return d == 0 ? 0 : 101; }
int cudaMalloc(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
int cudaFree(void* p) { free(p); return 0; }
int cudaMemcpy(void* d, const void* s, size_t n, int k) { (void)k; memmove(d, s, n); return 0; }
static int stream;
int cudaStreamCreateWithFlags(void** s, unsigned f) { (void)f; *s = &stream; return 0; }
int cudaStreamSynchronize(void* s) { (void)s; return 0; }
int cudaStreamDestroy(void* s) { (void)s; return 0; }
const char* cudaGetErrorString(int e) { return e == 0 ? "no error" : "fake error"; }
int cudaDeviceGetPCIBusId(char* b, int n, int d) { (void)d; strncpy(b, "0000:00:00.0", (size_t)n); return 0; }
