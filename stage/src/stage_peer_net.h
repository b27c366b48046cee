// The peer fan-out's wire (private to stage/src): framing, timed reads
// and writes, connecting, the per-file hash, and the manifest lines a
// receiver accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/fileutil.h"
#include "preflight/stage_peer_options.h"

namespace preflight::stage_internal {


// Version 3: both ends prove who they are (stage_peer_hello.h); version 2
// added the beats before the stream. A peer of another version fails the
// hello (magic) and its child reads the source.
constexpr char kMagic[8] = {'P', 'F', 'P', 'E', 'E', 'R', '3', '\n'};
// After a child's "need", until its stream begins, the parent sends kBeat
// every kBeatPeriod seconds (it may be staging for a long time itself),
// then kGo and the stream. A child whose parent is silent for its idle
// bound (wait_parent, at least 1 s: four beats) takes it for dead or cut
// off and reads the source, instead of waiting until stage_timeout.
constexpr char kBeat = '.';
constexpr char kGo = '>';
constexpr double kBeatPeriod = 0.25;
constexpr size_t kChunk = 1 << 20;
constexpr uint32_t kMaxFrame = 1u << 30;

struct FileHead {  // before each file's bytes
  uint64_t size;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  uint32_t pad;
};

struct MLine {
  char type = 0;  // 'R' root dir, 'F' root file, 'd', 'f', 'l'
  uint32_t mode = 0;
  uint64_t size = 0;
  long long mtime_sec = 0;
  unsigned mtime_nsec = 0;
  std::string path, link;
};

// A per-file hash of the bytes as sent, in kChunk pieces (both ends cut
// the same pieces): XXH3 of each piece, seeded with the hash so far.
uint64_t ChunkHash(const char* p, size_t n, uint64_t h);

// Waits for `events` on fd until `deadline` (MonotonicSeconds; 0: none)
// or `idle` seconds (0: none). false with errno ETIMEDOUT.
bool WaitFd(int fd, short events, double deadline, double idle);

bool ReadFull(int fd, void* buf, size_t n, double deadline, double idle);

// After "need": reads the parent's beats up to kGo (the stream follows).
// false with errno from ReadFull (ETIMEDOUT: silent past `idle`), or EPROTO
// for any other byte.
bool AwaitStream(int fd, double deadline, double idle);

// To a peer's socket: core's WriteAll, a gone peer an error (EPIPE), not SIGPIPE.
inline bool WriteFull(int fd, const void* buf, size_t n) { return WriteAll(fd, buf, n, /*no_sigpipe=*/true); }

bool SendFrame(int fd, const std::string& s);

// A frame longer than `max` fails with EPROTO before anything is allocated.
bool RecvFrame(int fd, std::string* s, double deadline, double idle, uint32_t max = kMaxFrame);

// The slowest a stream may be (stage_peer.h): the first `bytes` of a
// stream that began at `start` (MonotonicSeconds) must have moved by
// Until(bytes); a read or write past that fails with ETIMEDOUT.
struct RateFloor {
  double start = 0;
  double Until(uint64_t bytes) const {
    return start + kPeerRateGrace + static_cast<double>(bytes) / static_cast<double>(kPeerMinRate);
  }
};
// The sooner of two deadlines, 0 meaning none.
inline double Sooner(double a, double b) { return a <= 0 ? b : b <= 0 ? a : (a < b ? a : b); }

// Writes all of buf by `until` (MonotonicSeconds), however slowly the peer
// reads: false with errno ETIMEDOUT past it, EPIPE when the peer is gone.
bool WriteBy(int fd, const void* buf, size_t n, double until);

// Resolves `host` (an IPv4 address or a name) to its IPv4 addresses.
bool ResolveIPv4(const std::string& host, std::vector<uint32_t>* addrs);

int ConnectOnce(const PeerEndpoint& ep, const std::string& from, double until);

// Retries refused connections (the parent's prolog may not listen yet).
// `from`: this node's own IPv4 address to connect from (empty: the kernel's choice).
int Connect(const PeerEndpoint& ep, double until, const std::string& from = "");

bool ParseLine(const std::string& l, MLine* m);

}  // namespace preflight::stage_internal
