// The collective operations the harness can sweep, and everything that
// depends only on the operation: its name, its bus-bandwidth factor, how a
// reported size becomes an element count, and the value every element must
// hold afterwards. The one owner of the vocabulary "all_reduce",
// "all_gather", "reduce_scatter", "all_to_all" (nccl-tests' binary names
// without _perf), so numbers compare with nccl-tests' tables.
//
// Size convention, as nccl-tests (doc/PERFORMANCE.md): the size of a row is
// the largest buffer a rank holds, the receive buffer for all_gather and
// the send buffer for reduce_scatter and all_to_all, i.e. n chunks of
// size/n bytes, rounded down to whole groups of 4 elements as nccl-tests
// does (its ALIGN); for all_reduce both buffers are the size. algbw is that
// size over the time, busbw = algbw * BusFactor: 2(n-1)/n for all_reduce,
// (n-1)/n for the other three. Matching nccl-tests rather than reporting
// per-rank chunks lets a site hold our table beside an nccl-tests run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight::collective {

enum class Op { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

const char* OpName(Op op);  // "all_reduce", ...
// One name, exactly as OpName writes it; InvalidArgument naming the choices.
Expected<Op> ParseOp(const std::string& name);
// "all", or names separated by commas, each at most once, in the order given.
Expected<std::vector<Op>> ParseOps(const std::string& list);
std::string OpsText(const std::vector<Op>& ops);  // "all_reduce,all_gather"
const std::vector<Op>& AllOps();                  // the order "all" runs them in

// busbw / algbw for n ranks (0 for n < 1; 0 for one rank, nothing crosses a link).
double BusFactor(Op op, int nranks);
// The count the backend is called with for a row of `bytes` (float32):
// all_reduce: bytes/4 elements each rank; all_gather: a chunk of bytes/n/4
// (down to a multiple of 4) sent by each rank; reduce_scatter: such a chunk
// received by each rank; all_to_all: such a chunk sent to each peer. 0:
// the size is below one aligned chunk per rank.
uint64_t OpCount(Op op, uint64_t bytes, int nranks);
// The size reported for `count` (OpCount's inverse, partial elements dropped).
uint64_t OpBytes(Op op, uint64_t count, int nranks);
// Elements in each rank's receive buffer after the operation.
uint64_t OutputCount(Op op, uint64_t count, int nranks);
// The value rank r puts at element i of its send buffer, for every
// operation (the buffer is set once); small integers so results are exact.
float OpInput(int rank, uint64_t i);
// The value rank `rank` must hold at element j of its receive buffer.
float OpExpected(Op op, int nranks, int rank, uint64_t count, uint64_t j);

}  // namespace preflight::collective
