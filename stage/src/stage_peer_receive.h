// A node's side towards its parent in the fan-out (private to
// stage/src): receive the stream, check every file, relay it on.
// Definitions in stage_peer_receive.cc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/stage_cache.h"
#include "preflight/stage_peer_options.h"
#include "stage_peer_net.h"
#include "stage_peer_serve.h"  // Relay

namespace preflight::stage_internal {

// ---- receiving from the parent ----------------------------------------------

class Receiver {
 public:
  // `key`: the dataset's cache key; `deadline`: the cache's (0: none).
  Receiver(const PeerOptions& p, const std::string& key, double deadline, Relay* relay)
      : p_(p), key_(key), deadline_(deadline), relay_(relay) {}
  bool streamed() const { return streamed_; }
  ~Receiver();

  // Tells the parent this node needs nothing (its cache had it).
  void SayHave();

  // Receives the parent's copy into `dst_dir_fd`/data (a tree or one
  // file), checking every file's hash and the manifest's totals, relaying
  // the stream on as it arrives. Unavailable when the parent can't be
  // reached or stalls; the caller falls back to the source.
  Status Receive(int dst_dir_fd, BuiltCopy* out, uint64_t* bytes);

 private:
  bool Hello(double wait);

  // Stream reads, forwarded to the relayed children as they arrive; each
  // by the stream's RateFloor (a parent slower than that is left).
  bool Read(void* p, size_t n, double idle);
  bool Frame(std::string* s, double idle);

  int ParentFd(int droot, const std::string& dir);

  Status RecvFile(int dirfd, const std::string& name, mode_t mode, uint64_t expect, long long mtime_sec,
                  unsigned mtime_nsec, std::vector<char>& buf, uint64_t* bytes, bool set_time);

  const PeerOptions& p_;
  std::string key_;
  double deadline_;
  RateFloor floor_;         // from the stream's start
  uint64_t received_ = 0;   // stream bytes so far
  Relay* relay_;
  bool streamed_ = false;
  int fd_ = -1;
  int parent_fd_ = -1;
  std::string parent_dir_;
  std::string why_;
};

}  // namespace preflight::stage_internal
