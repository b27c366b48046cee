#include "ckpt_parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace preflight::ckpt_internal {

Status ParallelFor(size_t n, unsigned threads, const std::function<Status(size_t, unsigned)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  auto loop = [&](unsigned worker) {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status s = fn(i, worker);
      if (!s.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (!failed.exchange(true)) first = s;
        return;
      }
    }
  };
  unsigned t = static_cast<unsigned>(std::min<size_t>(std::max(1u, threads), std::max<size_t>(n, 1)));
  if (t <= 1) {
    loop(0);
    return first;
  }
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < t; ++w) pool.emplace_back(loop, w);
  loop(0);
  for (auto& th : pool) th.join();
  return first;
}

}  // namespace preflight::ckpt_internal
