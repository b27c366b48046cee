#include "preflight/stage_peer.h"

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
#include "preflight/stage_spec.h"

namespace preflight {

size_t PeerParent(size_t i, unsigned fanout) { return i == 0 ? SIZE_MAX : (i - 1) / std::max(1u, fanout); }

std::vector<size_t> PeerChildren(size_t i, size_t n, unsigned fanout) {
  std::vector<size_t> c;
  unsigned k = std::max(1u, fanout);
  for (size_t j = i * k + 1; j <= i * k + k && j < n; ++j) c.push_back(j);
  return c;
}

std::string PeerPayload(const std::string& job_id, const std::string& key) {
  return "preflight-stage job=" + job_id + " key=" + key;
}

namespace {

struct MungeCtx {
  explicit MungeCtx(const std::string& socket) : ctx(munge_ctx_create()) {
    if (ctx && !socket.empty()) munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
  }
  ~MungeCtx() {
    if (ctx) munge_ctx_destroy(ctx);
  }
  munge_ctx_t ctx;
};

}  // namespace

Expected<std::string> EncodePeerCredential(const std::string& munge_socket, const std::string& payload) {
  MungeCtx m(munge_socket);
  if (!m.ctx) return Status::IOError("munge: cannot create a context");
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, m.ctx, payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(m.ctx);
    return Status::Unavailable(std::string("munge encode: ") + (why ? why : munge_strerror(e)));
  }
  std::string out = cred;
  std::free(cred);
  return out;
}

Status VerifyPeerCredential(const std::string& munge_socket, const std::string& cred, const std::string& payload) {
  MungeCtx m(munge_socket);
  if (!m.ctx) return Status::IOError("munge: cannot create a context");
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(cred.c_str(), m.ctx, &buf, &len, &uid, &gid);
  std::string got = buf ? std::string(static_cast<const char*>(buf), static_cast<size_t>(std::max(len, 0))) : "";
  std::free(buf);
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(m.ctx);
    return Status::Permission(std::string("peer refused: munge credential: ") + (why ? why : munge_strerror(e)));
  }
  if (uid != 0) return Status::Permission("peer refused: credential of uid " + std::to_string(uid) + ", not a prolog (root)");
  if (got != payload) return Status::Permission("peer refused: credential for '" + got + "', not this job's dataset");
  return Status::Ok();
}

namespace {

constexpr char kMagic[8] = {'P', 'F', 'P', 'E', 'E', 'R', '1', '\n'};
constexpr size_t kChunk = 1 << 20;
constexpr uint32_t kMaxFrame = 1u << 30;

struct FileHead {  // before each file's bytes
  uint64_t size;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  uint32_t pad;
};

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

bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool SendFrame(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return WriteFull(fd, &n, sizeof n) && WriteFull(fd, s.data(), s.size());
}

bool RecvFrame(int fd, std::string* s, double deadline, double idle) {
  uint32_t n;
  if (!ReadFull(fd, &n, sizeof n, deadline, idle)) return false;
  if (n > kMaxFrame) { errno = EPROTO; return false; }
  s->resize(n);
  return ReadFull(fd, s->data(), n, deadline, idle);
}

int ConnectOnce(const PeerEndpoint& ep) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0 || !res) {
    errno = EHOSTUNREACH;
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
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
int Connect(const PeerEndpoint& ep, double until) {
  for (;;) {
    int fd = ConnectOnce(ep);
    if (fd >= 0) return fd;
    if (MonotonicSeconds() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

struct MLine {
  char type = 0;  // 'R' root dir, 'F' root file, 'd', 'f', 'l'
  uint32_t mode = 0;
  uint64_t size = 0;
  long long mtime_sec = 0;
  unsigned mtime_nsec = 0;
  std::string path, link;
};

bool ParseLine(const std::string& l, MLine* m) {
  *m = MLine();
  if (l.compare(0, 7, "root d ") == 0) { m->type = 'R'; m->path = l.substr(7); return true; }
  if (l.compare(0, 7, "root f ") == 0) { m->type = 'F'; m->path = l.substr(7); return true; }
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

// ---- relaying while receiving ----------------------------------------------
// Children that connected before this node's own stream began get that
// stream forwarded byte for byte as it arrives (they check every file's
// hash themselves), so a chain of nodes copies at once, not hop by hop.
// Children that come later, or whose relay broke, get the published copy.
struct Relay {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> fds;  // joined children
  bool started = false;  // the first byte arrived: no more joins
  int result = 0;        // 0 running, 1 complete, 2 broken

  bool Join(int fd) {
    std::lock_guard<std::mutex> l(mu);
    if (started) return false;
    fds.push_back(fd);
    return true;
  }
  // Blocks until the relay that took `fd` ends; true if complete and `fd`
  // was not dropped.
  bool Wait(int fd) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return result != 0; });
    return result == 1 && std::find(fds.begin(), fds.end(), fd) != fds.end();
  }
  void Start() {
    std::lock_guard<std::mutex> l(mu);
    started = true;
  }
  // Forwards to every joined child; a child that can't keep up is dropped.
  void Forward(const void* p, size_t n) {
    std::lock_guard<std::mutex> l(mu);
    for (auto it = fds.begin(); it != fds.end();) {
      if (WriteFull(*it, p, n)) ++it;
      else it = fds.erase(it);
    }
  }
  void End(bool ok) {
    std::lock_guard<std::mutex> l(mu);
    started = true;
    if (result == 0) result = ok ? 1 : 2;
    cv.notify_all();
  }
};

// ---- serving a published copy ---------------------------------------------

class PeerServer {
 public:
  PeerServer(const PeerOptions& p, std::string payload, Relay* relay)
      : p_(p), payload_(std::move(payload)), relay_(relay) {}
  ~PeerServer() { Stop(); }

  Status Start() {
    lfd_ = p_.listen_fd;
    if (lfd_ < 0) {
      lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (lfd_ < 0) return Status::FromErrno(errno, "peer socket");
      owned_ = true;
      int one = 1;
      ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      struct sockaddr_in a {};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(p_.nodes[p_.self].port);
      if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 64) != 0)
        return Status::FromErrno(errno, "peer listen on port " + std::to_string(p_.nodes[p_.self].port));
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
    return Status::Ok();
  }

  void SetReady(const std::string& vdir) {
    std::lock_guard<std::mutex> l(mu_);
    vdir_ = vdir;
    state_ = 1;
    cv_.notify_all();
  }
  void SetFailed() {
    std::lock_guard<std::mutex> l(mu_);
    state_ = 2;
    cv_.notify_all();
  }

  // Until `expected` children are done, none connected for wait_children
  // seconds since the copy was ready, or the deadline.
  void WaitChildren(size_t expected, double deadline) {
    double give_up = MonotonicSeconds() + p_.wait_children;
    std::unique_lock<std::mutex> l(mu_);
    while (done_ < expected) {
      double now = MonotonicSeconds();
      double until = active_ > 0 ? (deadline > 0 ? deadline : now + 3600) : give_up;
      if (deadline > 0) until = std::min(until, deadline);
      if (now >= until) break;
      cv_.wait_for(l, std::chrono::milliseconds(static_cast<int>(std::min(until - now, 1.0) * 1000) + 1));
    }
  }

  void Stop() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (state_ == 0) state_ = 2;
      cv_.notify_all();
    }
    for (auto& t : handlers_) t.join();
    handlers_.clear();
    if (owned_ && lfd_ >= 0) ::close(lfd_);
    lfd_ = -1;
  }

  std::atomic<unsigned> refused{0}, served{0}, relayed{0};
  std::atomic<uint64_t> served_bytes{0};

 private:
  void AcceptLoop() {
    while (!stop_) {
      struct pollfd pf = {lfd_, POLLIN, 0};
      if (::poll(&pf, 1, 100) <= 0) continue;
      int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int one = 1;  // small frames (file heads, hashes) must not wait for delayed ACKs
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> l(mu_);
      handlers_.emplace_back([this, fd] { Handle(fd); });
    }
  }

  // done: this child needs nothing more from us (it may still come back
  // after a broken relay: not done).
  void Finish(bool done) {
    std::lock_guard<std::mutex> l(mu_);
    if (done) ++done_;
    --active_;
    cv_.notify_all();
  }

  void Handle(int fd) {
    double hello_by = MonotonicSeconds() + 10;
    char magic[8];
    std::string cred;
    if (!ReadFull(fd, magic, sizeof magic, hello_by, 0) || std::memcmp(magic, kMagic, sizeof magic) != 0 ||
        !RecvFrame(fd, &cred, hello_by, 0) || cred.size() > 65536) {
      ++refused;
      ::close(fd);
      return;
    }
    Status v = VerifyPeerCredential(p_.munge_socket, cred, payload_);
    if (!v.ok()) {
      ++refused;
      WriteFull(fd, "R", 1);
      SendFrame(fd, v.message());
      ::close(fd);
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      ++active_;
    }
    char want = 0;
    if (!WriteFull(fd, "A", 1) || !ReadFull(fd, &want, 1, hello_by, 0) || want != 'N') {
      ::close(fd);
      Finish(true);  // 'H': the child has its own copy
      return;
    }
    if (relay_ && relay_->Join(fd)) {
      bool ok = relay_->Wait(fd);
      if (ok) { ++served; ++relayed; }
      ::close(fd);
      Finish(ok);  // broken: the child reconnects for the published copy
      return;
    }
    std::string vdir;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return state_ != 0; });
      if (state_ == 1) vdir = vdir_;
    }
    if (!vdir.empty() && Stream(fd, vdir)) ++served;
    ::close(fd);
    Finish(true);
  }

  bool Stream(int fd, const std::string& vdir) {
    auto manifest = ReadWholeFile(vdir + "/manifest");
    auto dirs = ReadWholeFile(vdir + "/dirs");
    auto info = ReadWholeFile(vdir + "/info");
    auto check = ReadWholeFile(vdir + "/check");
    if (!manifest || !dirs || !info) return false;
    auto field = [&](const std::string& k) {
      size_t at = info->find("\n" + k + "=");
      if (at == std::string::npos) return std::string();
      at += k.size() + 2;
      return info->substr(at, info->find('\n', at) - at);
    };
    std::string stats = field("bytes") + " " + field("files") + " " + field("dirs");
    if (!SendFrame(fd, *manifest) || !SendFrame(fd, *dirs) || !SendFrame(fd, field("digest_light")) ||
        !SendFrame(fd, check ? *check : std::string()) || !SendFrame(fd, stats))
      return false;
    std::vector<char> buf(kChunk);
    uint64_t sent = 0;
    size_t i = 0;
    while (i < manifest->size()) {
      size_t nl = manifest->find('\n', i);
      if (nl == std::string::npos) nl = manifest->size();
      std::string line = manifest->substr(i, nl - i);
      i = nl + 1;
      MLine m;
      if (!ParseLine(line, &m)) return false;
      if (m.type != 'f' && m.type != 'F') continue;
      std::string path = vdir + "/data" + (m.type == 'f' ? "/" + m.path : "");
      int in = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (in < 0) return false;
      struct stat st;
      if (::fstat(in, &st) != 0) { ::close(in); return false; }
      uint64_t size = static_cast<uint64_t>(st.st_size);
      FileHead head{size, st.st_mtim.tv_sec, static_cast<uint32_t>(st.st_mtim.tv_nsec), 0};
      if (!WriteFull(fd, &head, sizeof head)) { ::close(in); return false; }
      uint64_t h = 0, done = 0;
      while (done < size) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size - done));
        ssize_t n = ::pread(in, buf.data(), want, static_cast<off_t>(done));
        if (n != static_cast<ssize_t>(want)) { ::close(in); return false; }
        h = ChunkHash(buf.data(), want, h);
        if (p_.test_drop_after && sent + want > p_.test_drop_after) {
          if (p_.test_die) ::raise(SIGKILL);
          ::close(in);
          ::shutdown(fd, SHUT_RDWR);  // as a parent dying mid-stream
          return false;
        }
        if (!WriteFull(fd, buf.data(), want)) { ::close(in); return false; }
        done += want;
        sent += want;
        served_bytes += want;
      }
      ::close(in);
      if (!WriteFull(fd, &h, sizeof h)) return false;
    }
    return true;
  }

  const PeerOptions& p_;
  std::string payload_;
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

// ---- receiving from the parent ----------------------------------------------

int OpenDirBeneath(int root, const std::string& rel) {
  if (rel.empty()) return ::dup(root);
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
}

class Receiver {
 public:
  Receiver(const PeerOptions& p, const std::string& payload, double deadline, Relay* relay)
      : p_(p), payload_(payload), deadline_(deadline), relay_(relay) {}
  bool streamed() const { return streamed_; }
  ~Receiver() {
    if (fd_ >= 0) ::close(fd_);
    if (parent_fd_ >= 0) ::close(parent_fd_);
  }

  // Tells the parent this node needs nothing (its cache had it).
  void SayHave() {
    if (!Hello(std::min(p_.wait_parent, 2.0))) return;
    WriteFull(fd_, "H", 1);
  }

  Status Receive(int dst_dir_fd, BuiltCopy* out, uint64_t* bytes) {
    *bytes = 0;
    if (!Hello(p_.wait_parent)) return Status::Unavailable(why_);
    if (!WriteFull(fd_, "N", 1)) return Status::Unavailable("parent: " + std::string(std::strerror(errno)));
    double idle = std::max(p_.wait_parent, 1.0);  // a silent parent counts as dead after this
    std::string manifest, stats;
    // The parent may still be staging: wait for its first byte, then relay.
    if (!WaitFd(fd_, POLLIN, deadline_, 3600)) return Status::Unavailable("parent: " + std::string(std::strerror(errno)));
    streamed_ = true;
    if (relay_) relay_->Start();
    if (!Frame(&manifest, idle) || !Frame(&out->dirs_text, idle) || !Frame(&out->digest_light, idle) ||
        !Frame(&out->check, idle) || !Frame(&stats, idle))
      return Status::Unavailable("parent: manifest: " + std::string(std::strerror(errno)));
    unsigned long long b = 0, f = 0, d = 0;
    std::sscanf(stats.c_str(), "%llu %llu %llu", &b, &f, &d);
    std::vector<std::string>& lines = out->manifest;
    size_t i = 0;
    while (i < manifest.size()) {
      size_t nl = manifest.find('\n', i);
      if (nl == std::string::npos) nl = manifest.size();
      lines.push_back(manifest.substr(i, nl - i));
      i = nl + 1;
    }
    if (lines.empty()) return Status::IOError("parent: empty manifest");
    MLine root;
    if (!ParseLine(lines[0], &root) || (root.type != 'R' && root.type != 'F')) return Status::IOError("parent: bad manifest root");
    std::vector<char> buf(kChunk);
    uint64_t files = 0;
    if (root.type == 'F') {
      // A single-file source: its mtime is not in the manifest's root line;
      // the parent sends its copy's (the source's).
      Status s = RecvFile(dst_dir_fd, "data", 0644, UINT64_MAX, 0, 0, buf, bytes, false);
      if (!s.ok()) return s;
      files = 1;
    } else {
      if (::mkdirat(dst_dir_fd, "data", 0755) != 0) return Status::FromErrno(errno, "mkdir data");
      int droot = ::openat(dst_dir_fd, "data", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (droot < 0) return Status::FromErrno(errno, "open data");
      Status s;
      for (size_t k = 1; k < lines.size() && s.ok(); ++k) {
        MLine m;
        if (!ParseLine(lines[k], &m)) { s = Status::IOError("parent: bad manifest line " + std::to_string(k)); break; }
        size_t slash = m.path.rfind('/');
        std::string dir = slash == std::string::npos ? "" : m.path.substr(0, slash);
        std::string name = slash == std::string::npos ? m.path : m.path.substr(slash + 1);
        int pfd = ParentFd(droot, dir);
        if (pfd < 0) { s = Status::FromErrno(errno, "open data/" + dir); break; }
        if (m.type == 'd') {
          if (::mkdirat(pfd, name.c_str(), 0755) != 0) s = Status::FromErrno(errno, "mkdir data/" + m.path);
        } else if (m.type == 'l') {
          if (::symlinkat(m.link.c_str(), pfd, name.c_str()) != 0) s = Status::FromErrno(errno, "symlink data/" + m.path);
        } else {
          s = RecvFile(pfd, name, (m.mode & 0111) ? 0755 : 0644, m.size, m.mtime_sec, m.mtime_nsec, buf, bytes, true);
          ++files;
        }
      }
      if (parent_fd_ >= 0) ::close(parent_fd_);
      parent_fd_ = -1;
      ::close(droot);
      if (!s.ok()) return s;
    }
    if (files != f || *bytes != b) return Status::IOError("parent: received " + std::to_string(files) + " files, " +
                                                          std::to_string(*bytes) + " bytes; manifest says " +
                                                          std::to_string(f) + ", " + std::to_string(b));
    out->stats.bytes = b;
    out->stats.files = f;
    out->stats.dirs = d;
    return Status::Ok();
  }

 private:
  bool Hello(double wait) {
    size_t parent = PeerParent(p_.self, p_.fanout);
    const PeerEndpoint& ep = p_.nodes[parent];
    auto cred = EncodePeerCredential(p_.munge_socket, payload_);
    if (!cred) { why_ = cred.status().message(); return false; }
    double until = MonotonicSeconds() + wait;
    if (deadline_ > 0) until = std::min(until, deadline_);
    fd_ = Connect(ep, until);
    if (fd_ < 0) { why_ = "parent " + ep.host + ":" + std::to_string(ep.port) + " unreachable: " + std::strerror(errno); return false; }
    char ok = 0;  // a parent answers at once: munge decodes in milliseconds
    double answer_by = MonotonicSeconds() + std::max(wait, 1.0);
    if (!WriteFull(fd_, kMagic, sizeof kMagic) || !SendFrame(fd_, *cred) || !ReadFull(fd_, &ok, 1, answer_by, 0)) {
      why_ = "parent hello: " + std::string(std::strerror(errno));
      return false;
    }
    if (ok != 'A') {
      std::string reason;
      RecvFrame(fd_, &reason, answer_by, 0);
      why_ = "parent refused us: " + reason;
      return false;
    }
    return true;
  }

  // Stream reads, forwarded to the relayed children as they arrive.
  bool Read(void* p, size_t n, double idle) {
    if (!ReadFull(fd_, p, n, deadline_, idle)) return false;
    if (relay_) relay_->Forward(p, n);
    return true;
  }
  bool Frame(std::string* s, double idle) {
    uint32_t n;
    if (!Read(&n, sizeof n, idle)) return false;
    if (n > kMaxFrame) { errno = EPROTO; return false; }
    s->resize(n);
    return Read(s->data(), n, idle);
  }

  int ParentFd(int droot, const std::string& dir) {
    if (parent_fd_ >= 0 && dir == parent_dir_) return parent_fd_;
    if (parent_fd_ >= 0) ::close(parent_fd_);
    parent_fd_ = OpenDirBeneath(droot, dir);
    parent_dir_ = dir;
    return parent_fd_;
  }

  Status RecvFile(int dirfd, const std::string& name, mode_t mode, uint64_t expect, long long mtime_sec,
                  unsigned mtime_nsec, std::vector<char>& buf, uint64_t* bytes, bool set_time) {
    double idle = std::max(p_.wait_parent, 1.0);
    FileHead head;
    if (!Read(&head, sizeof head, idle)) return Status::Unavailable("parent: " + std::string(std::strerror(errno)));
    uint64_t size = head.size;
    if (!set_time) {  // a single-file source: the parent's copy carries the source's mtime
      mtime_sec = head.mtime_sec;
      mtime_nsec = head.mtime_nsec;
    }
    if (expect != UINT64_MAX && size != expect)
      return Status::IOError("parent: " + name + " has " + std::to_string(size) + " bytes, manifest " + std::to_string(expect));
    int out = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out < 0) return Status::FromErrno(errno, "create " + name);
    uint64_t h = 0, done = 0;
    while (done < size) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size - done));
      if (!Read(buf.data(), want, idle)) {
        int e = errno;
        ::close(out);
        return Status::Unavailable("parent: died or stalled sending " + name + ": " + std::strerror(e));
      }
      h = ChunkHash(buf.data(), want, h);
      if (!WriteFull2(out, buf.data(), want)) { int e = errno; ::close(out); return Status::FromErrno(e, "write " + name); }
      done += want;
    }
    uint64_t theirs;
    if (!Read(&theirs, sizeof theirs, idle)) { ::close(out); return Status::Unavailable("parent: hash of " + name); }
    if (theirs != h) { ::close(out); return Status::IOError("parent: " + name + ": bytes differ from what the parent sent (hash)"); }
    {
      struct timespec ts[2] = {{mtime_sec, static_cast<long>(mtime_nsec)}, {mtime_sec, static_cast<long>(mtime_nsec)}};
      if (::futimens(out, ts) != 0) { int e = errno; ::close(out); return Status::FromErrno(e, "set times on " + name); }
    }
    if (::close(out) != 0) return Status::FromErrno(errno, "close " + name);
    *bytes += size;
    return Status::Ok();
  }

  static bool WriteFull2(int fd, const char* p, size_t n) {
    while (n > 0) {
      ssize_t k = ::write(fd, p, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

  const PeerOptions& p_;
  std::string payload_;
  double deadline_;
  Relay* relay_;
  bool streamed_ = false;
  int fd_ = -1;
  int parent_fd_ = -1;
  std::string parent_dir_;
  std::string why_;
};

}  // namespace

bool PeerHelloAccepted(const PeerEndpoint& ep, const std::string& cred, double timeout_s) {
  double until = MonotonicSeconds() + timeout_s;
  int fd = Connect(ep, until);
  if (fd < 0) return false;
  char ok = 0;
  bool accepted = WriteFull(fd, kMagic, sizeof kMagic) && SendFrame(fd, cred) && ReadFull(fd, &ok, 1, until, 0) && ok == 'A';
  if (accepted) {
    std::string manifest;
    accepted = WriteFull(fd, "N", 1) && RecvFrame(fd, &manifest, until, 0) && !manifest.empty();
  }
  ::close(fd);
  return accepted;
}

Status StageWithPeers(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                      const PeerOptions& p, StagedDataset* out, FaultSide* side, PeerReport* rep) {
  *rep = PeerReport();
  if (p.self >= p.nodes.size()) { *side = FaultSide::kNode; return Status::InvalidArgument("peer: node index out of range"); }
  std::string payload = PeerPayload(p.job_id, StageCacheKey(source));
  std::vector<size_t> children = PeerChildren(p.self, p.nodes.size(), p.fanout);
  Relay relay;
  PeerServer server(p, payload, p.self > 0 ? &relay : nullptr);
  bool serving = false;
  if (!children.empty()) {
    // Not serving (the port taken, e.g. by another job's prolog) is no
    // fault of this node: its children fall back to the source.
    Status s = server.Start();
    serving = s.ok();
    if (!serving) rep->serve_error = s.message();
  }
  CopyOptions co;
  co.workers = o.workers;
  co.deadline = o.deadline;
  co.fs = o.fs;
  co.who = who;
  StageCacheOptions mine = o;
  Receiver rx(p, payload, o.deadline, &relay);
  mine.copier = [&](int dfd, BuiltCopy* b, FaultSide* sd) -> Status {
    if (p.self > 0) {
      uint64_t got = 0;
      Status r = rx.Receive(dfd, b, &got);
      relay.End(r.ok());
      if (!r.ok() && rx.streamed()) {
        // Broken mid-stream: the parent may be alive (its own relay broke);
        // ask once more, briefly, for its published copy.
        RemoveTreeAt(dfd, "data", "data");
        *b = BuiltCopy();
        PeerOptions again = p;
        again.wait_parent = 1;
        Receiver rx2(again, payload, o.deadline, nullptr);
        Status r2 = rx2.Receive(dfd, b, &got);
        if (r2.ok()) r = r2;
      }
      if (r.ok()) {
        rep->peer_bytes = got;
        b->peer_bytes = got;
        b->note = "received from peer " + p.nodes[PeerParent(p.self, p.fanout)].host + ":" +
                  std::to_string(p.nodes[PeerParent(p.self, p.fanout)].port);
        return r;
      }
      RemoveTreeAt(dfd, "data", "data");
      *b = BuiltCopy();
      rep->fell_back = true;
      rep->fallback_reason = r.message();
    }
    Status s = CopySourceInto(source, co, dfd, b, sd);
    if (s.ok()) rep->source_bytes = b->stats.bytes;
    if (rep->fell_back) b->note = "read the source: " + rep->fallback_reason;
    return s;
  };
  Status s = StageDataset(mine, source, who, p.job_id, out, side);
  if (s.ok()) {
    rep->hit = out->hit;
    server.SetReady(out->data_path.substr(0, out->data_path.size() - 5));  // <key>/<version>
    if (out->hit && p.self > 0) rx.SayHave();
  } else {
    server.SetFailed();
  }
  relay.End(false);  // no-op after a relay; frees children that joined a node that never received
  if (serving) {
    server.WaitChildren(children.size(), o.deadline);
    server.Stop();
    rep->refused = server.refused;
    rep->served = server.served;
    rep->relayed = server.relayed;
    rep->served_bytes = server.served_bytes;
  }
  return s;
}

}  // namespace preflight
