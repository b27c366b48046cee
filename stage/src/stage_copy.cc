#include "preflight/stage_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <xxhash.h>

#include "preflight/report.h"
#include "preflight/stage_manifest.h"

namespace preflight {

int StageFs::OpenAt(int dirfd, const char* path, int flags, mode_t mode) { return ::openat(dirfd, path, flags, mode); }
ssize_t StageFs::Pread(int fd, void* buf, size_t n, off_t off) { return ::pread(fd, buf, n, off); }
ssize_t StageFs::Write(int fd, const void* buf, size_t n) { return ::write(fd, buf, n); }
ssize_t StageFs::CopyFileRange(int in, off_t* in_off, int out, size_t n) {
  return ::copy_file_range(in, in_off, out, nullptr, n, 0);
}
int StageFs::MkdirAt(int dirfd, const char* path, mode_t mode) { return ::mkdirat(dirfd, path, mode); }
int StageFs::SymlinkAt(const char* target, int dirfd, const char* path) { return ::symlinkat(target, dirfd, path); }
int StageFs::Futimens(int fd, const struct timespec ts[2]) { return ::futimens(fd, ts); }
int StageFs::Close(int fd) { return ::close(fd); }

StageFs& DefaultStageFs() {
  static StageFs fs;
  return fs;
}

const char* FaultSideName(FaultSide s) {
  switch (s) {
    case FaultSide::kNone: return "none";
    case FaultSide::kSource: return "source";
    case FaultSide::kDestSpace: return "space";
    case FaultSide::kNode: return "node";
  }
  return "node";
}

bool SameManifest(const std::vector<std::string>& a_in, const std::vector<std::string>& b_in) {
  if (a_in.size() != b_in.size()) return false;
  if (a_in == b_in) return true;  // the usual case: same readdir order
  std::vector<std::string> a = a_in, b = b_in;
  std::sort(a.begin() + (a.empty() ? 0 : 1), a.end());
  std::sort(b.begin() + (b.empty() ? 0 : 1), b.end());
  return a == b;
}

// The digest of a set of lines: their count and the sums of each line's
// 128-bit XXH3, so the order the lines come in does not matter.
void ManifestDigest::Add(const std::string& line) {
  XXH128_hash_t h = XXH3_128bits(line.data(), line.size());
  ++n_;
  a_ += h.low64;
  b_ += h.high64;
}

std::string ManifestDigest::str() const {
  char b[64];
  std::snprintf(b, sizeof b, "%llu-%016llx-%016llx", static_cast<unsigned long long>(n_),
                static_cast<unsigned long long>(a_), static_cast<unsigned long long>(b_));
  return b;
}

std::string DigestOf(const std::vector<std::string>& lines) {
  ManifestDigest d;
  for (const auto& l : lines) d.Add(l);
  return d.str();
}

namespace {

// ---- wire format between the walker child and the parent ------------------
enum Kind : uint8_t { kRoot = 1, kEntry = 2, kError = 3, kEnd = 4 };
struct Wire {
  uint8_t kind;
  char type;  // 'd', 'f', 'l'
  uint16_t path_len;
  uint16_t link_len;
  uint8_t has_fd;
  uint8_t pad;
  uint32_t mode;
  uint32_t mtime_nsec;
  uint64_t size;
  int64_t mtime_sec;
  int64_t ctime_sec;
  uint32_t ctime_nsec;
  uint32_t pad2;
  uint64_t ino;
};
constexpr size_t kMsgBytes = 60 * 1024;
constexpr size_t kMaxFdsPerMsg = 128;  // below SCM_MAX_FD (253)
constexpr uint64_t kLargeFile = 1 << 20;

struct Record {
  Kind kind;
  char type;
  uint32_t mode;
  uint64_t size;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;
  uint64_t ino = 0;
  std::string path;
  std::string link;
  int fd = -1;
};

// Light lines: directories only, by ctime (which, unlike mtime, no user can
// set: any entry added, removed or renamed in a directory moves it).
std::string LightLine(const Record& r) {
  char head[96];
  std::snprintf(head, sizeof head, "%c %o %lld.%09u ", r.kind == kRoot ? 'R' : 'd', r.mode & 07777,
                static_cast<long long>(r.ctime_sec), r.ctime_nsec);
  return head + r.path;
}

std::string ManifestLine(const Record& r) {
  char head[96];
  switch (r.type) {
    case 'd':
      std::snprintf(head, sizeof head, "d %o ", r.mode & 07777);
      return head + r.path;
    case 'f':
      std::snprintf(head, sizeof head, "f %o %llu %lld.%09u ", r.mode & 07777,
                    static_cast<unsigned long long>(r.size), static_cast<long long>(r.mtime_sec), r.mtime_nsec);
      return head + r.path;
    default:
      return "l " + r.path + " -> " + r.link;
  }
}

// ---- the child: runs as the job user --------------------------------------
class Sender {
 public:
  explicit Sender(int sock) : sock_(sock) { buf_.reserve(kMsgBytes); }
  bool Add(Kind kind, char type, const struct stat* st, const std::string& path, const std::string& link, int fd) {
    size_t need = sizeof(Wire) + path.size() + link.size();
    if (path.size() > 65535 || link.size() > 65535) return false;
    if (buf_.size() + need > kMsgBytes || fds_.size() >= kMaxFdsPerMsg)
      if (!Flush()) return false;
    Wire w{};
    w.kind = kind;
    w.type = type;
    w.path_len = static_cast<uint16_t>(path.size());
    w.link_len = static_cast<uint16_t>(link.size());
    w.has_fd = fd >= 0;
    if (st) {
      w.mode = st->st_mode;
      w.size = static_cast<uint64_t>(st->st_size);
      w.mtime_sec = st->st_mtim.tv_sec;
      w.mtime_nsec = static_cast<uint32_t>(st->st_mtim.tv_nsec);
      w.ctime_sec = st->st_ctim.tv_sec;
      w.ctime_nsec = static_cast<uint32_t>(st->st_ctim.tv_nsec);
      w.ino = st->st_ino;
    }
    const char* p = reinterpret_cast<const char*>(&w);
    buf_.insert(buf_.end(), p, p + sizeof w);
    buf_.insert(buf_.end(), path.begin(), path.end());
    buf_.insert(buf_.end(), link.begin(), link.end());
    if (fd >= 0) fds_.push_back(fd);
    // Small early batches get the parent's workers going while we walk on.
    if (++count_ < 256 && fds_.size() >= 8) return Flush();
    return true;
  }
  bool Flush() {
    if (buf_.empty()) return true;
    struct iovec iov = {buf_.data(), buf_.size()};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> ctl;
    if (!fds_.empty()) {
      ctl.assign(CMSG_SPACE(sizeof(int) * fds_.size()), 0);
      msg.msg_control = ctl.data();
      msg.msg_controllen = ctl.size();
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds_.size());
      std::memcpy(CMSG_DATA(c), fds_.data(), sizeof(int) * fds_.size());
    }
    ssize_t n;
    do n = ::sendmsg(sock_, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    buf_.clear();
    return n >= 0;
  }

 private:
  int sock_;
  std::vector<char> buf_;
  std::vector<int> fds_;
  size_t count_ = 0;
};

enum class WalkMode { kCopy, kScan, kLight };

struct Walker {
  Sender* out;
  WalkMode mode;
  std::string root;  // resolved source path
  std::string error;
  // Scans for the cache's check digest here and send only the digest: no
  // per-entry traffic. (This process runs our code only, and is not
  // dumpable, so the user can't feed it a digest.)
  bool local_digest = false;
  ManifestDigest digest;
  const std::vector<std::string>* light_dirs = nullptr;  // kLight: the directories to stat

  bool Emit(Kind kind, char type, const struct stat* st, const std::string& path, const std::string& link, int fd) {
    if (!local_digest) return out->Add(kind, type, st, path, link, fd);
    if (kind == kRoot && mode != WalkMode::kLight) {
      digest.Add(std::string("root ") + type + " " + path);
      return true;
    }
    Record r;
    r.kind = kind;
    r.type = type;
    r.mode = st ? st->st_mode : 0;
    r.size = st ? static_cast<uint64_t>(st->st_size) : 0;
    r.mtime_sec = st ? st->st_mtim.tv_sec : 0;
    r.mtime_nsec = st ? static_cast<uint32_t>(st->st_mtim.tv_nsec) : 0;
    r.ctime_sec = st ? st->st_ctim.tv_sec : 0;
    r.ctime_nsec = st ? static_cast<uint32_t>(st->st_ctim.tv_nsec) : 0;
    r.path = path;
    r.link = link;
    digest.Add(mode == WalkMode::kLight ? LightLine(r) : ManifestLine(r));
    return true;
  }

  bool Fail(const std::string& what, int err) {
    error = what + ": " + std::strerror(err);
    return false;
  }

  // Lexical normalisation of "dir/target" relative to the root; false if it
  // climbs above the root.
  static bool LexicallyInside(const std::string& dir, const std::string& target) {
    std::vector<std::string> parts;
    std::string joined = dir.empty() ? target : dir + "/" + target;
    size_t i = 0;
    while (i <= joined.size()) {
      size_t j = joined.find('/', i);
      if (j == std::string::npos) j = joined.size();
      std::string c = joined.substr(i, j - i);
      if (c == "..") {
        if (parts.empty()) return false;
        parts.pop_back();
      } else if (!c.empty() && c != ".") {
        parts.push_back(c);
      }
      i = j + 1;
    }
    return true;
  }

  bool CheckLink(const std::string& dir, const std::string& rel, const std::string& target) {
    if (!target.empty() && target[0] == '/') {
      error = root + "/" + rel + ": symlink to absolute path '" + target + "' refused (staged copies keep only links inside the dataset)";
      return false;
    }
    std::string full = root + "/" + (dir.empty() ? "" : dir + "/") + target;
    char real[PATH_MAX];
    if (::realpath(full.c_str(), real) != nullptr) {
      std::string r = real;
      if (r == root || r.compare(0, root.size() + 1, root + "/") == 0) return true;
    } else if ((errno == ENOENT || errno == ENOTDIR) && LexicallyInside(dir, target)) {
      return true;  // dangling but inside: copied as is
    }
    error = root + "/" + rel + ": symlink '" + target + "' leaves the source tree; refused";
    return false;
  }

  bool Walk(int dirfd, const std::string& rel) {
    int dup_fd = ::dup(dirfd);
    if (dup_fd < 0) return Fail(root + "/" + rel, errno);
    DIR* d = ::fdopendir(dup_fd);
    if (!d) {
      ::close(dup_fd);
      return Fail(root + "/" + rel, errno);
    }
    bool ok = true;
    for (;;) {
      errno = 0;
      struct dirent* e = ::readdir(d);
      if (!e) {
        if (errno) ok = Fail(root + "/" + rel, errno);
        break;
      }
      const char* n = e->d_name;
      if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
      std::string path = rel.empty() ? std::string(n) : rel + "/" + n;
      unsigned char t = e->d_type;
      struct stat st;
      if (t == DT_UNKNOWN) {
        if (::fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) { ok = Fail(root + "/" + path, errno); break; }
        t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : DT_FIFO;
      }
      if (t == DT_DIR) {
        int sub = ::openat(dirfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || ::fstat(sub, &st) != 0) { ok = Fail(root + "/" + path, errno); if (sub >= 0) ::close(sub); break; }
        if (!Emit(kEntry, 'd', &st, path, "", -1)) { ok = Fail("sending to the stager", errno); ::close(sub); break; }
        ok = Walk(sub, path);
        ::close(sub);
        if (!ok) break;
      } else if (t == DT_REG) {
        if (mode == WalkMode::kLight) {
          if (!Emit(kEntry, 'f', nullptr, path, "", -1)) { ok = Fail("sending to the stager", errno); break; }
        } else if (mode == WalkMode::kCopy) {
          int fd = ::openat(dirfd, n, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
          if (fd < 0 || ::fstat(fd, &st) != 0) { ok = Fail(root + "/" + path, errno); if (fd >= 0) ::close(fd); break; }
          if (!S_ISREG(st.st_mode)) { ::close(fd); error = root + "/" + path + ": changed type while walking"; ok = false; break; }
          if (!Emit(kEntry, 'f', &st, path, "", fd)) { ok = Fail("sending to the stager", errno); break; }
        } else {
          if (::fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) { ok = Fail(root + "/" + path, errno); break; }
          if (::faccessat(dirfd, n, R_OK, AT_SYMLINK_NOFOLLOW) != 0) { ok = Fail(root + "/" + path, errno); break; }
          if (!Emit(kEntry, 'f', &st, path, "", -1)) { ok = Fail("sending to the stager", errno); break; }
        }
      } else if (t == DT_LNK) {
        char buf[PATH_MAX];
        ssize_t len = ::readlinkat(dirfd, n, buf, sizeof buf - 1);
        if (len < 0) { ok = Fail(root + "/" + path, errno); break; }
        std::string target(buf, static_cast<size_t>(len));
        if (!CheckLink(rel, path, target)) { ok = false; break; }
        // The copy records the link's inode and ctime for the warm check.
        bool have = mode == WalkMode::kCopy && ::fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!Emit(kEntry, 'l', have ? &st : nullptr, path, target, -1)) { ok = Fail("sending to the stager", errno); break; }
      } else {
        error = root + "/" + path + ": not a regular file, directory or symlink (fifo, socket or device); refused";
        ok = false;
        break;
      }
    }
    ::closedir(d);
    return ok;
  }

  bool Run(const std::string& src) {
    char real[PATH_MAX];
    if (::realpath(src.c_str(), real) == nullptr) return Fail(src, errno);
    root = real;
    int fd = ::open(real, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0) { int e = errno; if (fd >= 0) ::close(fd); return Fail(src, e); }
    if (S_ISDIR(st.st_mode) && mode == WalkMode::kLight) {
      // O(directories): stat each directory the copy recorded. Any change
      // of entries anywhere moves some directory's ctime, including one
      // replaced by a symlink (its parent's). A missing one reads "x".
      Emit(kRoot, 'd', &st, root, "", -1);
      for (const auto& d : *light_dirs) {
        struct stat ds;
        if (::fstatat(fd, d.c_str(), &ds, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ds.st_mode)) Emit(kEntry, 'd', &ds, d, "", -1);
        else digest.Add("x " + d);
      }
      ::close(fd);
      return true;
    }
    if (S_ISDIR(st.st_mode)) {
      if (!Emit(kRoot, 'd', &st, root, "", -1)) { ::close(fd); return Fail("sending to the stager", errno); }
      bool ok = Walk(fd, "");
      ::close(fd);
      return ok;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      error = src + ": not a directory or regular file";
      return false;
    }
    if (mode != WalkMode::kCopy) {
      ::close(fd);
      if (::access(real, R_OK) != 0) return Fail(src, errno);
      fd = -1;
    }
    if (!Emit(kRoot, 'f', &st, root, "", fd)) return Fail("sending to the stager", errno);
    return true;
  }
};

// Drop to the job user: groups first, then gid, then uid (after setreuid we
// could no longer change groups). Verified: getting root back must fail.
}  // namespace

bool DropToStageUser(const StageIdentity& who, std::string* error) {
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (!who.user.empty()) {
    if (::getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<size_t>(n));
      if (::getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) n = 0;
    }
  } else {
    n = 0;
  }
  if (n <= 0) { groups.assign(1, who.gid); n = 1; }
  if (::setgroups(static_cast<size_t>(n), groups.data()) != 0) { *error = std::string("setgroups: ") + std::strerror(errno); return false; }
  if (::setregid(who.gid, who.gid) != 0) { *error = std::string("setregid: ") + std::strerror(errno); return false; }
  if (::setreuid(who.uid, who.uid) != 0) { *error = std::string("setreuid: ") + std::strerror(errno); return false; }
  if (who.uid != 0 && (::setreuid(0, 0) == 0 || ::geteuid() != who.uid)) { *error = "privileges could not be dropped"; return false; }
  return true;
}

namespace {

[[noreturn]] void ChildMain(int sock, const std::string& src, const StageIdentity& who, WalkMode mode,
                            bool local_digest, const std::vector<std::string>* light_dirs) {
  // Only the socket and stdio survive: the parent's lock and cache fds must
  // not live on in a process running as the user.
  if (sock != 3) {
    ::dup2(sock, 3);
    sock = 3;
  }
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  Sender out(sock);
  std::string error;
  if (who.drop && !DropToStageUser(who, &error)) {
    error = "cannot read as user " + std::to_string(who.uid) + ": " + error;
  } else {
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // after the uid change, which clears it
    Walker w{&out, mode, "", "", local_digest, {}, light_dirs};
    if (w.Run(src)) {
      out.Add(kEnd, 0, nullptr, local_digest ? w.digest.str() : "", "", -1);
      out.Flush();
      ::_exit(0);
    }
    error = w.error;
  }
  out.Add(kError, 0, nullptr, error, "", -1);
  out.Flush();
  ::_exit(1);
}

// ---- the parent -----------------------------------------------------------
struct Child {
  pid_t pid = -1;
  int sock = -1;
};

Status StartChild(const std::string& src, const StageIdentity& who, WalkMode mode, Child* c,
                  bool local_digest = false, const std::vector<std::string>* light_dirs = nullptr) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return Status::FromErrno(errno, "socketpair");
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return Status::FromErrno(e, "fork");
  }
  if (pid == 0) {
    ::close(sv[0]);
    ChildMain(sv[1], src, who, mode, local_digest, light_dirs);
  }
  ::close(sv[1]);
  c->pid = pid;
  c->sock = sv[0];
  return Status::Ok();
}

void StopChild(Child* c, bool kill) {
  if (c->pid > 0) {
    if (kill) ::kill(c->pid, SIGKILL);
    int st;
    while (::waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
    c->pid = -1;
  }
  if (c->sock >= 0) ::close(c->sock);
  c->sock = -1;
}

// Receives batches; calls on_record for each; closes unclaimed fds.
// Returns false with *error/*side on a child error, timeout or protocol
// failure; true at kEnd.
template <class F>
Status Receive(Child* c, double deadline, const std::string& src, FaultSide* side, F&& on_record,
               std::string* end_text = nullptr) {
  std::vector<char> buf(kMsgBytes + 1024);
  std::vector<char> ctl(CMSG_SPACE(sizeof(int) * 256));
  for (;;) {
    if (deadline > 0) {
      double left = deadline - MonotonicSeconds();
      if (left <= 0) {
        *side = FaultSide::kSource;
        return Status::Timeout("staging " + src + ": timed out while reading the source");
      }
      struct pollfd p = {c->sock, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000 + 1, 60000.0)));
      if (r == 0) continue;
      if (r < 0 && errno == EINTR) continue;
    }
    struct iovec iov = {buf.data(), buf.size()};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.data();
    msg.msg_controllen = ctl.size();
    ssize_t n = ::recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    std::vector<int> fds;
    for (struct cmsghdr* h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int* p = reinterpret_cast<const int*>(CMSG_DATA(h));
        fds.insert(fds.end(), p, p + k);
      }
    }
    size_t next_fd = 0;
    auto close_rest = [&] { for (size_t i = next_fd; i < fds.size(); ++i) ::close(fds[i]); };
    if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
      close_rest();
      *side = FaultSide::kNode;
      return n < 0 ? Status::FromErrno(errno, "reading from the source walker")
                   : Status::IOError("staging " + src + ": source walker ended without a result");
    }
    size_t off = 0;
    while (off + sizeof(Wire) <= static_cast<size_t>(n)) {
      Wire w;
      std::memcpy(&w, buf.data() + off, sizeof w);
      off += sizeof w;
      if (off + w.path_len + w.link_len > static_cast<size_t>(n)) break;
      Record r;
      r.kind = static_cast<Kind>(w.kind);
      r.type = w.type;
      r.mode = w.mode;
      r.size = w.size;
      r.mtime_sec = w.mtime_sec;
      r.mtime_nsec = w.mtime_nsec;
      r.ctime_sec = w.ctime_sec;
      r.ctime_nsec = w.ctime_nsec;
      r.ino = w.ino;
      r.path.assign(buf.data() + off, w.path_len);
      off += w.path_len;
      r.link.assign(buf.data() + off, w.link_len);
      off += w.link_len;
      if (w.has_fd) {
        if (next_fd >= fds.size()) { close_rest(); *side = FaultSide::kNode; return Status::IOError("source walker: descriptor missing"); }
        r.fd = fds[next_fd++];
      }
      if (r.kind == kError) {
        if (r.fd >= 0) ::close(r.fd);
        close_rest();
        *side = FaultSide::kSource;
        Status s = Status::Permission(r.path);
        if (r.path.find("No such file") != std::string::npos) s = Status::NotFound(r.path);
        else if (r.path.find("Permission denied") == std::string::npos && r.path.find("Operation not permitted") == std::string::npos)
          s = Status::IOError(r.path);
        return s;
      }
      if (r.kind == kEnd) {
        close_rest();
        if (end_text) *end_text = r.path;
        return Status::Ok();
      }
      Status s = on_record(r);  // takes ownership of r.fd
      if (!s.ok()) { close_rest(); return s; }
    }
    close_rest();
  }
}

// Classify a write-side errno.
FaultSide DestSide(int err) { return err == ENOSPC || err == EDQUOT ? FaultSide::kDestSpace : FaultSide::kNode; }

struct Task {
  int src = -1;
  int dirfd = -1;
  std::string path;  // relative to dirfd
  std::string shown;
  uint64_t size;
  uint32_t mode;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;
  uint32_t check_index = UINT32_MAX;  // in CopyOptions' check builder
};

class CopyPool {
 public:
  CopyPool(const CopyOptions& o, StageFs& fs, CheckManifestBuilder* check) : o_(o), fs_(fs), check_(check) {}
  void Start(unsigned n) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
  }
  // Queues files in batches (one lock and one wake-up per batch, not per
  // file: with many small files the hand-off is otherwise the cost). Blocks
  // while the queue is full, which bounds the open descriptors.
  void Push(Task t) {
    pending_.push_back(std::move(t));
    if (pending_.size() >= kBatch) Flush();
  }
  void Flush() {
    if (pending_.empty()) return;
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return q_.size() < kMaxQueued || failed_; });
    q_.push_back(std::move(pending_));
    pending_.clear();
    not_empty_.notify_one();
  }
  void Finish() {
    Flush();
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    not_empty_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void Fail(Status s, FaultSide side) {
    std::lock_guard<std::mutex> l(mu_);
    if (!failed_) {
      failed_ = true;
      failed_fast_ = true;
      status_ = std::move(s);
      side_ = side;
    }
    not_full_.notify_all();
  }
  bool failed() { return failed_fast_.load(std::memory_order_relaxed); }
  Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return status_;
  }
  FaultSide side() {
    std::lock_guard<std::mutex> l(mu_);
    return side_;
  }
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> files{0};

 private:
  static constexpr size_t kBatch = 32;
  static constexpr size_t kMaxQueued = 64;  // batches

  void Loop() {
    std::vector<char> buf(kLargeFile);
    for (;;) {
      std::vector<Task> batch;
      {
        std::unique_lock<std::mutex> l(mu_);
        not_empty_.wait(l, [&] { return !q_.empty() || done_; });
        if (q_.empty()) return;
        batch = std::move(q_.front());
        q_.pop_front();
        not_full_.notify_one();
      }
      for (auto& t : batch) {
        if (!failed_fast_.load(std::memory_order_relaxed)) CopyOne(t, buf);
        ::close(t.src);
      }
    }
  }

  void CopyOne(const Task& t, std::vector<char>& buf) {
    if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
      Fail(Status::Timeout("staging: timed out copying " + t.shown), FaultSide::kSource);
      return;
    }
    mode_t mode = (t.mode & 0111) ? 0755 : 0644;
    int out = fs_.OpenAt(t.dirfd, t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out < 0) {
      int e = errno;
      Fail(Status::FromErrno(e, "create " + t.shown), DestSide(e));
      return;
    }
    uint64_t done = 0;
    bool ok = true;
    if (t.size >= kLargeFile) {
      ::posix_fadvise(t.src, 0, 0, POSIX_FADV_SEQUENTIAL);
      off_t in_off = 0;
      while (done < t.size) {
        if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
          Fail(Status::Timeout("staging: timed out copying " + t.shown), FaultSide::kSource);
          ok = false;
          break;
        }
        ssize_t n = fs_.CopyFileRange(t.src, &in_off, out, std::min<uint64_t>(t.size - done, 64ull << 20));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          int e = errno;
          if (e == ENOSPC || e == EDQUOT) { Fail(Status::FromErrno(e, "write " + t.shown), FaultSide::kDestSpace); ok = false; }
          break;  // anything else: the read/write path below says which side failed
        }
        if (n == 0) break;
        done += static_cast<uint64_t>(n);
      }
    }
    while (ok && done < t.size) {
      ssize_t n = fs_.Pread(t.src, buf.data(), std::min<uint64_t>(buf.size(), t.size - done), static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Fail(Status::FromErrno(errno, "read " + t.shown), FaultSide::kSource);
        ok = false;
        break;
      }
      if (n == 0) break;  // shrank: caught below
      size_t w = 0;
      while (w < static_cast<size_t>(n)) {
        ssize_t k = fs_.Write(out, buf.data() + w, static_cast<size_t>(n) - w);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
          int e = errno;
          Fail(Status::FromErrno(e, "write " + t.shown), DestSide(e));
          ok = false;
          break;
        }
        w += static_cast<size_t>(k);
      }
      if (!ok) break;
      done += static_cast<uint64_t>(n);
      if (o_.deadline > 0 && done < t.size && MonotonicSeconds() > o_.deadline) {
        Fail(Status::Timeout("staging: timed out copying " + t.shown), FaultSide::kSource);
        ok = false;
      }
    }
    if (ok) {
      // Verify before the caller may publish: all bytes, and the source
      // not changed since the walker opened it.
      struct stat st;
      if (::fstat(t.src, &st) != 0) {
        Fail(Status::FromErrno(errno, "stat " + t.shown), FaultSide::kSource);
        ok = false;
      } else if (done != t.size || static_cast<uint64_t>(st.st_size) != t.size || st.st_mtim.tv_sec != t.mtime_sec ||
                 static_cast<uint32_t>(st.st_mtim.tv_nsec) != t.mtime_nsec ||
                 (check_ && (st.st_ctim.tv_sec != t.ctime_sec || static_cast<uint32_t>(st.st_ctim.tv_nsec) != t.ctime_nsec))) {
        Fail(Status::IOError(t.shown + ": changed while being copied (size " + std::to_string(t.size) + " -> " +
                             std::to_string(st.st_size) + "); stage it again once it is stable"),
             FaultSide::kSource);
        ok = false;
      }
    }
    if (ok) {
      struct timespec ts[2] = {{t.mtime_sec, static_cast<long>(t.mtime_nsec)}, {t.mtime_sec, static_cast<long>(t.mtime_nsec)}};
      if (fs_.Futimens(out, ts) != 0) {
        int e = errno;
        Fail(Status::FromErrno(e, "set times on " + t.shown), DestSide(e));
        ok = false;
      }
    }
    if (fs_.Close(out) != 0 && ok) {
      int e = errno;
      Fail(Status::FromErrno(e, "close " + t.shown), DestSide(e));
      ok = false;
    }
    if (ok && check_ && t.check_index != UINT32_MAX) {
      // A POSIX ACL makes the warm check ask the kernel for this file
      // instead of deciding from the mode bits. Unsure: treat as ACL.
      ssize_t n = ::fgetxattr(t.src, "system.posix_acl_access", nullptr, 0);
      if (n >= 0 || (errno != ENODATA && errno != EOPNOTSUPP)) check_->MarkAcl(t.check_index);
    }
    if (ok) {
      bytes += done;
      ++files;
    }
  }

  const CopyOptions& o_;
  StageFs& fs_;
  CheckManifestBuilder* check_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<std::vector<Task>> q_;
  std::vector<Task> pending_;  // the receiver's batch being filled
  std::atomic<bool> failed_fast_{false};
  std::vector<std::thread> threads_;
  bool done_ = false;
  bool failed_ = false;
  Status status_;
  FaultSide side_ = FaultSide::kNone;
};

void RaiseFdLimit() {
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max && r.rlim_cur < 65536) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

Status ScanSource(const std::string& src, const CopyOptions& o, std::vector<std::string>* manifest, FaultSide* side,
                  std::string* digest) {
  *side = FaultSide::kNone;
  if (manifest) manifest->clear();
  ManifestDigest dg;
  Child c;
  bool local = manifest == nullptr;  // digest only: the walker computes it
  bool light = o.dirs_only && o.light_dirs != nullptr && local;
  Status s = StartChild(src, o.who, light ? WalkMode::kLight : WalkMode::kScan, &c, local, o.light_dirs);
  if (!s.ok()) { *side = FaultSide::kNode; return s; }
  std::string end;
  s = Receive(
      &c, o.deadline, src, side,
      [&](Record& r) {
        std::string line = r.kind == kRoot ? std::string("root ") + r.type + " " + r.path : ManifestLine(r);
        dg.Add(line);
        if (manifest) manifest->push_back(std::move(line));
        return Status::Ok();
      },
      &end);
  StopChild(&c, !s.ok());
  if (digest) *digest = local ? end : dg.str();
  return s;
}

Status CopyTree(const std::string& src, int dst_dir_fd, const std::string& dst_name, const CopyOptions& o,
                CopyStats* stats, std::vector<std::string>* manifest, FaultSide* side,
                std::vector<std::string>* light, CheckManifestBuilder* check) {
  *side = FaultSide::kNone;
  if (light) light->clear();
  *stats = CopyStats();
  manifest->clear();
  StageFs& fs = o.fs ? *o.fs : DefaultStageFs();
  double t0 = MonotonicSeconds();
  RaiseFdLimit();
  Child c;
  Status s = StartChild(src, o.who, WalkMode::kCopy, &c);
  if (!s.ok()) { *side = FaultSide::kNode; return s; }

  CopyPool pool(o, fs, check);
  pool.Start(std::max(1u, o.workers));
  int droot = -1;
  uint64_t expect_files = 0;
  bool aborted = false;  // a worker failed first; its status is the one to report
  s = Receive(&c, o.deadline, src, side, [&](Record& r) -> Status {
    if (pool.failed()) {
      if (r.fd >= 0) ::close(r.fd);
      aborted = true;
      return Status::Failed("aborted");
    }
    if (r.kind == kRoot) {
      manifest->push_back(std::string("root ") + r.type + " " + r.path);
      if (light && r.type == 'd') light->push_back(LightLine(r));
      if (r.type == 'f') {
        ++expect_files;
        pool.Push({r.fd, dst_dir_fd, dst_name, dst_name, r.size, r.mode, r.mtime_sec, r.mtime_nsec});
        return Status::Ok();
      }
      if (check) check->Root(r.path, r.mode, r.ino, r.ctime_sec, r.ctime_nsec);
      if (fs.MkdirAt(dst_dir_fd, dst_name.c_str(), 0755) != 0) {
        int e = errno;
        *side = DestSide(e);
        return Status::FromErrno(e, "mkdir " + dst_name);
      }
      droot = ::openat(dst_dir_fd, dst_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (droot < 0) { int e = errno; *side = DestSide(e); return Status::FromErrno(e, "open " + dst_name); }
      ++stats->dirs;
      return Status::Ok();
    }
    manifest->push_back(ManifestLine(r));
    if (light && r.type == 'd') light->push_back(LightLine(r));
    if (droot < 0) { if (r.fd >= 0) ::close(r.fd); *side = FaultSide::kNode; return Status::IOError("source walker: entry before root"); }
    std::string shown = dst_name + "/" + r.path;
    uint32_t ci = check ? check->Add(r.type, r.path, r.mode, r.size, r.ino, r.mtime_sec, r.mtime_nsec, r.ctime_sec,
                                     r.ctime_nsec, r.link)
                        : UINT32_MAX;
    if (r.type == 'd') {
      if (fs.MkdirAt(droot, r.path.c_str(), 0755) != 0) { int e = errno; *side = DestSide(e); return Status::FromErrno(e, "mkdir " + shown); }
      ++stats->dirs;
    } else if (r.type == 'l') {
      if (fs.SymlinkAt(r.link.c_str(), droot, r.path.c_str()) != 0) { int e = errno; *side = DestSide(e); return Status::FromErrno(e, "symlink " + shown); }
      ++stats->symlinks;
    } else {
      ++expect_files;
      pool.Push({r.fd, droot, r.path, shown, r.size, r.mode, r.mtime_sec, r.mtime_nsec, r.ctime_sec, r.ctime_nsec, ci});
    }
    return Status::Ok();
  });
  StopChild(&c, !s.ok());
  if (!s.ok() && !aborted) pool.Fail(s, *side);  // workers skip what is queued
  pool.Finish();
  if (droot >= 0) ::close(droot);
  if (pool.failed()) {
    *side = pool.side();
    return pool.status();
  }
  if (!s.ok() && !aborted) return s;
  if (pool.files.load() != expect_files) {
    *side = FaultSide::kNode;
    return Status::IOError("staging " + src + ": copied " + std::to_string(pool.files.load()) + " of " +
                           std::to_string(expect_files) + " files");
  }
  stats->bytes = pool.bytes.load();
  stats->files = pool.files.load();
  stats->seconds = MonotonicSeconds() - t0;
  return Status::Ok();
}

Status RemoveTreeAt(int dirfd, const std::string& name, const std::string& shown) {
  struct statx sx;
  if (::statx(dirfd, name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FromErrno(errno, "stat " + shown);
  }
  if (!S_ISDIR(sx.stx_mode)) {
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno(errno, "unlink " + shown);
    return Status::Ok();
  }
  if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT && sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
    return Status::FromErrno(EBUSY, "remove " + shown + " (a mount point)");
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + shown);
  DIR* d = ::fdopendir(fd);
  if (!d) { int e = errno; ::close(fd); return Status::FromErrno(e, "open " + shown); }
  Status first;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    names.push_back(n);
  }
  for (const auto& n : names) {
    Status s = RemoveTreeAt(::dirfd(d), n, shown + "/" + n);
    if (!s.ok() && first.ok()) first = s;
  }
  ::closedir(d);
  if (!first.ok()) return first;
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return Status::FromErrno(errno, "rmdir " + shown);
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Status::Ok() : Status::FromErrno(errno, "open " + parent);
  Status s = RemoveTreeAt(fd, name, path);
  ::close(fd);
  return s;
}

}  // namespace preflight
