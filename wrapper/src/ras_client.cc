#include "preflight/ras_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "preflight/clock.h"
#include "preflight/config_values.h"
#include "preflight/strings.h"
#include "preflight/text.h"

namespace preflight {
namespace {

std::string Seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", s);
  return b;
}

// The socket's /proc/net form of an address: each 32-bit word as the
// kernel prints it (%08X of the word in host order).
std::string ProcHex(const void* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t w;
    std::memcpy(&w, static_cast<const char*>(bytes) + i, 4);
    char b[9];
    std::snprintf(b, sizeof b, "%08X", w);
    out += b;
  }
  return out;
}

class Conn {
 public:
  explicit Conn(int fd) : fd_(fd) {}
  ~Conn() { if (fd_ >= 0) ::close(fd_); }
  int fd() const { return fd_; }
  bool Send(const std::string& s, double until) {
    size_t off = 0;
    while (off < s.size()) {
      if (!Wait(POLLOUT, until)) return false;
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // One line without its '\n' (and '\r'); false on EOF, timeout or a line
  // over 1024 bytes (a handshake reply is a few words).
  bool Line(std::string* line, double until) {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        *line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return true;
      }
      if (buf_.size() > 1024 || !Fill(until, 4096)) return false;
    }
  }
  // Everything to EOF into out, at most max bytes. 0: EOF reached, 1: timeout, 2: over max, 3: error.
  int Rest(std::string* out, double until, size_t max) {
    *out = std::move(buf_);
    buf_.clear();
    for (;;) {
      if (out->size() > max) return 2;
      if (!Wait(POLLIN, until)) return errno == ETIMEDOUT ? 1 : 3;
      char b[65536];
      ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return 3;
      if (n == 0) return 0;
      out->append(b, static_cast<size_t>(n));
    }
  }

 private:
  bool Wait(short ev, double until) {
    for (;;) {
      double left = until - MonotonicSeconds();
      if (left <= 0) { errno = ETIMEDOUT; return false; }
      struct pollfd p = {fd_, ev, 0};
      int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) continue;
      return true;
    }
  }
  bool Fill(double until, size_t n) {
    if (!Wait(POLLIN, until)) return false;
    std::vector<char> b(n);
    ssize_t got = ::recv(fd_, b.data(), n, 0);
    if (got <= 0) { if (got == 0) errno = ECONNRESET; return false; }
    buf_.append(b.data(), static_cast<size_t>(got));
    return true;
  }
  int fd_;
  std::string buf_;
};

int ConnectWithin(const struct sockaddr* sa, socklen_t len, double until) {
  int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, sa, len) == 0) return fd;
  if (errno != EINPROGRESS) { int e = errno; ::close(fd); errno = e; return -1; }
  for (;;) {
    double left = until - MonotonicSeconds();
    if (left <= 0) { ::close(fd); errno = ETIMEDOUT; return -1; }
    struct pollfd p = {fd, POLLOUT, 0};
    int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) { ::close(fd); errno = err; return -1; }
    return fd;
  }
}

}  // namespace

std::string RasEndpoint::Text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Expected<RasEndpoint> ParseRasAddr(const std::string& s) {
  RasEndpoint ep;
  std::string rest;
  if (s.empty() || s.size() > 255) return Status::InvalidArgument("NCCL_RAS_ADDR '" + s + "': empty or over 255 bytes");
  if (s[0] == '[') {
    size_t e = s.find(']');
    if (e == std::string::npos) return Status::InvalidArgument("NCCL_RAS_ADDR '" + s + "': no ']' after the IPv6 address");
    ep.host = s.substr(1, e - 1);
    rest = s.substr(e + 1);
  } else {
    size_t c = s.rfind(':');
    ep.host = c == std::string::npos ? s : s.substr(0, c);
    rest = c == std::string::npos ? "" : s.substr(c);
  }
  for (char ch : ep.host)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == ':' || ch == '_'))
      return Status::InvalidArgument("NCCL_RAS_ADDR '" + s + "': not a host name or address");
  if (ep.host.empty()) return Status::InvalidArgument("NCCL_RAS_ADDR '" + s + "': no host");
  if (!rest.empty()) {
    auto p = ParseCount(rest.substr(1));
    if (rest[0] != ':' || !p || *p == 0 || *p > 65535)
      return Status::InvalidArgument("NCCL_RAS_ADDR '" + s + "': the port is not a number from 1 to 65535");
    ep.port = static_cast<uint16_t>(*p);
  }
  return ep;
}

Expected<uid_t> TcpListenerUid(const FsRoot& fs, const std::string& addr, uint16_t port) {
  unsigned char a[16];
  bool v6 = addr.find(':') != std::string::npos;
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), a) != 1)
    return Status::InvalidArgument("'" + addr + "' is not an IP address");
  const std::string want = ProcHex(a, v6 ? 16 : 4), any(v6 ? 32 : 8, '0');
  char p[8];
  std::snprintf(p, sizeof p, "%04X", port);
  const std::string file = v6 ? "/proc/net/tcp6" : "/proc/net/tcp";
  auto text = fs.ReadFile(file);
  if (!text) return text.status();
  std::istringstream in(*text);
  std::string line;
  std::getline(in, line);  // header
  bool wildcard = false;
  uid_t wildcard_uid = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, st, q, tr, rt, uid;
    if (!(f >> sl >> local >> remote >> st >> q >> tr >> rt >> uid)) continue;
    if (st != "0A") continue;  // TCP_LISTEN
    size_t c = local.find(':');
    if (c == std::string::npos || local.substr(c + 1) != p) continue;
    auto u = ParseCount(uid);
    if (!u) continue;
    if (local.substr(0, c) == want) return static_cast<uid_t>(*u);
    if (local.substr(0, c) == any) { wildcard = true; wildcard_uid = static_cast<uid_t>(*u); }
  }
  if (wildcard) return wildcard_uid;
  return Status::NotFound("nothing listens on " + addr + ":" + std::to_string(port) + " (" + fs.HostPath(file) + ")");
}

Expected<RasReply> QueryRas(const RasQueryOptions& o) {
  const std::string where = o.ep.Text();
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  struct addrinfo* res = nullptr;
  int g = ::getaddrinfo(o.ep.host.c_str(), std::to_string(o.ep.port).c_str(), &hints, &res);
  if (g != 0) return Status::Unavailable(where + ": " + ::gai_strerror(g));
  FsRoot real("/");
  const FsRoot& fs = o.fs ? *o.fs : real;
  std::string last = "no address";
  int fd = -1;
  std::string address;
  const double connect_until = MonotonicSeconds() + o.connect_s;
  // "localhost" may be 127.0.0.1 or ::1 (NCCL binds what it resolves):
  // each address is tried, and its listener's owner checked first.
  for (auto* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    char host[INET6_ADDRSTRLEN] = "";
    const void* src = ai->ai_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr)
                                                : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr);
    ::inet_ntop(ai->ai_family, src, host, sizeof host);
    RasEndpoint at{host, o.ep.port};
    const std::string here = at.Text() == where ? "" : at.Text() + ": ";
    if (o.check_owner) {
      auto owner = TcpListenerUid(fs, host, o.ep.port);
      if (!owner) { last = here + owner.status().message(); continue; }
      if (*owner != o.uid) {
        last = here + "its listening socket belongs to uid " + std::to_string(*owner) + ", not this job's user (uid " +
               std::to_string(o.uid) + "): not asked";
        continue;
      }
    }
    fd = ConnectWithin(ai->ai_addr, ai->ai_addrlen, connect_until);
    if (fd < 0) last = here + (errno == ETIMEDOUT ? "no connection within " + Seconds(o.connect_s) : std::strerror(errno));
    else address = at.Text();
  }
  ::freeaddrinfo(res);
  if (fd < 0) return Status::Unavailable(where + ": " + last);
  Conn c(fd);
  std::string line;
  double until = MonotonicSeconds() + o.connect_s;
  if (!c.Send("CLIENT PROTOCOL 2\n", until) || !c.Line(&line, until))
    return Status::Unavailable(address + ": no protocol reply within " + Seconds(o.connect_s));
  if (line.compare(0, 16, "SERVER PROTOCOL ") != 0)
    return Status::InvalidArgument(address + ": not NCCL's RAS (it answered '" + PrintableText(line.substr(0, 80)) + "')");
  RasReply r;
  r.address = address;
  r.format = "text";
  until = MonotonicSeconds() + o.connect_s;
  if (!c.Send("SET FORMAT json\n", until) || !c.Line(&line, until))
    return Status::Unavailable(address + ": no reply to SET FORMAT within " + Seconds(o.connect_s));
  if (line == "OK") r.format = "json";  // else "ERROR: Unknown command": NCCL before 2.28.7, the text report
  until = MonotonicSeconds() + o.reply_s;
  if (!c.Send("STATUS\n", until)) return Status::Unavailable(address + ": STATUS not sent: " + std::strerror(errno));
  int e = c.Rest(&r.text, until, o.max_bytes);
  if (e == 1) return Status::Timeout(address + ": the report did not end within " + Seconds(o.reply_s) + " (" + std::to_string(r.text.size()) + " bytes)");
  if (e == 2) return Status::InvalidArgument(address + ": reply over " + std::to_string(o.max_bytes) + " bytes: not read further");
  if (e == 3) return Status::Unavailable(address + ": " + std::strerror(errno));
  return r;
}

}  // namespace preflight
