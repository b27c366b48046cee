// stage_bench's shared parts (bench/ only): the command line and the
// helpers the small-file, large-file and peer fan-out benches share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/stage_user.h"  // StageIdentity

namespace stage_bench {

struct Args {
  std::string dir = "/tmp/pf-stage-bench";
  uint64_t files = 100000, file_size = 8192, large = 4, large_size = 1ull << 30;
  int reps = 3;
  unsigned workers = 0;
  bool verify_dirs = false;  // --verify dirs: stage_verify = dirs
  bool each = false;         // --each 1: print every timed run, not only the medians
  bool one_dir = false;      // --one-dir 1: every small file in one folder (stage_max_entries' memory)
  bool only_pf = false;      // --preflight-only 1: no cp, rsync, fpsync or floors (quick looks; no ratios)
  std::string tmpfs_size = "12G";
  std::string peers;  // "1,3,8": the peer fan-out bench
  uint64_t peer_files = 64, peer_file_size = 4 << 20;
  int netfs_us = -1;  // >= 0: the source through preflight-netfs
  unsigned netfs_inflight = 64, remote_workers = 32;
  std::string netfs_bandwidth;  // "": no cap
};

// Writes `size` bytes of a pattern that differs with `seed`.
bool Fill(const std::string& path, uint64_t size, uint64_t seed);
// Runs `cmd` with /bin/sh; its wall time (exits the bench on failure).
double Shell(const std::string& cmd);
void Clean(const std::string& p);
// Who reads the source: `nobody` when we are root, else ourselves.
preflight::StageIdentity Reader();
// Mounts `src` at SRC.net through preflight-netfs (--netfs-us ...).
std::string MountNetfs(const Args& a, const std::string& src);

// The peer fan-out bench (--peers; stage_bench_peers.cc).
int PeerBench(const Args& a);

}  // namespace stage_bench
