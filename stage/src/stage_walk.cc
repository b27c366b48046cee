// The source walker (stage_walk.h).
#include "stage_walk.h"

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

#include "preflight/clock.h"
#include "preflight/report.h"
#include "preflight/stage_manifest.h"
#include "preflight/stage_spec.h"
#include "stage_user_child.h"
#include "stage_walk_open.h"
#include "stage_walk_send.h"

namespace preflight {

namespace stage_internal {

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

namespace {

// ---- the child: runs as the job user --------------------------------------

struct Walker {
  Sender* out = nullptr;
  WalkMode mode = WalkMode::kCopy;
  std::string root;  // resolved source path
  std::string error;
  // Scans for the cache's check digest here and send only the digest: no
  // per-entry traffic. (This process runs our code only, and is not
  // dumpable, so the user can't feed it a digest.)
  bool local_digest = false;
  ManifestDigest digest;
  const std::vector<std::string>* light_dirs = nullptr;  // kLight: the directories to stat
  int error_errno = 0;  // with `error`: the failed call's errno (0: a refusal)
  // A copy walk of a network source: files opened on these threads
  // (stage_walk_open.h); nullptr: in the walk itself.
  unsigned remote_openers = 0;
  Openers* openers = nullptr;
  std::mutex emit_mu;  // the walk and the openers share `out`

  bool Emit(Kind kind, char type, const struct stat* st, const std::string& path, const std::string& link, int fd) {
    if (!local_digest) {
      std::vector<int> sent;
      bool ok;
      int err;
      {
        std::lock_guard<std::mutex> l(emit_mu);
        ok = out->Add(kind, type, st, path, link, fd);
        err = errno;
        out->TakeSent(&sent);
      }
      for (int s : sent) ::close(s);  // out of the lock: on FUSE each is a round trip
      errno = err;  // the caller reports a failed send by it
      return ok;
    }
    if (kind == kRoot && mode != WalkMode::kLight) {
      digest.Add(ManifestRootLine(type, path));
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
    error_errno = err;
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

  // `hold`: owns dirfd when openers may still use it after this returns.
  bool Walk(int dirfd, const std::string& rel, const std::shared_ptr<DirFd>& hold) {
    int dup_fd = ::dup(dirfd);
    if (dup_fd < 0) return Fail(root + "/" + rel, errno);
    DIR* d = ::fdopendir(dup_fd);
    if (!d) {
      ::close(dup_fd);
      return Fail(root + "/" + rel, errno);
    }
    bool ok = true;
    for (;;) {
      if (openers && openers->failed()) { ok = false; break; }
      errno = 0;
      struct dirent* e = ::readdir(d);
      if (!e) {
        if (errno) ok = Fail(root + "/" + rel, errno);
        break;
      }
      const char* n = e->d_name;
      if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
      std::string path = rel.empty() ? std::string(n) : rel + "/" + n;
      if (path.size() > kMaxStageRelPathBytes) {
        // The copy makes each entry relative to its root in one call, which
        // the kernel bounds at PATH_MAX: a deeper tree is the user's to
        // flatten, never a fault of the node that would copy it.
        error = root + "/" + path.substr(0, 120) + "...: path is " + std::to_string(path.size()) +
                " bytes below the dataset's root; the limit is " + std::to_string(kMaxStageRelPathBytes) +
                " (PATH_MAX); refused";
        ok = false;
        break;
      }
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
        if (openers) {
          ok = Walk(sub, path, std::make_shared<DirFd>(sub));
        } else {
          ok = Walk(sub, path, nullptr);
          ::close(sub);
        }
        if (!ok) break;
      } else if (t == DT_REG) {
        if (mode == WalkMode::kLight) {
          if (!Emit(kEntry, 'f', nullptr, path, "", -1)) { ok = Fail("sending to the stager", errno); break; }
        } else if (mode == WalkMode::kCopy && openers) {
          if (!openers->Open(hold, n, path)) { ok = false; break; }
        } else if (mode == WalkMode::kCopy) {
          int e = 0;
          int fd = OpenRegularAt(dirfd, n, &st, &e);
          if (fd < 0 && e != 0) { ok = Fail(root + "/" + path, e); break; }
          if (fd < 0) { error = root + "/" + path + ": changed type while walking"; ok = false; break; }
          if (!Emit(kEntry, 'f', &st, path, "", fd)) { ok = Fail("sending to the stager", errno); break; }
        } else {
          if (::fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) { ok = Fail(root + "/" + path, errno); break; }
          if (::faccessat(dirfd, n, R_OK, AT_SYMLINK_NOFOLLOW | AT_EACCESS) != 0) { ok = Fail(root + "/" + path, errno); break; }
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
    std::string pseudo;
    if (OnPseudoFilesystem(fd, &pseudo)) {
      ::close(fd);
      error = src + ": on the kernel's " + pseudo + " pseudo filesystem, whose files change while read; refused";
      return false;
    }
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
      std::string net;
      bool remote = OnNetworkFilesystem(fd, &net);
      // The root's link field names a network file system (Record::link).
      if (!Emit(kRoot, 'd', &st, root, remote ? net : "", -1)) { ::close(fd); return Fail("sending to the stager", errno); }
      if (mode != WalkMode::kCopy || !remote || remote_openers < 2) {
        bool ok = Walk(fd, "", nullptr);
        ::close(fd);
        return ok;
      }
      Openers pool(remote_openers, root, [this](const struct stat& fst, const std::string& p, int ffd) {
        return Emit(kEntry, 'f', &fst, p, "", ffd);
      });
      openers = &pool;
      bool ok = Walk(fd, "", std::make_shared<DirFd>(fd));
      if (!ok && !error.empty()) pool.Stop();  // the walk's own refusal: the queued files are moot
      bool opened = pool.Finish();
      openers = nullptr;
      if (!opened && error.empty()) {
        error = pool.error();
        error_errno = pool.error_errno();
      }
      return ok && opened;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      error = src + ": not a directory or regular file";
      return false;
    }
    if (mode != WalkMode::kCopy) {
      ::close(fd);
      if (::faccessat(AT_FDCWD, real, R_OK, AT_EACCESS) != 0) return Fail(src, errno);  // the effective uid: the real one is 0 (stage_user.h)
      fd = -1;
    }
    if (!Emit(kRoot, 'f', &st, root, "", fd)) return Fail("sending to the stager", errno);
    return true;
  }
};

[[noreturn]] void ChildMain(int sock, const std::string& src, const StageIdentity& who, WalkMode mode,
                            bool local_digest, const std::vector<std::string>* light_dirs, unsigned remote_openers) {
  int err = 0;
  std::string error = BecomeStageUser(sock, who, &err);
  Sender out(3);
  if (error.empty()) {
    Walker w;
    w.out = &out;
    w.mode = mode;
    w.local_digest = local_digest;
    w.light_dirs = light_dirs;
    w.remote_openers = remote_openers;
    if (w.Run(src)) {
      out.Add(kEnd, 0, nullptr, local_digest ? w.digest.str() : "", "", -1);
      out.Flush();
      ::_exit(0);
    }
    error = w.error;
    err = w.error_errno;
  }
  out.Add(kError, 0, nullptr, error, "", -1, err);
  out.Flush();
  ::_exit(1);
}

}  // namespace

Status StartChild(const std::string& src, const StageIdentity& who, WalkMode mode, Child* c,
                  bool local_digest, const std::vector<std::string>* light_dirs, unsigned remote_openers) {
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
    ChildMain(sv[1], src, who, mode, local_digest, light_dirs, remote_openers);
  }
  ::close(sv[1]);
  c->pid = pid;
  c->sock = sv[0];
  return Status::Ok();
}

void StopChild(Child* c, bool kill) {
  if (c->pid > 0) {
    if (kill) {
      KillChild(c->pid);  // bounded: a walker stuck in a dead server is left
    } else {
      int st;
      while (::waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
    }
    c->pid = -1;
  }
  if (c->sock >= 0) ::close(c->sock);
  c->sock = -1;
}

Status Receive(Child* c, double deadline, const std::string& src, FaultSide* side,
               const std::function<Status(Record&)>& on_record, std::string* end_text) {
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
      if (n == 0) return StageChildEnd(&c->pid, "source walker", src, side);  // it ended: how?
      *side = FaultSide::kNode;
      return n < 0 ? Status::FromErrno(errno, "reading from the source walker")
                   : Status::IOError("staging " + src + ": a message from the source walker was cut");
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
      r.err = static_cast<int>(w.err);
      r.path.assign(buf.data() + off, w.path_len);
      off += w.path_len;
      r.link.assign(buf.data() + off, w.link_len);
      off += w.link_len;
      r.remote = r.kind == kRoot && !r.link.empty();  // a root's link names its network file system
      if (w.has_fd) {
        if (next_fd >= fds.size()) { close_rest(); *side = FaultSide::kNode; return Status::IOError("source walker: descriptor missing"); }
        r.fd = fds[next_fd++];
      }
      if (r.kind == kError) {
        if (r.fd >= 0) ::close(r.fd);
        close_rest();
        *side = FaultSide::kSource;
        // The child's errno says what kind of failure it was (the text is
        // the child's message, naming the user's path).
        if (r.err == ENOENT) return Status::NotFound(r.path);
        if (r.err == EACCES || r.err == EPERM) return Status::Permission(r.path);
        return Status::IOError(r.path);
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

}  // namespace stage_internal
}  // namespace preflight
