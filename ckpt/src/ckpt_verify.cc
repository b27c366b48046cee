#include "preflight/ckpt_verify.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <unordered_set>

#include "ckpt_io.h"
#include "ckpt_parallel.h"
#include "preflight/clock.h"

namespace preflight {
namespace {

constexpr size_t kReadBuf = 4u << 20;

Status Mismatch(const std::string& shown, const CkptEntry& e, const std::string& what) {
  return Status::Failed(shown + "/" + CkptEscape(e.path) + ": " + what);
}

}  // namespace

Expected<CkptVerify> ParseCkptVerify(const std::string& s) {
  if (s == "sizes") return CkptVerify::kSizes;
  if (s == "sample") return CkptVerify::kSample;
  if (s == "full") return CkptVerify::kFull;
  return Status::InvalidArgument("checkpoint verification '" + s + "': expected sizes, sample or full");
}

const char* CkptVerifyName(CkptVerify v) {
  switch (v) {
    case CkptVerify::kSizes: return "sizes";
    case CkptVerify::kSample: return "sample";
    case CkptVerify::kFull: return "full";
  }
  return "?";
}

std::vector<size_t> CkptSampleFiles(const CkptManifest& m, uint64_t budget, uint64_t seed) {
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    if (m.entries[i].type != 'f') continue;
    std::string key = std::to_string(seed) + "/" + m.entries[i].path;
    order.emplace_back(CkptHashBytes(key.data(), key.size()), i);
  }
  std::sort(order.begin(), order.end());
  std::vector<size_t> out;
  uint64_t used = 0;
  for (const auto& [h, i] : order) {
    uint64_t sz = m.entries[i].size;
    if (out.empty() || (used + sz >= used && used + sz <= budget)) {
      out.push_back(i);
      used += sz;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Expected<uint64_t> CkptHashFd(int fd, uint64_t size, double deadline) {
  std::vector<char> buf(kReadBuf);
  std::vector<uint64_t> pieces;
  uint64_t off = 0;
  while (off < size) {
    CkptPieceHasher h;
    uint64_t end = std::min(size, off + kCkptHashPiece);
    while (off < end) {
      if (deadline > 0 && MonotonicSeconds() > deadline) return Status::Timeout("verification ran out of time");
      ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), end - off), static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "read");
      if (n == 0) return Status::Failed("shorter than " + std::to_string(size) + " bytes when read");
      h.Update(buf.data(), static_cast<size_t>(n));
      off += static_cast<uint64_t>(n);
    }
    pieces.push_back(h.Digest());
  }
  return CkptCombinePieces(pieces);
}

Status VerifyCkptTreeAt(int rootfd, const std::string& shown, const CkptManifest& m, const CkptVerifyOptions& o,
                        CkptVerifyStats* stats) {
  std::vector<char> hash_it(m.entries.size(), o.level == CkptVerify::kFull);
  if (o.level == CkptVerify::kSample)
    for (size_t i : CkptSampleFiles(m, o.sample_bytes, o.seed)) hash_it[i] = 1;
  std::atomic<uint64_t> checked{0}, hashed{0}, hashed_bytes{0};
  Status s = ckpt_internal::ParallelFor(m.entries.size(), o.threads, [&](size_t i, unsigned) -> Status {
    const CkptEntry& e = m.entries[i];
    if (o.deadline > 0 && MonotonicSeconds() > o.deadline)
      return Status::Timeout("verifying " + shown + " ran out of time");
    struct stat st;
    if (e.type == 'd' || e.type == 'l') {
      if (::fstatat(rootfd, e.path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return Mismatch(shown, e, "missing");
        return Status::FromErrno(errno, shown + "/" + CkptEscape(e.path));
      }
      if (e.type == 'd' && !S_ISDIR(st.st_mode)) return Mismatch(shown, e, "not a directory");
      if (e.type == 'l') {
        if (!S_ISLNK(st.st_mode)) return Mismatch(shown, e, "not a symlink");
        std::string t(e.link.size() + 2, '\0');
        ssize_t k = ::readlinkat(rootfd, e.path.c_str(), &t[0], t.size());
        if (k < 0) return Status::FromErrno(errno, "readlink " + shown + "/" + CkptEscape(e.path));
        t.resize(static_cast<size_t>(k));
        if (t != e.link) return Mismatch(shown, e, "symlink points to '" + CkptEscape(t) + "', not '" + CkptEscape(e.link) + "'");
      }
      ++checked;
      return Status::Ok();
    }
    int fd = ::openat(rootfd, e.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) return Mismatch(shown, e, "missing");
      if (err == ELOOP) return Mismatch(shown, e, "a symlink where a file was written");
      return Status::FromErrno(err, shown + "/" + CkptEscape(e.path));
    }
    ckpt_internal::Fd f(fd);
    if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, shown + "/" + CkptEscape(e.path));
    if (!S_ISREG(st.st_mode)) return Mismatch(shown, e, "not a regular file");
    if (static_cast<uint64_t>(st.st_size) != e.size)
      return Mismatch(shown, e, "size " + std::to_string(st.st_size) + ", manifest says " + std::to_string(e.size));
    if (hash_it[i]) {
      auto h = CkptHashFd(fd, e.size, o.deadline);
      if (!h) return h.status().Context(shown + "/" + CkptEscape(e.path));
      if (*h != e.hash) return Mismatch(shown, e, "checksum " + CkptHex(*h) + ", manifest says " + CkptHex(e.hash));
      ++hashed;
      hashed_bytes += e.size;
    }
    ++checked;
    return Status::Ok();
  });
  if (stats != nullptr) {
    stats->entries += checked;
    stats->files_hashed += hashed;
    stats->bytes_hashed += hashed_bytes;
  }
  return s;
}

Status VerifyCkptTree(const std::string& root, const CkptManifest& m, const CkptVerifyOptions& o,
                      CkptVerifyStats* stats) {
  auto fd = ckpt_internal::OpenDirAt(AT_FDCWD, root, root);
  if (!fd) return fd.status();
  return VerifyCkptTreeAt(fd->get(), root, m, o, stats);
}

}  // namespace preflight
