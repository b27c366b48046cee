// The warm check (stage_warm.h): the cached copy's `check` file against
// the live source, in a child that runs as the job user.
#include "preflight/stage_warm.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/stage_spec.h"
#include "stage_check_format.h"
#include "stage_user_child.h"

namespace preflight {

using namespace stage_internal;  // the check file's records

namespace {

struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Filesystems whose permission check is the kernel's generic_permission()
// (mode bits, then POSIX ACLs): for them the mode bits decide exactly
// when a file has no ACL.
bool GenericPermissionFs(long type) {
  switch (static_cast<unsigned long>(type)) {
    case TMPFS_MAGIC:
    case EXT4_SUPER_MAGIC:  // also ext2, ext3
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

int OpenBeneath(int rootfd, const char* path) {
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, rootfd, path, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS) return ::openat(rootfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return static_cast<int>(fd);
}

constexpr unsigned kStatxMask = STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID | STATX_INO | STATX_SIZE |
                                STATX_MTIME | STATX_CTIME;

}  // namespace

// Runs in the child, as the job user.
struct WarmChecker {
  const CheckManifest& m;
  Header h;
  const DirRec* dirs;
  const Rec* recs;
  const char* str;
  int rootfd = -1;
  uid_t uid;
  std::vector<gid_t> groups;
  std::atomic<bool> stop{false};
  // Work: directories by index (next), and the chunks of large
  // directories' entries (pending), queued by the thread that listed one;
  // `listing` threads are checking a directory and may still queue.
  // Chunks are taken round-robin across the pending directories, and a new
  // directory is listed while fewer than 2 x threads listings are alive:
  // a FUSE source (s3fs, gcsfuse, the harness's preflight-netfs) answers
  // lookups in one folder one at a time, so the waits overlap only across
  // folders.
  struct Listing {  // one directory's listing, shared by its chunks
    int fd = -1;
    std::string dpath;
    std::vector<char> buf;  // the names point into it
    std::vector<const char*> names;
    std::vector<uint32_t> order;
    bool generic = false;
    std::atomic<unsigned>* alive = nullptr;
    ~Listing() {
      if (fd >= 0) ::close(fd);
      if (alive) --*alive;
    }
  };
  struct Chunk {
    std::shared_ptr<Listing> l;
    uint32_t lo = 0, hi = 0;
  };
  struct Pending {
    std::shared_ptr<Listing> l;
    uint32_t lo = 0, count = 0;
  };
  static constexpr uint32_t kChunk = 64;  // entries per chunk of a large directory
  unsigned threads = 1;
  uint32_t next = 0;  // under qmu
  unsigned listing = 0;
  std::deque<Pending> pending;
  std::atomic<unsigned> alive{0};  // Listing objects
  std::mutex qmu;
  std::condition_variable qcv;
  std::mutex mu;
  char verdict = 'S';  // S same, D differs, P permission, E error
  std::string why;
  std::atomic<uint64_t> entries{0}, by_mode{0}, by_access{0};

  explicit WarmChecker(const CheckManifest& man) : m(man) {
    std::memcpy(&h, m.data_, sizeof h);
    const char* base = m.data_ + sizeof h;
    dirs = reinterpret_cast<const DirRec*>(base);
    recs = reinterpret_cast<const Rec*>(base + h.ndirs * sizeof(DirRec));
    str = base + h.ndirs * sizeof(DirRec) + h.nentries * sizeof(Rec);
  }

  void Set(char v, std::string w) {
    std::lock_guard<std::mutex> l(mu);
    if (verdict == 'S') {
      verdict = v;
      why = std::move(w);
    }
    stop = true;
  }
  std::string Shown(const std::string& dir, const char* name) const {
    std::string p = m.real_;
    if (!dir.empty()) p += "/" + dir;
    if (name) p += std::string("/") + name;
    return p;
  }
  void Errno(int e, const std::string& shown) {
    if (e == EACCES || e == EPERM) Set('P', shown + ": " + std::strerror(e));
    else if (e == ENOENT || e == ENOTDIR || e == ELOOP || e == EXDEV) Set('D', shown + ": " + std::strerror(e));
    else Set('E', shown + ": " + std::strerror(e));
  }
  bool InGroup(gid_t g) const { return std::find(groups.begin(), groups.end(), g) != groups.end(); }

  static bool SameTime(int64_t s, uint32_t ns, const struct statx_timestamp& t) {
    return t.tv_sec == s && t.tv_nsec == ns;
  }
  // Stored vs live; empty when equal.
  const char* Differs(const Rec& r, const struct statx& sx) const {
    if (sx.stx_mode != r.mode) return "type or mode changed";
    if (sx.stx_ino != r.ino) return "replaced";
    if (!SameTime(r.ctime_sec, r.ctime_nsec, sx.stx_ctime)) return "changed (ctime)";
    if (S_ISREG(r.mode) && (sx.stx_size != r.size || !SameTime(r.mtime_sec, r.mtime_nsec, sx.stx_mtime)))
      return "changed (size or mtime)";
    return nullptr;
  }

  void CheckEntry(int fd, const std::string& dpath, const char* name, const Rec& r, bool generic) {
    struct statx sx;
    if (::statx(fd, name, AT_SYMLINK_NOFOLLOW, kStatxMask, &sx) != 0) { Errno(errno, Shown(dpath, name)); return; }
    if (const char* d = Differs(r, sx)) { Set('D', Shown(dpath, name) + ": " + d); return; }
    if (S_ISREG(r.mode)) {
      if ((r.flags & kFlagAcl) || !generic || uid == 0) {
        ++by_access;
        if (::faccessat(fd, name, R_OK, AT_SYMLINK_NOFOLLOW | AT_EACCESS) != 0) Errno(errno, Shown(dpath, name));
        return;
      }
      ++by_mode;
      unsigned bits = sx.stx_uid == uid ? sx.stx_mode >> 6 : InGroup(sx.stx_gid) ? sx.stx_mode >> 3 : sx.stx_mode;
      if (!(bits & 4)) Set('P', Shown(dpath, name) + ": " + std::strerror(EACCES));
    } else if (S_ISLNK(r.mode)) {
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(fd, name, buf, sizeof buf);
      if (n < 0) { Errno(errno, Shown(dpath, name)); return; }
      if (static_cast<size_t>(n) != r.link_len || std::memcmp(buf, str + r.name_off + r.name_len + 1, r.link_len) != 0)
        Set('D', Shown(dpath, name) + ": symlink target changed");
    }
  }

  void CheckDir(uint32_t di, std::vector<char>& buf) {
    const DirRec& d = dirs[di];
    std::string dpath(str + d.path_off, d.path_len);
    int fd = d.self == kNoEntry ? ::dup(rootfd) : OpenBeneath(rootfd, dpath.c_str());
    if (fd < 0) { Errno(errno, Shown(dpath, nullptr)); return; }
    struct statx sx;
    const Rec& self = d.self == kNoEntry ? h.root : recs[d.self];
    if (::statx(fd, "", AT_EMPTY_PATH, kStatxMask, &sx) != 0) { Errno(errno, Shown(dpath, nullptr)); ::close(fd); return; }
    if (sx.stx_ino != self.ino || sx.stx_mode != self.mode) { Set('D', Shown(dpath, nullptr) + ": replaced"); ::close(fd); return; }
    struct statfs sf;
    bool generic = ::fstatfs(fd, &sf) == 0 && GenericPermissionFs(sf.f_type);
    // One listing: all of it, then the names.
    size_t used = 0;
    for (;;) {
      if (buf.size() - used < 32768) buf.resize(buf.size() * 2);
      long n = ::syscall(SYS_getdents64, fd, buf.data() + used, buf.size() - used);
      if (n < 0) { Errno(errno, Shown(dpath, nullptr)); ::close(fd); return; }
      if (n == 0) break;
      used += static_cast<size_t>(n);
    }
    std::vector<const char*> names;
    names.reserve(d.count);
    for (size_t o = 0; o < used;) {
      const Dirent64* e = reinterpret_cast<const Dirent64*>(buf.data() + o);
      o += e->d_reclen;
      const char* n = e->d_name;
      if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
      names.push_back(n);
    }
    if (names.size() != d.count) {
      Set('D', Shown(dpath, nullptr) + ": entries added or removed");
      ::close(fd);
      return;
    }
    // Usually the listing order is the stored one; if not, match by name.
    std::vector<uint32_t> order(d.count);
    bool in_order = true;
    for (uint32_t i = 0; i < d.count; ++i) {
      order[i] = d.first + i;
      if (in_order && std::strcmp(names[i], str + recs[d.first + i].name_off) != 0) in_order = false;
    }
    if (!in_order) {
      auto name_of = [&](uint32_t k) { return str + recs[k].name_off; };
      std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return std::strcmp(name_of(a), name_of(b)) < 0; });
      std::sort(names.begin(), names.end(), [](const char* a, const char* b) { return std::strcmp(a, b) < 0; });
      for (uint32_t i = 0; i < d.count; ++i)
        if (std::strcmp(names[i], name_of(order[i])) != 0) {
          Set('D', Shown(dpath, names[i]) + ": new entry");
          ::close(fd);
          return;
        }
    }
    entries += d.count;
    if (threads < 2 || d.count <= kChunk) {
      for (uint32_t i = 0; i < d.count && !stop.load(std::memory_order_relaxed); ++i)
        CheckEntry(fd, dpath, names[i], recs[order[i]], generic);
      ::close(fd);
      return;
    }
    // A large directory: its entries in chunks, on every thread free (on
    // a network source each statx is a round trip; one folder of 100k
    // files must not be one thread's serial walk).
    auto l = std::make_shared<Listing>();
    l->fd = fd;
    l->dpath = std::move(dpath);
    l->buf = std::move(buf);  // the names keep pointing into it
    buf.assign(1 << 16, 0);
    l->names = std::move(names);
    l->order = std::move(order);
    l->generic = generic;
    l->alive = &alive;
    ++alive;
    {
      std::lock_guard<std::mutex> g(qmu);
      pending.push_back({l, kChunk, d.count});
    }
    qcv.notify_all();
    RunChunk({l, 0, kChunk});
  }

  void RunChunk(const Chunk& c) {
    const Listing& l = *c.l;
    for (uint32_t i = c.lo; i < c.hi && !stop.load(std::memory_order_relaxed); ++i)
      CheckEntry(l.fd, l.dpath, l.names[i], recs[l.order[i]], l.generic);
  }

  void Loop() {
    std::vector<char> buf(1 << 16);
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) break;
      Chunk c;
      uint32_t i = UINT32_MAX;
      {
        std::unique_lock<std::mutex> g(qmu);
        qcv.wait(g, [&] { return !pending.empty() || next < h.ndirs || listing == 0 || stop.load(); });
        if (next < h.ndirs && (pending.empty() || alive.load() < 2 * threads)) {
          i = next++;
          ++listing;
        } else if (!pending.empty()) {
          Pending& p = pending.front();
          c = {p.l, p.lo, std::min(p.count, p.lo + kChunk)};
          p.lo += kChunk;
          Pending rest = std::move(p);
          pending.pop_front();
          if (rest.lo < rest.count) pending.push_back(std::move(rest));  // round-robin
        } else {
          break;  // nothing left, and no one listing who could add chunks
        }
      }
      if (stop.load(std::memory_order_relaxed)) {
        if (i != UINT32_MAX) {
          std::lock_guard<std::mutex> g(qmu);
          --listing;
        }
        break;
      }
      if (c.l) {
        RunChunk(c);
        continue;
      }
      CheckDir(i, buf);
      {
        std::lock_guard<std::mutex> g(qmu);
        --listing;
      }
      qcv.notify_all();
    }
    qcv.notify_all();  // a stop: the waiting threads end too
  }

  // `threads` on a local source, `remote_threads` on a network one.
  void Run(const std::string& src, unsigned local_threads, unsigned remote_threads) {
    char real[PATH_MAX];
    if (::realpath(src.c_str(), real) == nullptr) { Errno(errno, src); return; }
    if (m.real_ != real) { Set('D', src + ": now resolves to " + real); return; }
    rootfd = ::open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0) { Errno(errno, src); return; }
    uid = ::geteuid();
    groups.push_back(::getegid());
    int n = ::getgroups(0, nullptr);
    if (n > 0) {
      std::vector<gid_t> g(static_cast<size_t>(n));
      n = ::getgroups(n, g.data());
      if (n > 0) groups.insert(groups.end(), g.begin(), g.begin() + n);
    }
    threads = std::max(1u, local_threads);
    if (remote_threads > threads && OnNetworkFilesystem(rootfd, nullptr)) threads = remote_threads;
    unsigned t = threads;
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < t; ++i) pool.emplace_back([this] { Loop(); });
    Loop();
    for (auto& th : pool) th.join();
    ::close(rootfd);
  }
};

Status CheckUnchanged(const std::string& src, const CheckManifest& m, const StageIdentity& who, unsigned threads,
                      unsigned remote_threads, double deadline, WarmCheckResult* out, FaultSide* side) {
  *out = WarmCheckResult();
  *side = FaultSide::kNone;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) { *side = FaultSide::kNode; return Status::FromErrno(errno, "pipe"); }
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    *side = FaultSide::kNode;
    return Status::FromErrno(e, "fork");
  }
  if (pid == 0) {
    // As the copy's reader (stage_user_child.h): only the pipe survives.
    ::close(p[0]);
    std::string error = stage_internal::BecomeStageUser(p[1], who);
    std::string msg;
    if (!error.empty()) {
      msg = "E " + error;
    } else {
      WarmChecker w(m);
      w.Run(src, threads, remote_threads);
      if (w.verdict == 'S') {
        char b[96];
        std::snprintf(b, sizeof b, "S %llu %llu %llu", static_cast<unsigned long long>(w.entries.load()),
                      static_cast<unsigned long long>(w.by_mode.load()), static_cast<unsigned long long>(w.by_access.load()));
        msg = b;
      } else {
        msg = std::string(1, w.verdict) + " " + w.why;
      }
    }
    WriteAll(3, msg);  // a parent gone has no use for it
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    int wait_ms = -1;
    if (deadline > 0) {
      double left = deadline - MonotonicSeconds();
      if (left <= 0) { timed_out = true; break; }
      wait_ms = static_cast<int>(std::min(left * 1000 + 1, 60000.0));
    }
    struct pollfd pf = {p[0], POLLIN, 0};
    int r = ::poll(&pf, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  if (msg.empty() && !timed_out) return stage_internal::StageChildEnd(&pid, "cache check", src, side);
  if (timed_out) {
    KillChild(pid);  // bounded: a check stuck in a dead server is left
  } else {
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  }
  if (timed_out) {
    *side = FaultSide::kSource;
    return Status::Timeout("staging " + src + ": timed out checking the cached copy against the source");
  }
  std::string rest = msg.size() > 2 ? msg.substr(2) : "";
  switch (msg[0]) {
    case 'S': {
      unsigned long long e = 0, bm = 0, ba = 0;
      std::sscanf(rest.c_str(), "%llu %llu %llu", &e, &bm, &ba);
      out->same = true;
      out->entries = e;
      out->by_mode = bm;
      out->by_access = ba;
      return Status::Ok();
    }
    case 'D':
      out->why = rest;
      return Status::Ok();
    case 'P':
      *side = FaultSide::kSource;
      return Status::Permission(rest);
    default:
      *side = rest.find("cannot read as user") == 0 ? FaultSide::kNode : FaultSide::kSource;
      return Status::IOError(rest);
  }
}

}  // namespace preflight
