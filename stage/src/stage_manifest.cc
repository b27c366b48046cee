#include "preflight/stage_manifest.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "stage_user_child.h"

namespace preflight {

namespace {

constexpr char kMagic[8] = {'P', 'F', 'C', 'H', 'K', '0', '1', '\n'};
constexpr uint32_t kNoEntry = UINT32_MAX;
constexpr uint8_t kFlagAcl = 1;

struct Rec {  // one entry (and the root)
  uint64_t ino, size;
  int64_t mtime_sec, ctime_sec;
  uint32_t mtime_nsec, ctime_nsec, mode, name_off;  // name, NUL, link target, NUL
  uint16_t name_len, link_len;
  uint8_t flags, pad[3];
};
struct DirRec {
  uint32_t path_off, path_len, first, count, self;  // self: its entry in the parent; kNoEntry for the root
  uint32_t pad;
};
struct Header {
  char magic[8];
  uint32_t ndirs, nentries, strings_len, real_len;  // the real path is the strings' first bytes
  Rec root;
};

}  // namespace

void CheckManifestBuilder::Root(const std::string& real, uint32_t mode, uint64_t ino, int64_t ctime_sec,
                                uint32_t ctime_nsec) {
  real_ = real;
  root_ = Item{'d', mode, 0, ino, 0, ctime_sec, 0, ctime_nsec, "", ""};
  if (dirs_.empty()) {
    dirs_.push_back({"", kNoEntry, {}});
    dir_index_[""] = 0;
  }
}

uint32_t CheckManifestBuilder::Add(char type, const std::string& path, uint32_t mode, uint64_t size, uint64_t ino,
                                   int64_t mtime_sec, uint32_t mtime_nsec, int64_t ctime_sec, uint32_t ctime_nsec,
                                   const std::string& link) {
  if (dirs_.empty()) {
    dirs_.push_back({"", kNoEntry, {}});
    dir_index_[""] = 0;
  }
  size_t slash = path.rfind('/');
  size_t plen = slash == std::string::npos ? 0 : slash;
  uint32_t parent = last_dir_;
  const std::string& lp = dirs_[parent].path;
  if (lp.size() != plen || path.compare(0, plen, lp) != 0) {
    auto it = dir_index_.find(path.substr(0, plen));
    if (it == dir_index_.end()) broken_ = true;  // the walker lists a directory before its entries
    else parent = last_dir_ = it->second;
  }
  uint32_t idx = static_cast<uint32_t>(items_.size());
  items_.push_back(Item{type, mode, type == 'f' ? size : 0, ino, type == 'f' ? mtime_sec : 0, ctime_sec,
                        type == 'f' ? mtime_nsec : 0u, ctime_nsec,
                        slash == std::string::npos ? path : path.substr(slash + 1), link});
  dirs_[parent].members.push_back(idx);
  if (type == 'd') {
    dir_index_[path] = static_cast<uint32_t>(dirs_.size());
    dirs_.push_back({path, idx, {}});
  }
  return idx;
}

void CheckManifestBuilder::MarkAcl(uint32_t index) {
  std::lock_guard<std::mutex> l(mu_);
  acl_.push_back(index);
}

std::string CheckManifestBuilder::Serialize() const {
  if (real_.empty() || broken_ || dirs_.empty()) return "";  // nothing sound to check against
  const std::vector<Dir>& dirs = dirs_;
  std::vector<uint8_t> acl(items_.size(), 0);
  {
    std::lock_guard<std::mutex> l(const_cast<std::mutex&>(mu_));
    for (uint32_t i : acl_)
      if (i < acl.size()) acl[i] = 1;
  }
  std::string strings = real_;
  std::vector<uint32_t> pos(items_.size());
  std::vector<Rec> recs;
  recs.reserve(items_.size());
  std::vector<DirRec> drecs;
  auto rec_of = [&](const Item& it, const std::string& name) {
    Rec r{};
    r.ino = it.ino;
    r.size = it.size;
    r.mtime_sec = it.mtime_sec;
    r.ctime_sec = it.ctime_sec;
    r.mtime_nsec = it.mtime_nsec;
    r.ctime_nsec = it.ctime_nsec;
    r.mode = it.mode;
    r.name_off = static_cast<uint32_t>(strings.size());
    r.name_len = static_cast<uint16_t>(name.size());
    r.link_len = static_cast<uint16_t>(it.link.size());
    strings += name;
    strings += '\0';
    strings += it.link;
    strings += '\0';
    return r;
  };
  for (const Dir& d : dirs) {
    DirRec dr{};
    dr.path_off = static_cast<uint32_t>(strings.size());
    dr.path_len = static_cast<uint32_t>(d.path.size());
    strings += d.path;
    strings += '\0';
    dr.first = static_cast<uint32_t>(recs.size());
    dr.count = static_cast<uint32_t>(d.members.size());
    dr.self = d.self;  // remapped below
    for (uint32_t i : d.members) {
      const Item& it = items_[i];
      pos[i] = static_cast<uint32_t>(recs.size());
      Rec r = rec_of(it, it.name);
      r.flags = acl[i] ? kFlagAcl : 0;
      recs.push_back(r);
    }
    drecs.push_back(dr);
  }
  for (auto& dr : drecs)
    if (dr.self != kNoEntry) dr.self = pos[dr.self];
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.ndirs = static_cast<uint32_t>(drecs.size());
  h.nentries = static_cast<uint32_t>(recs.size());
  h.strings_len = static_cast<uint32_t>(strings.size());
  h.real_len = static_cast<uint32_t>(real_.size());
  h.root = Rec{};
  h.root.ino = root_.ino;
  h.root.mode = root_.mode;
  h.root.ctime_sec = root_.ctime_sec;
  h.root.ctime_nsec = root_.ctime_nsec;
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(reinterpret_cast<const char*>(drecs.data()), drecs.size() * sizeof(DirRec));
  out.append(reinterpret_cast<const char*>(recs.data()), recs.size() * sizeof(Rec));
  out += strings;
  return out;
}

CheckManifest::~CheckManifest() {
  if (map_) ::munmap(map_, size_);
}

Status CheckManifest::Validate(const char* data, size_t size, std::string* real) {
  Header h;
  if (size < sizeof h) return Status::IOError("check manifest: truncated");
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return Status::IOError("check manifest: bad magic");
  uint64_t need = sizeof h + uint64_t{h.ndirs} * sizeof(DirRec) + uint64_t{h.nentries} * sizeof(Rec) + h.strings_len;
  if (size != need || h.real_len > h.strings_len || h.ndirs == 0)
    return Status::IOError("check manifest: size mismatch");
  // Bounds of every record, once, so the checker can trust offsets.
  const char* base = data + sizeof h;
  const DirRec* dirs = reinterpret_cast<const DirRec*>(base);
  const Rec* recs = reinterpret_cast<const Rec*>(base + h.ndirs * sizeof(DirRec));
  for (uint32_t i = 0; i < h.ndirs; ++i) {
    const DirRec& d = dirs[i];
    if (uint64_t{d.path_off} + d.path_len + 1 > h.strings_len || uint64_t{d.first} + d.count > h.nentries ||
        (d.self != kNoEntry && d.self >= h.nentries))
      return Status::IOError("check manifest: bad directory record");
  }
  for (uint32_t i = 0; i < h.nentries; ++i) {
    const Rec& r = recs[i];
    if (uint64_t{r.name_off} + r.name_len + r.link_len + 2 > h.strings_len)
      return Status::IOError("check manifest: bad entry record");
  }
  real->assign(base + h.ndirs * sizeof(DirRec) + h.nentries * sizeof(Rec), h.real_len);
  return Status::Ok();
}

Expected<std::shared_ptr<CheckManifest>> CheckManifest::Parse(std::string bytes) {
  auto m = std::make_shared<CheckManifest>();
  m->owned_ = std::move(bytes);
  m->data_ = m->owned_.data();
  m->size_ = m->owned_.size();
  Status s = Validate(m->data_, m->size_, &m->real_);
  if (!s.ok()) return s;
  return m;
}

Expected<std::shared_ptr<CheckManifest>> CheckManifest::Load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "stat " + path);
  }
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Header))) {
    ::close(fd);
    return Status::IOError(path + ": check manifest: truncated");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return Status::FromErrno(e, "map " + path);
  auto m = std::make_shared<CheckManifest>();
  m->map_ = p;
  m->data_ = static_cast<const char*>(p);
  m->size_ = size;
  Status s = Validate(m->data_, m->size_, &m->real_);
  if (!s.ok()) return Status::IOError(path + ": " + s.message());
  return m;
}

uint64_t CheckManifest::entries() const {
  Header h;
  std::memcpy(&h, data_, sizeof h);
  return h.nentries;
}
uint64_t CheckManifest::dirs() const {
  Header h;
  std::memcpy(&h, data_, sizeof h);
  return h.ndirs;
}

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
  std::atomic<uint32_t> next{0};
  std::atomic<bool> stop{false};
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
    for (uint32_t i = 0; i < d.count && !stop.load(std::memory_order_relaxed); ++i)
      CheckEntry(fd, dpath, names[i], recs[order[i]], generic);
    entries += d.count;
    ::close(fd);
  }

  void Loop() {
    std::vector<char> buf(1 << 16);
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      uint32_t i = next++;
      if (i >= h.ndirs) return;
      CheckDir(i, buf);
    }
  }

  void Run(const std::string& src, unsigned threads) {
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
    unsigned t = std::max(1u, std::min<unsigned>(threads, h.ndirs));
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < t; ++i) pool.emplace_back([this] { Loop(); });
    Loop();
    for (auto& th : pool) th.join();
    ::close(rootfd);
  }
};

Status CheckUnchanged(const std::string& src, const CheckManifest& m, const StageIdentity& who, unsigned threads,
                      double deadline, WarmCheckResult* out, FaultSide* side) {
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
      w.Run(src, threads);
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
  if (timed_out) ::kill(pid, SIGKILL);
  int st;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
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
