// A small, bounded client of NCCL's RAS socket (NCCL 2.24+): one STATUS
// query, as NCCL's own `ncclras` makes it, for preflight-run's hang
// attribution (hang_probe.h). Never VERBOSE STATUS (it corrupted memory in
// large jobs before 2.29.2, NVIDIA/nccl#1762), never MONITOR, never a
// steady poll: the probe asks only once a stall alert fired.
//
// The protocol (NCCL src/ras/client_support.cc, read for issue 31): text
// lines ending in '\n'. "CLIENT PROTOCOL 2" -> "SERVER PROTOCOL 2";
// "SET FORMAT json" -> "OK" (2.28.7+) or "ERROR: Unknown command ..."
// (older: the text report is read instead); "STATUS" -> the report, then
// the server closes the connection (no terminator; one STATUS per
// connection).
//
// Trust: the socket is asked only when the listening socket at that
// address belongs to the job's user (its uid in /proc/net/tcp or tcp6,
// read through the injectable FsRoot): another user's process on a shared
// node can't feed this job's attribution. Bounds: connect and each
// handshake line within connect_s, the whole report within reply_s, at
// most max_bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "preflight/fsroot.h"
#include "preflight/ras_status.h"
#include "preflight/status.h"

namespace preflight {

inline constexpr uint16_t kRasDefaultPort = 28028;

struct RasEndpoint {
  std::string host = "localhost";  // a name, an IPv4 literal or an IPv6 literal (brackets removed)
  uint16_t port = kRasDefaultPort;
  std::string Text() const;        // "127.0.0.1:28100", "[::1]:28028"
};

// NCCL_RAS_ADDR's syntax: "HOST:PORT", "[V6]:PORT"; HOST alone keeps the
// default port. Errors name the value.
Expected<RasEndpoint> ParseRasAddr(const std::string& s);

struct RasQueryOptions {
  RasEndpoint ep;
  double connect_s = 3;       // connect, and each handshake reply
  double reply_s = 20;        // the whole STATUS report (RAS gathers for up to ~10 s)
  size_t max_bytes = kRasMaxReplyBytes;
  bool check_owner = true;    // refuse a listener not owned by `uid`
  uid_t uid = 0;
  const FsRoot* fs = nullptr; // for /proc/net/tcp{,6}; null: the real root
};

struct RasReply {
  std::string text;           // the report as received
  std::string format;         // "json" or "text"
  std::string address;        // the address that answered
};

// One STATUS. Errors are one line naming the address and the cause:
// "127.0.0.1:28100: no reply within 20 s", "...: listening socket owned by
// uid 1001, not this job's user 1000", "...: reply over 8388608 bytes".
Expected<RasReply> QueryRas(const RasQueryOptions& o);

// The uid of the TCP socket listening on addr:port (an IPv4 or IPv6
// literal), from /proc/net/tcp or /proc/net/tcp6 under fs; a listener on
// the wildcard address counts. NotFound when nothing listens there.
Expected<uid_t> TcpListenerUid(const FsRoot& fs, const std::string& addr, uint16_t port);

}  // namespace preflight
