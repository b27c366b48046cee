// A node's side towards its children in the fan-out (private to
// stage/src): the relay of the stream it is receiving, and the server of
// its published copy. Definitions in stage_peer_serve.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "preflight/stage_cache.h"
#include "preflight/stage_peer_options.h"
#include "stage_peer_net.h"

namespace preflight::stage_internal {

// ---- relaying while receiving ----------------------------------------------
// Children that connected before this node's own stream began get that
// stream forwarded byte for byte as it arrives (they check every file's
// hash themselves), so a chain of nodes copies at once, not hop by hop.
// Children that come later, or whose relay broke, get the published copy.
struct Relay {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> fds;  // joined children
  std::map<int, std::pair<RateFloor, uint64_t>> pace;  // per joined child: its floor, bytes sent
  double deadline = 0;   // the cache's: no write to a child outlives it
  bool started = false;  // the stream began or the relay ended: no more joins
  bool begun = false;    // the stream began (Start): joined children got kGo
  int result = 0;        // 0 running, 1 complete, 2 broken

  enum class Outcome {
    kRelayed,     // `fd` got the whole stream
    kNotStarted,  // the relay ended before its stream began: `fd` got no byte of it
    kBroken,      // `fd` got part of it, or its child is gone
  };
  bool Join(int fd);
  // Blocks until the relay that took `fd` ends, sending `fd` a beat every
  // kBeatPeriod until the stream begins.
  Outcome Wait(int fd);
  // This node's own stream began: kGo to every joined child.
  void Start();
  // Forwards to every joined child; a child that can't keep up (RateFloor,
  // the deadline) is dropped.
  void Forward(const void* p, size_t n);
  void End(bool ok);
};

// ---- serving a published copy ---------------------------------------------

class PeerServer {
 public:
  // `key`: the dataset's cache key; `deadline`: the cache's (0: none), past
  // which no child is served.
  PeerServer(const PeerOptions& p, std::string key, double deadline, Relay* relay)
      : p_(p), key_(std::move(key)), deadline_(deadline), relay_(relay) {}
  ~PeerServer() { Stop(); }

  // Listens on this node's port. When the port is taken, *squatted says
  // whether a user (not root) holds it: an attack, said so in the message.
  Status Start(bool* squatted);

  void SetReady(const std::string& vdir);
  void SetFailed();

  // Until `expected` children are done, none connected for wait_children
  // seconds since the copy was ready, or the deadline.
  void WaitChildren(size_t expected, double deadline);

  void Stop();

  std::atomic<unsigned> refused{0}, served{0}, relayed{0};
  std::atomic<uint64_t> served_bytes{0};

 private:
  void AcceptLoop();

  // done: this child needs nothing more from us (it may still come back
  // after a broken relay: not done).
  void Finish(bool done);

  void Handle(int fd);

  bool Stream(int fd, const std::string& vdir);

  const PeerOptions& p_;
  std::string key_;
  double deadline_;
  Relay* relay_;
  int lfd_ = -1;
  bool owned_ = false;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  int state_ = 0;  // 0 staging, 1 ready, 2 failed
  std::string vdir_;
  size_t done_ = 0, active_ = 0;
};

}  // namespace preflight::stage_internal
