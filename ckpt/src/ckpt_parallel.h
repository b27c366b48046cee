// Many operations in flight (private to ckpt/src): the copy's pieces and
// the verification's files run on a few threads. Definitions in
// ckpt_parallel.cc.
#pragma once

#include <cstddef>
#include <functional>

#include "preflight/status.h"

namespace preflight::ckpt_internal {

// Runs fn(i, worker) for every i in [0, n), in order of i as workers free
// up, on min(threads, n) threads (worker in [0, threads): an index for
// per-thread buffers). The first failure stops new items from starting
// and is returned once the running ones have ended.
Status ParallelFor(size_t n, unsigned threads, const std::function<Status(size_t, unsigned)>& fn);

}  // namespace preflight::ckpt_internal
