#include "stage_copy_pool.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>

#include "preflight/clock.h"
#include "preflight/report.h"  // HumanBytes

namespace preflight::stage_internal {

FaultSide DestSide(int err) { return err == ENOSPC || err == EDQUOT ? FaultSide::kDestSpace : FaultSide::kNode; }

Status DestFailure(int err, const std::string& what, int dest_fd) {
  struct statvfs v;
  if (err == ENOSPC && dest_fd >= 0 && ::fstatvfs(dest_fd, &v) == 0 && v.f_files > 0 && v.f_favail == 0)
    return Status::FromErrno(err, what + " (the file system has no free inodes: 0 of " + std::to_string(v.f_files) + ", with " +
                                      HumanBytes(static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize)) +
                                      " free; see df -i)");
  return Status::FromErrno(err, what);
}

namespace {

std::string When(int64_t sec, uint32_t nsec) {
  time_t t = static_cast<time_t>(sec);
  struct tm tm {};
  ::localtime_r(&t, &tm);
  char day[32], zone[8];
  std::strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
  std::strftime(zone, sizeof zone, "%z", &tm);
  char b[64];
  std::snprintf(b, sizeof b, "%s.%09u %s", day, nsec, zone);
  return b;
}

}  // namespace

std::string DescribeChange(const Task& t, const struct stat& now, uint64_t copied, bool with_ctime) {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (static_cast<uint64_t>(now.st_size) != t.size)
    add("size " + std::to_string(t.size) + " -> " + std::to_string(now.st_size) + " bytes");
  if (now.st_mtim.tv_sec != t.mtime_sec || static_cast<uint32_t>(now.st_mtim.tv_nsec) != t.mtime_nsec)
    add("mtime " + When(t.mtime_sec, t.mtime_nsec) + " -> " + When(now.st_mtim.tv_sec, static_cast<uint32_t>(now.st_mtim.tv_nsec)));
  if (t.ino != 0 && now.st_ino != t.ino) add("inode " + std::to_string(t.ino) + " -> " + std::to_string(now.st_ino));
  if (with_ctime && (now.st_ctim.tv_sec != t.ctime_sec || static_cast<uint32_t>(now.st_ctim.tv_nsec) != t.ctime_nsec))
    add("ctime " + When(t.ctime_sec, t.ctime_nsec) + " -> " + When(now.st_ctim.tv_sec, static_cast<uint32_t>(now.st_ctim.tv_nsec)));
  if (copied != t.size && static_cast<uint64_t>(now.st_size) == t.size)
    add("read " + std::to_string(copied) + " of its " + std::to_string(t.size) + " bytes");
  return out;
}

void CopyPool::Start(unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    Slot* slot = &slots_.emplace_back();
    threads_.emplace_back([this, slot] {
      Loop(slot);
      std::lock_guard<std::mutex> l(mu_);
      ++ended_;
      ended_cv_.notify_all();
    });
  }
}

void CopyPool::Push(Task t) {
  if (split_ && t.size >= kRangeMin) {
    auto parts = static_cast<unsigned>((t.size + kRange - 1) / kRange);
    auto shared = std::make_shared<RangedFile>(parts);
    for (unsigned i = 0; i < parts; ++i) {
      Task part = t;
      part.ranged = shared;
      part.off = i * kRange;
      part.len = std::min(kRange, t.size - part.off);
      pending_bytes_ = kBatchBytes;  // each range is a batch of its own
      pending_.push_back(std::move(part));
      Flush();
    }
    return;
  }
  pending_bytes_ += t.size;
  pending_.push_back(std::move(t));
  if (pending_.size() >= kBatch || pending_bytes_ >= kBatchBytes) Flush();
}

void CopyPool::Flush() {
  pending_bytes_ = 0;
  if (pending_.empty()) return;
  std::unique_lock<std::mutex> l(mu_);
  // Bounded by the deadline: workers stuck on a source that stopped
  // answering never make room.
  while (q_.size() >= kMaxQueued && !failed_) {
    if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
      FailLocked(Status::Timeout("staging: timed out: the copies of the source's files have not moved for the rest of "
                                 "stage_timeout"),
                 FaultSide::kSource);
      break;
    }
    not_full_.wait_for(l, std::chrono::milliseconds(200));
  }
  q_.push_back(std::move(pending_));
  pending_.clear();
  not_empty_.notify_one();
}

void CopyPool::Finish() {
  Flush();
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
  }
  not_empty_.notify_all();
  {
    std::unique_lock<std::mutex> l(mu_);
    auto all_ended = [&] { return ended_ == threads_.size(); };
    while (!all_ended()) {
      if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline + kAbandonGrace) break;
      ended_cv_.wait_for(l, std::chrono::milliseconds(200));
    }
    if (!all_ended()) {
      // Name a file a stuck worker reads (its slot holds the task while it
      // copies, the worker being stuck in a read of it).
      std::string file;
      size_t stuck = threads_.size() - ended_;
      for (auto& s : slots_) {
        std::lock_guard<std::mutex> sl(s.mu);
        if (s.task) {
          file = s.task->source();
          break;
        }
      }
      FailLocked(Status::Timeout("staging: timed out reading " + (file.empty() ? std::string("the source") : file) +
                                 ": the source has not answered within stage_timeout (" + std::to_string(stuck) +
                                 " cop" + (stuck == 1 ? "y" : "ies") + " left waiting on it)"),
                 FaultSide::kSource);
      abandoned_ = true;
    }
  }
  for (auto& t : threads_) {
    if (abandoned_) t.detach();
    else t.join();
  }
  threads_.clear();
}

void CopyPool::Fail(Status s, FaultSide side) {
  std::lock_guard<std::mutex> l(mu_);
  FailLocked(std::move(s), side);
}

void CopyPool::FailLocked(Status s, FaultSide side) {
  if (!failed_) {
    failed_ = true;
    failed_fast_ = true;
    status_ = std::move(s);
    side_ = side;
  }
  not_full_.notify_all();
}

Status CopyPool::status() {
  std::lock_guard<std::mutex> l(mu_);
  return status_;
}

FaultSide CopyPool::side() {
  std::lock_guard<std::mutex> l(mu_);
  return side_;
}

void CopyPool::Loop(Slot* slot) {
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
      {
        std::lock_guard<std::mutex> sl(slot->mu);
        slot->task = &t;
      }
      if (t.ranged) {
        CopyPart(t, buf);  // the last part closes t.src
      } else {
        if (!failed_fast_.load(std::memory_order_relaxed)) CopyOne(t, buf);
        ::close(t.src);
      }
      std::lock_guard<std::mutex> sl(slot->mu);
      slot->task = nullptr;
    }
  }
}

void CopyPool::CopyOne(const Task& t, std::vector<char>& buf) {
  if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
    Fail(Status::Timeout("staging: timed out copying " + t.source()), FaultSide::kSource);
    return;
  }
  mode_t mode = (t.mode & 0111) ? 0755 : 0644;
  int out = fs_.OpenAt(t.dirfd, t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (out < 0) {
    int e = errno;
    Fail(DestFailure(e, "create " + t.shown, t.dirfd), DestSide(e));
    return;
  }
  uint64_t done = 0;
  bool ok = true;
  if (t.size >= kLargeFile) {
    ::posix_fadvise(t.src, 0, 0, POSIX_FADV_SEQUENTIAL);
    off_t in_off = 0;
    while (done < t.size) {
      if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
        Fail(Status::Timeout("staging: timed out copying " + t.source()), FaultSide::kSource);
        ok = false;
        break;
      }
      ssize_t n = fs_.CopyFileRange(t.src, &in_off, out, std::min<uint64_t>(t.size - done, 64ull << 20));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        if (e == ENOSPC || e == EDQUOT) { Fail(DestFailure(e, "write " + t.shown, out), FaultSide::kDestSpace); ok = false; }
        break;  // anything else: the read/write path below says which side failed
      }
      if (n == 0) break;
      done += static_cast<uint64_t>(n);
    }
  }
  // What copy_file_range left (or all of it: a small file, a file system
  // that refuses it, a fault past it) goes through the buffer.
  if (ok && done < t.size) ok = CopyBytes(t, out, done, t.size - done, buf, &done);
  FinishFile(t, out, done, ok);
}

void CopyPool::FinishFile(const Task& t, int out, uint64_t done, bool ok) {
  if (ok) {
    // Verify before the caller may publish: all bytes, and the source
    // not changed since the walker opened it.
    struct stat st;
    if (::fstat(t.src, &st) != 0) {
      Fail(Status::FromErrno(errno, "stat " + t.source()), FaultSide::kSource);
      ok = false;
    } else if (std::string change = DescribeChange(t, st, done, check_ != nullptr); !change.empty()) {
      Fail(Status::IOError(t.source() + ": changed while being copied (" + change + "); stage it again once it is stable"),
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

bool CopyPool::CopyBytes(const Task& t, int out, uint64_t off, uint64_t len, std::vector<char>& buf, uint64_t* done) {
  uint64_t at = off;
  while (at < off + len) {
    if (failed_fast_.load(std::memory_order_relaxed)) return false;
    if (o_.deadline > 0 && MonotonicSeconds() > o_.deadline) {
      Fail(Status::Timeout("staging: timed out copying " + t.source()), FaultSide::kSource);
      return false;
    }
    ssize_t n = fs_.Pread(t.src, buf.data(), std::min<uint64_t>(buf.size(), off + len - at), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Fail(Status::FromErrno(errno, "read " + t.source()), FaultSide::kSource);
      return false;
    }
    if (n == 0) return true;  // shrank: FinishFile sees fewer bytes than the size
    size_t w = 0;
    while (w < static_cast<size_t>(n)) {
      ssize_t k = fs_.Pwrite(out, buf.data() + w, static_cast<size_t>(n) - w, static_cast<off_t>(at + w));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        int e = errno;
        Fail(DestFailure(e, "write " + t.shown, out), DestSide(e));
        return false;
      }
      w += static_cast<size_t>(k);
    }
    at += static_cast<uint64_t>(n);
    *done += static_cast<uint64_t>(n);
  }
  return true;
}

void CopyPool::CopyPart(const Task& t, std::vector<char>& buf) {
  RangedFile& r = *t.ranged;
  int out = -1;
  bool go = !failed_fast_.load(std::memory_order_relaxed);
  if (go) {
    std::lock_guard<std::mutex> l(r.mu);
    if (!r.opened) {
      r.opened = true;
      mode_t mode = (t.mode & 0111) ? 0755 : 0644;
      r.out = fs_.OpenAt(t.dirfd, t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
      if (r.out < 0) {
        int e = errno;
        r.ok = false;
        Fail(DestFailure(e, "create " + t.shown, t.dirfd), DestSide(e));
      }
    }
    out = r.out;
    go = r.ok;
  }
  uint64_t done = 0;
  bool ok = go && CopyBytes(t, out, t.off, t.len, buf, &done);
  r.copied += done;
  if (!ok) {
    std::lock_guard<std::mutex> l(r.mu);
    r.ok = false;
  }
  if (--r.left > 0) return;
  // The last part: every other part has ended (and said how).
  bool all;
  {
    std::lock_guard<std::mutex> l(r.mu);
    all = r.ok && !failed_fast_.load(std::memory_order_relaxed);
    out = r.out;
    r.out = -1;
  }
  if (out >= 0) FinishFile(t, out, r.copied.load(), all);
  ::close(t.src);
}

void RaiseFdLimit() {
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max && r.rlim_cur < 65536) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace preflight::stage_internal
