#include "ckpt_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "ckpt_io.h"
#include "ckpt_parallel.h"
#include "preflight/clock.h"

namespace preflight::ckpt_internal {
namespace {

constexpr size_t kBuf = 4u << 20;

// One file's shared state across its pieces.
struct FileState {
  const WalkedEntry* e = nullptr;
  size_t entry = 0;  // index into the output
  std::once_flag opened;
  Status open_status;
  Fd src, dst;
  std::vector<uint64_t> pieces;
  std::atomic<uint32_t> remaining{0};
};

struct Piece {
  FileState* f;
  uint32_t index;
};

Status FaultAt(const CopyOptions& o, CkptFaultPoint p, uint64_t n, const std::string& shown) {
  if (!o.fault) return Status::Ok();
  int e = o.fault(p, n);
  return e == 0 ? Status::Ok() : Status::FromErrno(e, shown);
}

Status Open(int src, const std::string& ss, int dst, const std::string& ds, FileState& f) {
  const WalkedEntry& e = *f.e;
  int in = ::openat(src, e.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (in < 0) return Status::FromErrno(errno, "open " + ss + "/" + CkptEscape(e.path));
  f.src = Fd(in);
  struct stat st;
  if (::fstat(in, &st) != 0) return Status::FromErrno(errno, ss + "/" + CkptEscape(e.path));
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != e.size)
    return Status::Failed(ss + "/" + CkptEscape(e.path) + ": changed since it was listed; a checkpoint is copied only once complete");
  ::posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (::unlinkat(dst, e.path.c_str(), 0) != 0 && errno != ENOENT)
    return Status::FromErrno(errno, "replace " + ds + "/" + CkptEscape(e.path));
  int out = ::openat(dst, e.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return Status::FromErrno(errno, "create " + ds + "/" + CkptEscape(e.path));
  f.dst = Fd(out);
  return Status::Ok();
}

// The rate cap (CopyOptions::rate_cap) shared by the workers: each write of
// n bytes waits until the bytes granted so far fit the rate since the
// start (or the deadline, which the copy loop then reports).
class Pacer {
 public:
  explicit Pacer(uint64_t rate) : rate_(rate), start_(MonotonicSeconds()) {}
  void Take(uint64_t n, double deadline) {
    if (rate_ == 0) return;
    double due;
    {
      std::lock_guard<std::mutex> l(mu_);
      granted_ += n;
      due = start_ + static_cast<double>(granted_) / static_cast<double>(rate_);
    }
    if (deadline > 0) due = std::min(due, deadline + 0.001);
    double wait = due - MonotonicSeconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }

 private:
  const uint64_t rate_;
  const double start_;
  std::mutex mu_;
  uint64_t granted_ = 0;
};

Status CopyPiece(const FileState& f, uint32_t index, std::vector<char>& buf, const CopyOptions& o,
                 const std::string& ss, const std::string& ds, uint64_t* hash, std::atomic<uint64_t>& bytes,
                 Pacer& pacer) {
  const WalkedEntry& e = *f.e;
  uint64_t off = uint64_t{index} * kCkptHashPiece;
  uint64_t end = std::min(e.size, off + kCkptHashPiece);
  CkptPieceHasher h;
  while (off < end) {
    if (o.deadline > 0 && MonotonicSeconds() > o.deadline)
      return Status::Timeout("copying " + ss + "/" + CkptEscape(e.path) + " ran out of time");
    ssize_t n = ::pread(f.src.get(), buf.data(), std::min<uint64_t>(buf.size(), end - off), static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + ss + "/" + CkptEscape(e.path));
    if (n == 0) return Status::Failed(ss + "/" + CkptEscape(e.path) + ": shrank while being copied");
    h.Update(buf.data(), static_cast<size_t>(n));
    pacer.Take(static_cast<uint64_t>(n), o.deadline);
    size_t w = 0;
    while (w < static_cast<size_t>(n)) {
      ssize_t k = ::pwrite(f.dst.get(), buf.data() + w, static_cast<size_t>(n) - w, static_cast<off_t>(off + w));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) return Status::FromErrno(errno, "write " + ds + "/" + CkptEscape(e.path));
      w += static_cast<size_t>(k);
    }
    off += static_cast<uint64_t>(n);
    bytes += static_cast<uint64_t>(n);
  }
  *hash = h.Digest();
  return Status::Ok();
}

// The last piece of a file: the source unchanged, mode, fsync, close.
Status Finish(FileState& f, const std::string& ss, const std::string& ds) {
  const WalkedEntry& e = *f.e;
  struct stat st;
  if (::fstat(f.src.get(), &st) != 0) return Status::FromErrno(errno, ss + "/" + CkptEscape(e.path));
  if (static_cast<uint64_t>(st.st_size) != e.size || st.st_mtim.tv_sec != e.mtime_sec ||
      st.st_mtim.tv_nsec != e.mtime_nsec)
    return Status::Failed(ss + "/" + CkptEscape(e.path) +
                          ": changed while being copied; a checkpoint is copied only once complete");
  std::string shown = ds + "/" + CkptEscape(e.path);
  if (::fchmod(f.dst.get(), e.mode & 07777) != 0) return Status::FromErrno(errno, "chmod " + shown);
  if (Status s = SyncFd(f.dst.get(), shown); !s.ok()) return s;
  if (::close(f.dst.release()) != 0) return Status::FromErrno(errno, "close " + shown);
  f.src = Fd();
  return Status::Ok();
}

}  // namespace

Expected<std::vector<CkptEntry>> CopyPart(int src, const std::string& ss, int dst, const std::string& ds,
                                          const std::vector<WalkedEntry>& entries, uint32_t node, const CopyOptions& o,
                                          CopyStats* stats) {
  std::vector<CkptEntry> out(entries.size());
  std::deque<FileState> files;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < entries.size(); ++i) {
    const WalkedEntry& w = entries[i];
    out[i].type = w.type;
    out[i].mode = w.mode;
    out[i].node = node;
    out[i].path = w.path;
    out[i].link = w.link;
    out[i].size = w.type == 'f' ? w.size : 0;
    if (w.type == 'd') {
      if (Status s = MakeDirAt(dst, w.path, 0700, ds + "/" + CkptEscape(w.path)); !s.ok()) return s;
    } else if (w.type == 'f') {
      FileState& f = files.emplace_back();
      f.e = &w;
      f.entry = i;
      uint32_t n = static_cast<uint32_t>(std::max<uint64_t>(1, (w.size + kCkptHashPiece - 1) / kCkptHashPiece));
      f.pieces.assign(w.size == 0 ? 0 : n, 0);
      f.remaining = n;
      for (uint32_t p = 0; p < n; ++p) pieces.push_back({&f, p});
    }
  }
  std::vector<std::vector<char>> bufs(std::max(1u, o.threads));
  std::atomic<uint64_t> done{0}, bytes{0};
  Pacer pacer(o.rate_cap);
  Status s = ParallelFor(pieces.size(), o.threads, [&](size_t i, unsigned worker) -> Status {
    FileState& f = *pieces[i].f;
    std::call_once(f.opened, [&] { f.open_status = Open(src, ss, dst, ds, f); });
    if (!f.open_status.ok()) return f.open_status;
    if (f.e->size > 0) {
      auto& buf = bufs[worker];
      if (buf.empty()) buf.resize(kBuf);
      uint64_t h = 0;
      if (Status c = CopyPiece(f, pieces[i].index, buf, o, ss, ds, &h, bytes, pacer); !c.ok()) return c;
      f.pieces[pieces[i].index] = h;
    }
    if (f.remaining.fetch_sub(1) != 1) return Status::Ok();
    if (Status c = Finish(f, ss, ds); !c.ok()) return c;
    out[f.entry].hash = CkptCombinePieces(f.pieces);
    return FaultAt(o, CkptFaultPoint::kPartFileDone, ++done, ds + "/" + CkptEscape(f.e->path));
  });
  if (stats != nullptr) {
    stats->files = done;
    stats->bytes = bytes;
  }
  if (!s.ok()) return s;
  for (const auto& w : entries) {
    if (w.type != 'l') continue;
    std::string shown = ds + "/" + CkptEscape(w.path);
    if (::unlinkat(dst, w.path.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno(errno, "replace " + shown);
    if (::symlinkat(w.link.c_str(), dst, w.path.c_str()) != 0) return Status::FromErrno(errno, "symlink " + shown);
  }
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->type != 'd') continue;
    std::string shown = ds + "/" + CkptEscape(it->path);
    auto d = OpenDirAt(dst, it->path, shown);
    if (!d) return d.status();
    if (::fchmod(d->get(), (it->mode & 07777) | 0700) != 0) return Status::FromErrno(errno, "chmod " + shown);
    if (Status e = SyncFd(d->get(), shown); !e.ok()) return e;
  }
  if (Status e = SyncFd(dst, ds); !e.ok()) return e;
  return out;
}

}  // namespace preflight::ckpt_internal
