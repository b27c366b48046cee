#include "stage_peer_serve.h"

#include <arpa/inet.h>
#include <sys/time.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "stage_peer_hello.h"

namespace preflight::stage_internal {

bool Relay::Join(int fd) {
  std::lock_guard<std::mutex> l(mu);
  if (started) return false;
  fds.push_back(fd);
  pace[fd] = {RateFloor{}, 0};
  return true;
}

Relay::Outcome Relay::Wait(int fd) {
  std::unique_lock<std::mutex> l(mu);
  auto joined = [&] { return std::find(fds.begin(), fds.end(), fd); };
  while (result == 0) {
    if (!started && !WriteFull(fd, &kBeat, 1)) {  // the child is gone
      if (joined() != fds.end()) fds.erase(joined());
      return Outcome::kBroken;
    }
    cv.wait_for(l, std::chrono::duration<double>(kBeatPeriod));
  }
  if (!begun) return Outcome::kNotStarted;
  return result == 1 && joined() != fds.end() ? Outcome::kRelayed : Outcome::kBroken;
}

void Relay::Start() {
  std::lock_guard<std::mutex> l(mu);
  started = begun = true;
  for (auto it = fds.begin(); it != fds.end();) {
    pace[*it].first.start = MonotonicSeconds();
    if (WriteFull(*it, &kGo, 1)) ++it;
    else it = fds.erase(it);
  }
  cv.notify_all();
}

void Relay::Forward(const void* p, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  for (auto it = fds.begin(); it != fds.end();) {
    auto& [floor, sent] = pace[*it];
    sent += n;
    if (WriteBy(*it, p, n, Sooner(floor.Until(sent), deadline))) {
      ++it;
    } else {
      ::shutdown(*it, SHUT_RDWR);  // dropped: its child must not take a part for the whole
      it = fds.erase(it);
    }
  }
}

void Relay::End(bool ok) {
  std::lock_guard<std::mutex> l(mu);
  started = true;
  if (result == 0) result = ok ? 1 : 2;
  cv.notify_all();
}

Status PeerServer::Start(bool* squatted) {
  *squatted = false;
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
    if (!p_.bind_host.empty() && ::inet_pton(AF_INET, p_.bind_host.c_str(), &a.sin_addr) != 1)
      return Status::InvalidArgument("peer listen: this node's address '" + p_.bind_host + "' is not an IPv4 address");
    uint16_t port = p_.nodes[p_.self].port;
    a.sin_port = htons(port);
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 64) != 0) {
      int e = errno;
      Status s = Status::FromErrno(e, "peer listen on port " + std::to_string(port));
      long uid = -1;  // a dual-stack IPv6 listener takes the IPv4 port too
      for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        auto tcp = e == EADDRINUSE ? ReadWholeFile(table) : Expected<std::string>(std::string());
        if (tcp && uid < 0) uid = ListenerUid(*tcp, port);
      }
      if (uid > 0) {
        // Only root may listen below 1024 (the site's stage_peer_port):
        // a user's listener there means the kernel let users bind it
        // (net.ipv4.ip_unprivileged_port_start) and one took it to pose
        // as this node. Its children refuse it (it can't prove it is
        // this node) and read the source.
        *squatted = true;
        return Status::Permission("ATTACK: port " + std::to_string(port) + " is held by a listener of uid " +
                                  std::to_string(uid) + ", not a prolog's (root): a user squats the stage fan-out port; " +
                                  "this node's children refuse it and read the source");
      }
      if (uid == 0) return s.Context("held by another root listener (another job's prolog?)");
      return s;
    }
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void PeerServer::SetReady(const std::string& vdir) {
  std::lock_guard<std::mutex> l(mu_);
  vdir_ = vdir;
  state_ = 1;
  cv_.notify_all();
}

void PeerServer::SetFailed() {
  std::lock_guard<std::mutex> l(mu_);
  state_ = 2;
  cv_.notify_all();
}

void PeerServer::WaitChildren(size_t expected, double deadline) {
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

void PeerServer::Stop() {
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

void PeerServer::AcceptLoop() {
  while (!stop_) {
    struct pollfd pf = {lfd_, POLLIN, 0};
    if (::poll(&pf, 1, 100) <= 0) continue;
    int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;  // small frames (file heads, hashes) must not wait for delayed ACKs
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A child whose link is dead takes nothing: a send that moves no byte
    // for wait_children seconds drops that child (it reads the source
    // itself), instead of holding this prolog until stage_timeout, past
    // the batch launch (slurmctld then requeues the job as a node failure).
    double secs = std::max(p_.wait_children, 1.0);
    struct timeval tv = {static_cast<time_t>(secs), static_cast<suseconds_t>((secs - static_cast<time_t>(secs)) * 1e6)};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::lock_guard<std::mutex> l(mu_);
    handlers_.emplace_back([this, fd] { Handle(fd); });
  }
}

void PeerServer::Finish(bool done) {
  std::lock_guard<std::mutex> l(mu_);
  if (done) ++done_;
  --active_;
  cv_.notify_all();
}

void PeerServer::Handle(int fd) {
  double hello_by = Sooner(MonotonicSeconds() + 10, deadline_);  // an unproven peer holds nothing past that
  size_t child = 0;
  if (!ParentHello(fd, p_, key_, hello_by, &child).ok()) {
    ++refused;
    ::close(fd);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    ++active_;
  }
  char want = 0;
  if (!ReadFull(fd, &want, 1, hello_by, 0) || want != 'N') {
    ::close(fd);
    Finish(true);  // 'H': the child has its own copy
    return;
  }
  if (relay_ && relay_->Join(fd)) {
    Relay::Outcome o = relay_->Wait(fd);
    if (o != Relay::Outcome::kNotStarted) {
      if (o == Relay::Outcome::kRelayed) { ++served; ++relayed; }
      ::close(fd);
      Finish(o == Relay::Outcome::kRelayed);  // broken: the child reconnects for the published copy
      return;
    }
    // This node never received (a warm hit, or its parent failed before
    // streaming): the child still waits on this connection, for the copy
    // this node publishes.
  }
  // Beats until this node's copy is published (or failed), then kGo and
  // the copy; a child that is gone ends the beats.
  std::string vdir;
  bool alive = true;
  {
    std::unique_lock<std::mutex> l(mu_);
    while (alive && !cv_.wait_for(l, std::chrono::duration<double>(kBeatPeriod), [&] { return state_ != 0; })) {
      l.unlock();
      alive = WriteFull(fd, &kBeat, 1);
      l.lock();
    }
    if (alive && state_ == 1) vdir = vdir_;
  }
  if (!vdir.empty() && WriteFull(fd, &kGo, 1) && Stream(fd, vdir)) ++served;
  ::close(fd);
  Finish(true);
}

bool PeerServer::Stream(int fd, const std::string& vdir) {
  auto manifest = ReadWholeFile(vdir + "/manifest");
  auto dirs = ReadWholeFile(vdir + "/dirs");
  std::map<std::string, std::string> info = ReadCacheInfo(vdir);
  auto check = ReadWholeFile(vdir + "/check");
  if (!manifest || !dirs || info.empty()) return false;
  std::string stats = info["bytes"] + " " + info["files"] + " " + info["dirs"];
  if (!SendFrame(fd, *manifest) || !SendFrame(fd, *dirs) || !SendFrame(fd, info["digest_light"]) ||
      !SendFrame(fd, check ? *check : std::string()) || !SendFrame(fd, stats))
    return false;
  std::vector<char> buf(kChunk);
  uint64_t sent = 0;
  RateFloor floor{MonotonicSeconds()};
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
      // A child that reads slower than the floor, or past the deadline, is
      // dropped (it reads the source): it must not hold this prolog.
      if (!WriteBy(fd, buf.data(), want, Sooner(floor.Until(sent + want), deadline_))) { ::close(in); return false; }
      done += want;
      sent += want;
      served_bytes += want;
    }
    ::close(in);
    if (!WriteFull(fd, &h, sizeof h)) return false;
  }
  return true;
}

}  // namespace preflight::stage_internal
