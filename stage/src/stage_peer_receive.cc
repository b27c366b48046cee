#include "stage_peer_receive.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "stage_peer_hello.h"

namespace preflight::stage_internal {

namespace {

int OpenDirBeneath(int root, const std::string& rel) {
  if (rel.empty()) return ::dup(root);
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
}

}  // namespace

Receiver::~Receiver() {
  if (fd_ >= 0) ::close(fd_);
  if (parent_fd_ >= 0) ::close(parent_fd_);
}

void Receiver::SayHave() {
  if (!Hello(std::min(p_.wait_parent, 2.0))) return;
  WriteFull(fd_, "H", 1);
}

Status Receiver::Receive(int dst_dir_fd, BuiltCopy* out, uint64_t* bytes) {
  *bytes = 0;
  if (!Hello(p_.wait_parent)) return Status::Unavailable(why_);
  if (!WriteFull(fd_, "N", 1)) return Status::Unavailable("parent: " + std::string(std::strerror(errno)));
  double idle = std::max(p_.wait_parent, 1.0);  // a silent parent counts as dead after this
  std::string manifest, stats;
  // The parent may still be staging: it beats until its stream begins. A
  // parent silent for `idle` is dead or cut off (its link may still carry
  // the connect and hello: a dead cable, a down-trained NIC).
  if (!AwaitStream(fd_, deadline_, idle)) {
    if (errno == EPROTO) return Status::IOError("parent: protocol: unexpected byte before the stream");
    return Status::Unavailable("parent: waiting for its stream: " + std::string(std::strerror(errno)));
  }
  streamed_ = true;
  floor_.start = MonotonicSeconds();
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

bool Receiver::Hello(double wait) {
  size_t parent = PeerParent(p_.self, p_.fanout);
  const PeerEndpoint& ep = p_.nodes[parent];
  double until = MonotonicSeconds() + wait;
  if (deadline_ > 0) until = std::min(until, deadline_);
  // From this node's own address: the parent checks it against the node list.
  fd_ = Connect(ep, until, p_.bind_host.empty() ? p_.nodes[p_.self].host : p_.bind_host);
  if (fd_ < 0) { why_ = "parent " + ep.host + ":" + std::to_string(ep.port) + " unreachable: " + std::strerror(errno); return false; }
  double answer_by = MonotonicSeconds() + std::max(wait, 1.0);  // a parent answers at once: munge takes milliseconds
  Status s = ChildHello(fd_, p_, key_, answer_by);
  if (!s.ok()) {
    why_ = "parent " + ep.host + ":" + std::to_string(ep.port) + ": " + s.message();
    return false;
  }
  return true;
}

bool Receiver::Read(void* p, size_t n, double idle) {
  received_ += n;
  if (!ReadFull(fd_, p, n, Sooner(deadline_, floor_.Until(received_)), idle)) return false;
  if (relay_) relay_->Forward(p, n);
  return true;
}

bool Receiver::Frame(std::string* s, double idle) {
  uint32_t n;
  if (!Read(&n, sizeof n, idle)) return false;
  if (n > kMaxFrame) { errno = EPROTO; return false; }
  s->resize(n);
  return Read(s->data(), n, idle);
}

int Receiver::ParentFd(int droot, const std::string& dir) {
  if (parent_fd_ >= 0 && dir == parent_dir_) return parent_fd_;
  if (parent_fd_ >= 0) ::close(parent_fd_);
  parent_fd_ = OpenDirBeneath(droot, dir);
  parent_dir_ = dir;
  return parent_fd_;
}

Status Receiver::RecvFile(int dirfd, const std::string& name, mode_t mode, uint64_t expect, long long mtime_sec,
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
    if (!WriteAll(out, buf.data(), want)) { int e = errno; ::close(out); return Status::FromErrno(e, "write " + name); }
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

}  // namespace preflight::stage_internal
