/* A fake CUDA runtime + cuBLAS for gpu.gemm's tests (checks/src/gemm_run.cc):
 * the subset of libcudart and libcublas the GEMM soak calls, with their C
 * ABI, in one library that both config keys (cuda_runtime, cublas_library)
 * point at, loaded through the check's normal dlopen path. Device memory is
 * host memory; cublasGemmEx really multiplies the FP16 matrices on the host
 * (tests use small N), so the output and its hash are real. Time is not:
 * each GPU has a virtual clock that a GEMM advances by 2*M*N*K / its
 * scripted FLOPS rate, and CUDA events read that clock, so a "slow" GPU is
 * slow to the check without the test waiting.
 *
 * Scripted by PREFLIGHT_FAKE_GEMM, read at the first call, ';'-separated:
 *   gpus=N          devices (default 8; 0: cudaGetDeviceCount says 0)
 *   tflops=X        every GPU's rate (default 700)
 *   slow=G:X        GPU G runs at X TFLOPS (repeatable)
 *   corrupt=G       GPU G flips one output bit on every GEMM
 *   corrupt_late=G  ... from its second GEMM on (wrong only when hot)
 *   fail=G:STATUS   cublasGemmEx on GPU G returns STATUS (e.g. 13:
 *                   CUBLAS_STATUS_EXECUTION_FAILED)
 *   sync_fail=G:ERR cudaStreamSynchronize on GPU G returns ERR (e.g. 719:
 *                   a kernel faulted, as after an Xid)
 *   create_fail=G:STATUS cublasCreate_v2 on GPU G returns STATUS (e.g. 1:
 *                   CUBLAS_STATUS_NOT_INITIALIZED, a driver/library mismatch)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXG 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_count = 8;
static double g_tflops[MAXG];
static int g_corrupt[MAXG];   /* 1: always, 2: from the second GEMM */
static int g_fail[MAXG];
static int g_sync_fail[MAXG];
static int g_create_fail[MAXG];
static double g_clock_ms[MAXG];  /* each GPU's virtual clock; one thread per GPU uses it */
static int g_gemms[MAXG];
static __thread int t_dev;

static void parse(void) {
  for (int i = 0; i < MAXG; ++i) g_tflops[i] = 700;
  const char* env = getenv("PREFLIGHT_FAKE_GEMM");
  if (env == NULL) return;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", env);
  for (char* save = NULL, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    int g = 0;
    double x = 0;
    if (sscanf(tok, "gpus=%d", &g) == 1) g_count = g < 0 ? 0 : g > MAXG ? MAXG : g;
    else if (sscanf(tok, "tflops=%lf", &x) == 1) for (int i = 0; i < MAXG; ++i) g_tflops[i] = x;
    else if (sscanf(tok, "slow=%d:%lf", &g, &x) == 2 && g >= 0 && g < MAXG) g_tflops[g] = x;
    else if (sscanf(tok, "corrupt_late=%d", &g) == 1 && g >= 0 && g < MAXG) g_corrupt[g] = 2;
    else if (sscanf(tok, "corrupt=%d", &g) == 1 && g >= 0 && g < MAXG) g_corrupt[g] = 1;
    else if (sscanf(tok, "fail=%d:%lf", &g, &x) == 2 && g >= 0 && g < MAXG) g_fail[g] = (int)x;
    else if (sscanf(tok, "sync_fail=%d:%lf", &g, &x) == 2 && g >= 0 && g < MAXG) g_sync_fail[g] = (int)x;
    else if (sscanf(tok, "create_fail=%d:%lf", &g, &x) == 2 && g >= 0 && g < MAXG) g_create_fail[g] = (int)x;
  }
}
static void init(void) { pthread_once(&g_once, parse); }

/* ---- cudart: cudaError_t is int, 0 success, 101 invalid device. ---- */
EXPORT const char* cudaGetErrorString(int e) {
  return e == 0 ? "no error" : e == 101 ? "invalid device ordinal" : e == 719 ? "unspecified launch failure" : "unknown error";
}
EXPORT int cudaGetDeviceCount(int* n) { init(); *n = g_count; return 0; }
EXPORT int cudaSetDevice(int d) { init(); if (d < 0 || d >= g_count) return 101; t_dev = d; return 0; }
EXPORT int cudaMalloc(void** p, size_t n) { *p = calloc(1, n ? n : 1); return *p ? 0 : 2; }
EXPORT int cudaFree(void* p) { free(p); return 0; }
EXPORT int cudaMemcpy(void* dst, const void* src, size_t n, int kind) { (void)kind; memcpy(dst, src, n); return 0; }
EXPORT int cudaDeviceSynchronize(void) { return 0; }
/* The buses fake_nvml.c gives its GPUs, in the same order (CUDA = NVML index here). */
static const unsigned kBus[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
EXPORT int cudaDeviceGetPCIBusId(char* id, int len, int d) {
  if (d < 0 || d >= g_count) return 101;
  snprintf(id, (size_t)len, "0000:%02X:00.0", d < 8 ? kBus[d] : (unsigned)(0xe0 + d));
  return 0;
}

struct fake_stream { int dev; };
struct fake_event { double ms; int dev; };
EXPORT int cudaStreamCreate(struct fake_stream** s) { *s = malloc(sizeof **s); (*s)->dev = t_dev; return 0; }
EXPORT int cudaStreamDestroy(struct fake_stream* s) { free(s); return 0; }
EXPORT int cudaStreamSynchronize(struct fake_stream* s) { return g_sync_fail[s->dev]; }
EXPORT int cudaEventCreate(struct fake_event** e) { *e = calloc(1, sizeof **e); return 0; }
EXPORT int cudaEventDestroy(struct fake_event* e) { free(e); return 0; }
EXPORT int cudaEventRecord(struct fake_event* e, struct fake_stream* s) {
  e->dev = s ? s->dev : t_dev;
  e->ms = g_clock_ms[e->dev];
  return 0;
}
EXPORT int cudaEventSynchronize(struct fake_event* e) { (void)e; return 0; }
EXPORT int cudaEventElapsedTime(float* ms, struct fake_event* a, struct fake_event* b) {
  *ms = (float)(b->ms - a->ms);
  return 0;
}

/* ---- cuBLAS: cublasStatus_t is int, 0 success. ---- */
struct fake_handle { int dev; struct fake_stream* stream; };
EXPORT int cublasCreate_v2(struct fake_handle** h) {
  init();
  if (g_create_fail[t_dev]) return g_create_fail[t_dev];
  *h = calloc(1, sizeof **h);
  (*h)->dev = t_dev;
  return 0;
}
EXPORT int cublasDestroy_v2(struct fake_handle* h) { free(h); return 0; }
EXPORT int cublasSetStream_v2(struct fake_handle* h, struct fake_stream* s) { h->stream = s; return 0; }
EXPORT const char* cublasGetStatusString(int s) {
  return s == 0 ? "CUBLAS_STATUS_SUCCESS" : s == 1 ? "CUBLAS_STATUS_NOT_INITIALIZED" : s == 13 ? "CUBLAS_STATUS_EXECUTION_FAILED" : s == 14 ? "CUBLAS_STATUS_INTERNAL_ERROR" : "CUBLAS_STATUS_UNKNOWN";
}

static float half_to_float(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? m / 1024.0f / 16384.0f : (1 + m / 1024.0f) * (float)(1u << e) / 32768.0f;
  return s ? -v : v;
}

/* Column-major, no transposes, FP16 A and B (CUDA_R_16F = 2), FP32 C
 * (CUDA_R_32F = 0), FP32 compute (CUBLAS_COMPUTE_32F = 68): all the check asks. */
EXPORT int cublasGemmEx(struct fake_handle* h, int ta, int tb, int m, int n, int k, const void* alpha,
                        const void* A, int at, int lda, const void* B, int bt, int ldb, const void* beta, void* C,
                        int ct, int ldc, int compute, int algo) {
  (void)algo;
  int d = h->dev;
  if (g_fail[d]) return g_fail[d];
  if (ta || tb || at != 2 || bt != 2 || ct != 0 || compute != 68) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  const uint16_t* a = A;
  const uint16_t* b = B;
  float* c = C;
  float al = *(const float*)alpha, be = *(const float*)beta;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float acc = 0;
      for (int p = 0; p < k; ++p) acc += half_to_float(a[i + (size_t)p * lda]) * half_to_float(b[p + (size_t)j * ldb]);
      c[i + (size_t)j * ldc] = al * acc + be * c[i + (size_t)j * ldc];
    }
  if (g_corrupt[d] == 1 || (g_corrupt[d] == 2 && g_gemms[d] > 0)) {
    uint32_t bits;
    memcpy(&bits, &c[0], 4);
    bits ^= 1u << 3;
    memcpy(&c[0], &bits, 4);
  }
  ++g_gemms[d];
  g_clock_ms[d] += 2.0 * m * n * k / (g_tflops[d] * 1e12) * 1e3;
  return 0;
}
