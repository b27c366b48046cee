#include "stage_peer_net.h"

#include <xxhash.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_spec.h"

namespace preflight::stage_internal {

// A per-file hash of the bytes as sent, in kChunk pieces (both ends cut
// the same pieces): XXH3 of each piece, seeded with the hash so far.
uint64_t ChunkHash(const char* p, size_t n, uint64_t h) { return XXH3_64bits_withSeed(p, n, h); }

// Waits for `events` on fd until `deadline` (MonotonicSeconds; 0: none)
// or `idle` seconds (0: none). false with errno ETIMEDOUT.
bool WaitFd(int fd, short events, double deadline, double idle) {
  for (;;) {
    double now = MonotonicSeconds();
    double until = 0;
    if (deadline > 0) until = deadline;
    if (idle > 0 && (until == 0 || now + idle < until)) until = now + idle;
    int ms = -1;
    if (until > 0) {
      if (until <= now) { errno = ETIMEDOUT; return false; }
      ms = static_cast<int>(std::min((until - now) * 1000 + 1, 60000.0));
    }
    struct pollfd p = {fd, events, 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
    if (r == 0 && until > 0 && MonotonicSeconds() >= until) { errno = ETIMEDOUT; return false; }
  }
}

bool ReadFull(int fd, void* buf, size_t n, double deadline, double idle) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    if (!WaitFd(fd, POLLIN, deadline, idle)) return false;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) { if (k == 0) errno = ECONNRESET; return false; }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool AwaitStream(int fd, double deadline, double idle) {
  for (char c = 0; c != kGo;) {
    if (!ReadFull(fd, &c, 1, deadline, idle)) return false;
    if (c != kGo && c != kBeat) { errno = EPROTO; return false; }
  }
  return true;
}

bool SendFrame(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return WriteFull(fd, &n, sizeof n) && WriteFull(fd, s.data(), s.size());
}

bool RecvFrame(int fd, std::string* s, double deadline, double idle, uint32_t max) {
  uint32_t n;
  if (!ReadFull(fd, &n, sizeof n, deadline, idle)) return false;
  if (n > max) { errno = EPROTO; return false; }
  s->resize(n);
  return ReadFull(fd, s->data(), n, deadline, idle);
}

bool WriteBy(int fd, const void* buf, size_t n, double until) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFd(fd, POLLOUT, until, 0)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool ResolveIPv4(const std::string& host, std::vector<uint32_t>* addrs) {
  addrs->clear();
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  for (struct addrinfo* a = res; a; a = a->ai_next)
    addrs->push_back(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
  ::freeaddrinfo(res);
  return !addrs->empty();
}

int ConnectOnce(const PeerEndpoint& ep, const std::string& from, double until) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0 || !res) {
    errno = EHOSTUNREACH;
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && !from.empty()) {
    // From this node's own address (a name resolves to its first), so
    // the parent sees the address the job's node list gives this node.
    struct sockaddr_in me {};
    me.sin_family = AF_INET;
    std::vector<uint32_t> mine;
    if (!ResolveIPv4(from, &mine)) errno = EADDRNOTAVAIL;
    else me.sin_addr.s_addr = mine[0];
    if (mine.empty() || ::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) {
      int e = errno ? errno : EINVAL;
      ::close(fd);
      ::freeaddrinfo(res);
      errno = e;
      return -1;
    }
  }
  // Non-blocking, given up at `until`: a SYN into a dead link would wait
  // out the kernel's retries (minutes), past stage_timeout.
  int fl = fd >= 0 ? ::fcntl(fd, F_GETFL) : 0;
  if (fd >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int rc = fd >= 0 ? ::connect(fd, res->ai_addr, res->ai_addrlen) : -1;
  if (fd >= 0 && rc != 0 && errno == EINPROGRESS) {
    struct pollfd pf = {fd, POLLOUT, 0};
    int ms = static_cast<int>(std::max(1.0, (until - MonotonicSeconds()) * 1000));
    int n = ::poll(&pf, 1, ms);
    int soerr = n == 0 ? ETIMEDOUT : n < 0 ? errno : 0;
    socklen_t len = sizeof soerr;
    if (n > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    rc = soerr == 0 ? 0 : -1;
    errno = soerr;
  }
  if (fd >= 0 && rc == 0) ::fcntl(fd, F_SETFL, fl);
  if (fd >= 0 && rc != 0) {
    int e = errno;
    ::close(fd);
    fd = -1;
    errno = e;
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

// Retries refused connections (the parent's prolog may not listen yet).
int Connect(const PeerEndpoint& ep, double until, const std::string& from) {
  for (;;) {
    int fd = ConnectOnce(ep, from, until);
    if (fd >= 0) return fd;
    if (MonotonicSeconds() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}


bool ParseLine(const std::string& l, MLine* m) {
  *m = MLine();
  char root = 0;
  if (ParseManifestRootLine(l, &root, &m->path)) {
    m->type = root == 'd' ? 'R' : 'F';  // the root, as a directory or as one file
    return true;
  }
  int used = 0;
  if (l.compare(0, 2, "d ") == 0) {
    if (std::sscanf(l.c_str() + 2, "%o %n", &m->mode, &used) < 1 || used == 0) return false;
    m->type = 'd';
    m->path = l.substr(2 + static_cast<size_t>(used));
  } else if (l.compare(0, 2, "f ") == 0) {
    unsigned long long size = 0;
    if (std::sscanf(l.c_str() + 2, "%o %llu %lld.%u %n", &m->mode, &size, &m->mtime_sec, &m->mtime_nsec, &used) < 4 ||
        used == 0)
      return false;
    m->type = 'f';
    m->size = size;
    m->path = l.substr(2 + static_cast<size_t>(used));
  } else if (l.compare(0, 2, "l ") == 0) {
    size_t arrow = l.find(" -> ", 2);
    if (arrow == std::string::npos) return false;
    m->type = 'l';
    m->path = l.substr(2, arrow - 2);
    m->link = l.substr(arrow + 4);
  } else {
    return false;
  }
  return !m->path.empty() && m->path[0] != '/' && !HasDotDot(m->path);
}

}  // namespace preflight::stage_internal
