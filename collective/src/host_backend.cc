// Host backend: ring collectives over TCP between ranks. It moves real bytes
// through the real network stack between real processes (or threads), so on
// CPU-only nodes the check exercises the whole path: launch, PMIx bootstrap,
// harness, verdict. Each rank connects to its right neighbour and accepts
// its left one; every step sends one chunk right while receiving one from
// the left (poll on both, non-blocking), as NCCL's ring does.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "preflight/clock.h"
#include "preflight/collective.h"

namespace preflight::collective {
namespace {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) { reset(); fd_ = o.fd_; o.fd_ = -1; }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() { if (fd_ >= 0) ::close(fd_); fd_ = -1; }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// This host's first non-loopback IPv4 address, else 127.0.0.1.
std::string DefaultAddress() {
  struct ifaddrs* ifa = nullptr;
  std::string best = "127.0.0.1";
  if (::getifaddrs(&ifa) != 0) return best;
  for (auto* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !(p->ifa_flags & IFF_UP)) continue;
    if (p->ifa_flags & IFF_LOOPBACK) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<struct sockaddr_in*>(p->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) { best = buf; break; }
  }
  ::freeifaddrs(ifa);
  return best;
}

void Tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int buf = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

Status SetNonBlocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return Status::FromErrno(errno, "fcntl O_NONBLOCK");
  return Status::Ok();
}

class HostBackend : public Backend {
 public:
  HostBackend(int rank, int size, std::string node, const HostOptions& opt)
      : rank_(rank), size_(size), node_(std::move(node)), opt_(opt) {}

  // Exactly one AllGather on `boot`, also when this rank fails first, so
  // the other ranks learn of the failure instead of waiting for it.
  Status Connect(Bootstrap& boot) {
    Fd ls;
    Status st = Listen(ls);
    auto all = boot.AllGather(kBackendGatherKey, st.ok() ? mine_ : "error: " + st.message());
    if (!st.ok()) return st;
    if (!all) return all.status().Context("host backend: exchanging listen addresses");
    peers_ = *all;
    for (int r = 0; r < size_; ++r)
      if (peers_[r].rfind("error: ", 0) == 0) return Status::Failed("host backend: rank " + std::to_string(r) + ": " + peers_[r].substr(7));
    if (size_ == 1) return Status::Ok();

    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    Status s = ConnectTo(right);
    if (!s.ok()) return s;
    s = AcceptFrom(ls.get(), left);
    if (!s.ok()) return s;
    if (!(s = SetNonBlocking(right_.get())).ok()) return s;
    return SetNonBlocking(left_.get());
  }

  Status Listen(Fd& ls) {
    ls = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (ls.get() < 0) return Status::FromErrno(errno, "host backend: socket");
    struct sockaddr_in sa{};
    sa.sin_family = AF_INET;
    // Any address: other nodes connect to the node's address, this node's
    // own ranks over loopback (ConnectTo).
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    struct in_addr check{};
    if (!opt_.address.empty() && ::inet_pton(AF_INET, opt_.address.c_str(), &check) != 1)
      return Status::InvalidArgument("host backend: " + node_ + "'s address '" + opt_.address +
                                     "' (node_addresses) is not an IPv4 address");
    if (::bind(ls.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      return Status::FromErrno(errno, "host backend: bind");
    if (::listen(ls.get(), 4) != 0) return Status::FromErrno(errno, "host backend: listen");
    socklen_t len = sizeof sa;
    ::getsockname(ls.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    std::string addr = (opt_.address.empty() ? DefaultAddress() : opt_.address);
    mine_ = addr + ":" + std::to_string(ntohs(sa.sin_port)) + " " + node_;
    return Status::Ok();
  }

  const char* Name() const override { return kHostResultName; }
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string Device() const override {
    return node_ + " " + peers_[rank_].substr(0, peers_[rank_].find(' ')) +
           (opt_.send_rate_cap > 0 ? " (send capped at " + RateText(opt_.send_rate_cap) + ")" : "");
  }

  Status Prepare(uint64_t max_count) override {
    send_.assign(max_count, 0.f);
    recv_.assign(max_count, 0.f);
    tmp_.assign(max_count / size_ + 1, 0.f);
    return Status::Ok();
  }
  Status SetInput(const float* host, uint64_t count) override {
    if (count > send_.size()) return Status::InvalidArgument("host backend: input larger than prepared");
    std::copy(host, host + count, send_.begin());
    return Status::Ok();
  }
  Status Wait() override { return Status::Ok(); }  // every operation is synchronous
  Status GetOutput(float* host, uint64_t offset, uint64_t count) override {
    if (offset + count > recv_.size()) return Status::InvalidArgument("host backend: read past the buffer");
    std::copy(recv_.begin() + offset, recv_.begin() + offset + count, host);
    return Status::Ok();
  }

  Status AllReduce(uint64_t count) override {
    if (count > send_.size()) return Status::InvalidArgument("host backend: count larger than prepared");
    std::copy(send_.begin(), send_.begin() + count, recv_.begin());
    if (size_ == 1) return Status::Ok();
    const int n = size_;
    auto off = [&](int k) { return count * static_cast<uint64_t>(k) / n; };
    auto mod = [&](int x) { return Mod(x); };
    StartOp();
    // Reduce-scatter: after n-1 steps rank r holds the full sum of chunk r+1.
    for (int step = 0; step < n - 1; ++step) {
      int sc = mod(rank_ - step), rc = mod(rank_ - step - 1);
      uint64_t rn = off(rc + 1) - off(rc);
      Status s = SendRecv(recv_.data() + off(sc), (off(sc + 1) - off(sc)) * sizeof(float), tmp_.data(),
                          rn * sizeof(float), true);
      if (!s.ok()) return s;
      float* dst = recv_.data() + off(rc);
      for (uint64_t i = 0; i < rn; ++i) dst[i] += tmp_[i];
    }
    // All-gather: pass the finished chunks around the ring.
    for (int step = 0; step < n - 1; ++step) {
      int sc = mod(rank_ + 1 - step), rc = mod(rank_ - step);
      Status s = SendRecv(recv_.data() + off(sc), (off(sc + 1) - off(sc)) * sizeof(float), recv_.data() + off(rc),
                          (off(rc + 1) - off(rc)) * sizeof(float), true);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

  // The all-gather half of the ring alone, over chunks of `count`.
  Status AllGather(uint64_t count) override {
    const int n = size_;
    if (count * n > recv_.size()) return Status::InvalidArgument("host backend: count larger than prepared");
    std::copy(send_.begin(), send_.begin() + count, recv_.begin() + count * rank_);
    StartOp();
    const size_t len = count * sizeof(float);
    for (int step = 0; step < n - 1; ++step) {
      int sc = Mod(rank_ - step), rc = Mod(rank_ - step - 1);
      Status s = SendRecv(recv_.data() + count * sc, len, recv_.data() + count * rc, len, true);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

  // The reduce-scatter half of the ring, shifted one chunk so that rank r
  // ends with the sum of chunk r (the all-reduce's ends with r+1); the sums
  // build in recv_, and chunk r is moved to its front.
  Status ReduceScatter(uint64_t count) override {
    const int n = size_;
    if (count * n > recv_.size() || count > tmp_.size())
      return Status::InvalidArgument("host backend: count larger than prepared");
    std::copy(send_.begin(), send_.begin() + count * n, recv_.begin());
    StartOp();
    const size_t len = count * sizeof(float);
    for (int step = 0; step < n - 1; ++step) {
      int sc = Mod(rank_ - step - 1), rc = Mod(rank_ - step - 2);
      Status s = SendRecv(recv_.data() + count * sc, len, tmp_.data(), len, true);
      if (!s.ok()) return s;
      float* dst = recv_.data() + count * rc;
      for (uint64_t i = 0; i < count; ++i) dst[i] += tmp_[i];
    }
    if (rank_ != 0) std::copy(recv_.begin() + count * rank_, recv_.begin() + count * (rank_ + 1), recv_.begin());
    return Status::Ok();
  }

  // Relayed around the ring: at step s every rank receives the chunks rank
  // r-s sent to r, r+1, ..., keeps the first and passes the rest on (chunk
  // for the rank k hops away crosses k links; see MakeHostBackend).
  Status AllToAll(uint64_t count) override {
    const int n = size_;
    if (count * n > recv_.size()) return Status::InvalidArgument("host backend: count larger than prepared");
    std::copy(send_.begin() + count * rank_, send_.begin() + count * (rank_ + 1), recv_.begin() + count * rank_);
    if (n == 1) return Status::Ok();
    relay_out_.resize(count * (n - 1));
    relay_in_.resize(count * (n - 1));
    for (int k = 1; k < n; ++k)  // by distance: the chunk for rank r+k at k-1
      std::copy(send_.begin() + count * Mod(rank_ + k), send_.begin() + count * (Mod(rank_ + k) + 1),
                relay_out_.begin() + count * (k - 1));
    StartOp();
    for (int step = 1; step < n; ++step) {
      const uint64_t chunks = n - step;
      Status s = SendRecv(relay_out_.data(), chunks * count * sizeof(float), relay_in_.data(),
                          chunks * count * sizeof(float), true);
      if (!s.ok()) return s;
      int from = Mod(rank_ - step);
      std::copy(relay_in_.begin(), relay_in_.begin() + count, recv_.begin() + count * from);
      std::copy(relay_in_.begin() + count, relay_in_.begin() + count * chunks, relay_out_.begin());
    }
    return Status::Ok();
  }

  Status MaxAcrossRanks(std::vector<double>& v) override {
    if (size_ == 1) return Status::Ok();
    std::vector<double> carry = v, in(v.size());
    for (int step = 0; step < size_ - 1; ++step) {
      Status s = SendRecv(carry.data(), carry.size() * sizeof(double), in.data(), in.size() * sizeof(double), false);
      if (!s.ok()) return s.Context("host backend: control exchange");
      for (size_t i = 0; i < v.size(); ++i) v[i] = std::max(v[i], in[i]);
      carry = in;
    }
    return Status::Ok();
  }

 private:
  std::string Peer(int r) const { return "rank " + std::to_string(r) + " (" + peers_[r] + ")"; }
  int Mod(int x) const { return ((x % size_) + size_) % size_; }
  void StartOp() {  // the send-rate cap counts from here
    op_start_ = MonotonicSeconds();
    op_sent_ = 0;
  }

  Status ConnectTo(int r) {
    const std::string& p = peers_[r];
    size_t colon = p.rfind(':', p.find(' '));
    std::string host = p.substr(0, colon);
    int port = std::atoi(p.c_str() + colon + 1);
    // A peer on this very node is reached over loopback, as NCCL reaches it
    // over shared memory or NVLink, never through the node's NIC: the
    // node's address (and a shaped link in the emulated fabric) is for
    // traffic between nodes only.
    const bool same_node = p.size() > p.find(' ') && p.substr(p.find(' ') + 1) == node_;
    if (same_node) host = "127.0.0.1";
    struct sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
      return Status::InvalidArgument("host backend: bad address '" + p + "' from " + Peer(r));
    double deadline = MonotonicSeconds() + opt_.timeout_ms / 1000.0;
    if (opt_.deadline > 0) deadline = std::min(deadline, opt_.deadline);
    int err = 0;
    do {
      Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (!opt_.address.empty() && !same_node) {  // leave from this node's own address, as its traffic would
        struct sockaddr_in me{};
        me.sin_family = AF_INET;
        ::inet_pton(AF_INET, opt_.address.c_str(), &me.sin_addr);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&me), sizeof me) != 0)
          return Status::FromErrno(errno, "host backend: bind to " + opt_.address + " to connect");
      }
      // Non-blocking, bounded by the deadline: a SYN into a dead link waits
      // for the kernel's retries (minutes), not for us.
      if (ConnectBounded(fd.get(), sa) == 0) {
        Tune(fd.get());
        int32_t me = rank_;
        if (::send(fd.get(), &me, sizeof me, MSG_NOSIGNAL) != sizeof me)
          return Status::FromErrno(errno, "host backend: greeting " + Peer(r));
        right_ = std::move(fd);
        return Status::Ok();
      }
      err = errno;
      ::usleep(20 * 1000);
    } while (MonotonicSeconds() < deadline);
    return Status::FromErrno(err, "host backend: rank " + std::to_string(rank_) + " cannot connect to " + Peer(r));
  }

  // connect(2) that gives up at the deadline (or timeout_ms); 0 or -1 with errno.
  int ConnectBounded(int fd, const struct sockaddr_in& sa) {
    int fl = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      struct pollfd pf = {fd, POLLOUT, 0};
      int n = ::poll(&pf, 1, std::max(1, WaitMs(static_cast<int>(opt_.timeout_ms))));
      if (n <= 0) {
        errno = n == 0 ? ETIMEDOUT : errno;
        return -1;
      }
      int soerr = 0;
      socklen_t len = sizeof soerr;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
      if (soerr != 0) { errno = soerr; return -1; }
      rc = 0;
    }
    if (rc == 0) ::fcntl(fd, F_SETFL, fl);
    return rc;
  }

  // The wait for one poll: timeout_ms, cut to what is left before the deadline.
  int WaitMs(int want) const {
    if (opt_.deadline <= 0) return want;
    double left = (opt_.deadline - MonotonicSeconds()) * 1000;
    return static_cast<int>(std::max(0.0, std::min(static_cast<double>(want), left)));
  }
  bool PastDeadline() const { return opt_.deadline > 0 && MonotonicSeconds() >= opt_.deadline; }

  Status AcceptFrom(int ls, int r) {
    struct pollfd p = {ls, POLLIN, 0};
    int n = ::poll(&p, 1, WaitMs(static_cast<int>(opt_.timeout_ms)));
    if (n == 0)
      return Status::Timeout("host backend: rank " + std::to_string(rank_) + ": no connection from " + Peer(r) +
                             " within " + std::to_string(opt_.timeout_ms) + " ms");
    if (n < 0) return Status::FromErrno(errno, "host backend: poll on listen socket");
    Fd fd(::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) return Status::FromErrno(errno, "host backend: accept");
    Tune(fd.get());
    int32_t who = -1;
    if (::recv(fd.get(), &who, sizeof who, MSG_WAITALL) != sizeof who || who != r)
      return Status::IOError("host backend: rank " + std::to_string(rank_) + ": expected " + Peer(r) +
                             " on the left, got rank " + std::to_string(who));
    left_ = std::move(fd);
    return Status::Ok();
  }

  // Send slen bytes right while receiving rlen bytes from the left. With
  // `capped`, sending stays under send_rate_cap over the whole operation.
  Status SendRecv(const void* sbuf, size_t slen, void* rbuf, size_t rlen, bool capped) {
    const char* sp = static_cast<const char*>(sbuf);
    char* rp = static_cast<char*>(rbuf);
    size_t sent = 0, got = 0;
    double cap = capped ? opt_.send_rate_cap : 0;
    while (sent < slen || got < rlen) {
      size_t allow = slen - sent;
      int wait_ms = static_cast<int>(opt_.timeout_ms);
      if (cap > 0 && allow > 0) {
        double budget = cap * (MonotonicSeconds() - op_start_) + 4096 - static_cast<double>(op_sent_);
        if (budget < 1) {
          allow = 0;
          wait_ms = std::max(1, static_cast<int>(std::ceil((1 - budget) / cap * 1000)));
        } else {
          allow = std::min(allow, static_cast<size_t>(budget));
        }
      }
      struct pollfd p[2];
      int np = 0, si = -1, ri = -1;
      if (allow > 0) { si = np; p[np++] = {right_.get(), POLLOUT, 0}; }
      if (got < rlen) { ri = np; p[np++] = {left_.get(), POLLIN, 0}; }
      if (PastDeadline())
        return Status::Timeout("host backend: rank " + std::to_string(rank_) + " on " + node_ + ": past its deadline with " +
                               std::to_string(sent) + " of " + std::to_string(slen) + " bytes sent, " +
                               std::to_string(got) + " of " + std::to_string(rlen) + " received");
      const int want_ms = wait_ms;
      wait_ms = std::max(1, WaitMs(want_ms));
      int n = np ? ::poll(p, np, wait_ms) : (::usleep(wait_ms * 1000), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, "host backend: poll");
      }
      if (n == 0 && wait_ms < want_ms) continue;  // cut short by the deadline: reported at the top
      if (n == 0 && !(cap > 0 && allow == 0 && sent < slen)) {
        return Status::Timeout("host backend: rank " + std::to_string(rank_) + " on " + node_ + ": no progress for " +
                               std::to_string(opt_.timeout_ms) + " ms (" +
                               (got < rlen ? "waiting for " + Peer((rank_ + size_ - 1) % size_)
                                           : "sending to " + Peer((rank_ + 1) % size_)) + ")");
      }
      if (si >= 0 && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t k = ::send(right_.get(), sp + sent, std::min(allow, size_t{1} << 20), MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
          return Status::FromErrno(errno, "host backend: send to " + Peer((rank_ + 1) % size_));
        if (k > 0) { sent += static_cast<size_t>(k); if (capped) op_sent_ += static_cast<uint64_t>(k); }
      }
      if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
        ssize_t k = ::recv(left_.get(), rp + got, rlen - got, 0);
        if (k == 0)
          return Status::IOError("host backend: " + Peer((rank_ + size_ - 1) % size_) + " closed the connection");
        if (k < 0 && errno != EAGAIN && errno != EINTR)
          return Status::FromErrno(errno, "host backend: recv from " + Peer((rank_ + size_ - 1) % size_));
        if (k > 0) got += static_cast<size_t>(k);
      }
    }
    return Status::Ok();
  }

  int rank_, size_;
  std::string node_;
  HostOptions opt_;
  std::string mine_;
  std::vector<std::string> peers_;  // "addr:port node" per rank
  Fd right_, left_;
  std::vector<float> send_, recv_, tmp_;
  std::vector<float> relay_out_, relay_in_;  // AllToAll's chunks in transit, sized on first use
  double op_start_ = 0;
  uint64_t op_sent_ = 0;
};

}  // namespace

Expected<std::unique_ptr<Backend>> MakeHostBackend(Bootstrap& boot, const HostOptions& opt) {
  auto b = std::make_unique<HostBackend>(boot.Rank(), boot.Size(), boot.Node(), opt);
  Status s = b->Connect(boot);
  if (!s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace preflight::collective
