// ckpt_bench: the pieces bench/ckpt_bench.sh times, each a subcommand so
// that the script can run them side by side with dd on one throttled tier.
//
//   ckpt_bench write DIR NAME BYTES FILES   a checkpoint as a trainer saves
//       one: FILES files totalling BYTES written with write(2) in 4 MiB
//       blocks and fsynced, then the COMPLETE marker. Prints the seconds the
//       "training process" was blocked.
//   ckpt_bench persist LOCAL TIER [IOCLASS]  one PersistRound of LOCAL's
//       complete checkpoints to TIER as one node (exactly what preflight-run's
//       agent and the epilog run), at the I/O class (idle|low|normal).
//       Prints seconds, bytes and bytes per second of the copy.
//   ckpt_bench spin SECONDS                  a CPU-bound "training step" loop
//       for SECONDS; prints iterations per second.
// Timings are printed, never asserted.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "preflight/ckpt_config.h"
#include "preflight/ckpt_job.h"
#include "preflight/clock.h"
#include "preflight/fileutil.h"

namespace {

using preflight::MonotonicSeconds;

int Usage() {
  std::fprintf(stderr,
               "usage: ckpt_bench write DIR NAME BYTES FILES | persist LOCAL TIER [idle|low|normal] | spin SECONDS\n");
  return 2;
}

int Write(const std::string& dir, const std::string& name, uint64_t bytes, uint64_t files) {
  std::string root = dir + "/" + name;
  if (!preflight::MakeDirs(root, 0755).ok()) return 1;
  std::vector<char> block(4 << 20);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 2654435761u >> 13);
  double t0 = MonotonicSeconds();
  uint64_t per = files ? bytes / files : bytes;
  for (uint64_t f = 0; f < files; ++f) {
    std::string path = root + "/shard-" + std::to_string(f) + ".pt";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { std::perror(path.c_str()); return 1; }
    for (uint64_t done = 0; done < per;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), per - done));
      block[0] = static_cast<char>(f + done);  // not all-equal blocks
      if (!preflight::WriteAll(fd, block.data(), n)) { std::perror(path.c_str()); return 1; }
      done += n;
    }
    if (::fsync(fd) != 0) { std::perror("fsync"); return 1; }
    ::close(fd);
  }
  int dfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { ::fsync(dfd); ::close(dfd); }
  int m = ::open((root + "/COMPLETE").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (m < 0) return 1;
  ::fsync(m);
  ::close(m);
  std::printf("blocked_seconds %.3f\n", MonotonicSeconds() - t0);
  return 0;
}

int Persist(const std::string& local, const std::string& tier, const std::string& io) {
  auto c = preflight::ParseCkptIoClass(io);
  if (!c) { std::fprintf(stderr, "%s\n", c.status().message().c_str()); return 2; }
  if (auto st = preflight::SetCkptIoClass(*c); !st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
  preflight::CkptPlan plan;
  plan.tier = tier;
  plan.run = "1.0";
  plan.nodes = {"bench"};
  plan.keep_local = 1000;
  double t0 = MonotonicSeconds();
  auto r = preflight::PersistRound(local, plan, "bench", preflight::CkptRoundOptions{});
  double s = MonotonicSeconds() - t0;
  if (!r) { std::fprintf(stderr, "persist: %s\n", r.status().message().c_str()); return 1; }
  uint64_t bytes = 0;
  for (const auto& rec : r->records) {
    if (rec.state == preflight::CkptState::kFailed) { std::fprintf(stderr, "persist: %s\n", rec.error.c_str()); return 1; }
    bytes += rec.bytes;
  }
  if (r->newest_durable.empty()) { std::fprintf(stderr, "persist: nothing durable\n"); return 1; }
  std::printf("persist_seconds %.3f\npersist_bytes %llu\npersist_bytes_per_second %.0f\n", s,
              static_cast<unsigned long long>(bytes), s > 0 ? bytes / s : 0.0);
  return 0;
}

int Spin(double seconds) {
  volatile uint64_t x = 88172645463325252ull;
  uint64_t iters = 0;
  double t0 = MonotonicSeconds(), now = t0;
  while (now - t0 < seconds) {
    for (int i = 0; i < 100000; ++i) {  // xorshift: pure CPU, no memory traffic
      uint64_t v = x;
      v ^= v << 13;
      v ^= v >> 7;
      v ^= v << 17;
      x = v;
    }
    iters += 100000;
    now = MonotonicSeconds();
  }
  std::printf("spin_iterations_per_second %.0f\n", iters / (now - t0));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 5 && a[0] == "write")
    return Write(a[1], a[2], std::strtoull(a[3].c_str(), nullptr, 10), std::strtoull(a[4].c_str(), nullptr, 10));
  if ((a.size() == 3 || a.size() == 4) && a[0] == "persist") return Persist(a[1], a[2], a.size() == 4 ? a[3] : "low");
  if (a.size() == 2 && a[0] == "spin") return Spin(std::strtod(a[1].c_str(), nullptr));
  return Usage();
}
