/* Test seam: an NCCL stand-in for one rank, as old as NCCL 2.6: the
 * collectives, but no ncclSend/ncclRecv (they came with 2.7), so
 * all_to_all must fail as a value naming the symbol. With one rank every
 * collective is a copy (a sum of one). ncclFloat32 = 7, ncclFloat64 = 8. */
#include <stddef.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
static int comm;

static size_t Size(int type) { return type == 8 ? 8 : 4; }
int ncclGetVersion(int* v) { *v = 20604; return 0; }
int ncclGetUniqueId(ncclUniqueId* id) { memset(id, 0, sizeof *id); return 0; }
int ncclCommInitRank(void** c, int n, ncclUniqueId id, int rank) { (void)id; *c = &comm; return n == 1 && rank == 0 ? 0 : 4; }
int ncclCommDestroy(void* c) { (void)c; return 0; }
int ncclCommAbort(void* c) { (void)c; return 0; }
const char* ncclGetErrorString(int r) { return r == 0 ? "no error" : "invalid argument (fake NCCL: one rank only)"; }
int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* c, void* st) {
  (void)op; (void)c; (void)st;
  memmove(r, s, n * Size(t));
  return 0;
}
int ncclAllGather(const void* s, void* r, size_t n, int t, void* c, void* st) {
  (void)c; (void)st;
  memmove(r, s, n * Size(t));
  return 0;
}
int ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, void* c, void* st) {
  (void)op; (void)c; (void)st;
  memmove(r, s, n * Size(t));
  return 0;
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
