// The copy workers of --stage (private to stage/src): files from the
// walker's descriptors into the cache, in batches, each verified.
// Definitions in stage_copy_pool.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <sys/stat.h>
#include <string>
#include <thread>
#include <vector>

#include "preflight/stage_copy_options.h"
#include "preflight/stage_manifest.h"
#include "stage_walk.h"  // kLargeFile

namespace preflight::stage_internal {

// Classify a write-side errno: ENOSPC/EDQUOT are the destination's space,
// anything else the node's.
FaultSide DestSide(int err);
// The status of a failed write-side call `what` on the file system of
// `dest_fd`: FromErrno, and for an ENOSPC while that file system has no
// free inode left (fstatvfs f_favail 0 of a non-zero f_files) the text
// says so, since df -h then shows free bytes.
Status DestFailure(int err, const std::string& what, int dest_fd);

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
  uint64_t ino = 0;                   // as the walker saw it; 0: not compared
  std::string from;                   // the source path, for its errors; "": `shown`
  const std::string& source() const { return from.empty() ? shown : from; }
  // One part of a file split into ranges (CopyPool::SplitLargeFiles):
  // bytes [off, off + len); the file's shared state; null: the whole file.
  std::shared_ptr<struct RangedFile> ranged;
  uint64_t off = 0, len = 0;
};

// A file copied in ranges by several workers: the destination is created
// by the first range to run, and the last one to end verifies the file,
// sets its times and closes both descriptors.
struct RangedFile {
  explicit RangedFile(unsigned parts) : left(parts) {}
  std::mutex mu;
  int out = -1;
  bool opened = false, ok = true;
  std::atomic<unsigned> left;
  std::atomic<uint64_t> copied{0};
};

// What differs between the source file as the walker opened it (`t`) and
// as it is now (`now`), `copied` bytes having been read from it: "size 6
// -> 9 bytes, mtime 2025-01-02 10:00:00.000000000 +0100 -> ...", each of
// size, mtime, inode and (`with_ctime`) ctime that changed, old and new;
// "" when none did and all bytes were read.
std::string DescribeChange(const Task& t, const struct stat& now, uint64_t copied, bool with_ctime);

class CopyPool {
 public:
  CopyPool(const CopyOptions& o, StageFs& fs, CheckManifestBuilder* check) : o_(o), fs_(fs), check_(check) {}
  void Start(unsigned n);
  // The source is on a network file system: a file of kRangeMin bytes or
  // more is queued as kRange-byte ranges that any worker takes, so one
  // large file is many reads in flight, not one serial stream (on a local
  // source the inode lock makes that lose: stage_copy.h).
  void SplitLargeFiles() { split_ = true; }
  static constexpr uint64_t kRangeMin = 16ull << 20;
  static constexpr uint64_t kRange = 8ull << 20;
  // Queues files in batches (one lock and one wake-up per batch, not per
  // file: with many small files the hand-off is otherwise the cost). A batch
  // closes at kBatch files or kBatchBytes, so files of 1 MiB and more go
  // out at once and large files spread over the workers instead of queueing
  // behind one (4 x 1 GiB went to a single worker before: 2-3x slower).
  // Blocks while the queue is full, which bounds the open descriptors.
  void Push(Task t);
  void Flush();
  // Flushes, then waits for the workers to drain the queue and end. With
  // a deadline (CopyOptions::deadline), at most kAbandonGrace seconds past
  // it: a worker blocked in a read of a source that stopped answering (a
  // FUSE or NFS server that holds the request) cannot be interrupted, so
  // the pool fails with the timeout, naming the file, and leaves such
  // workers behind (abandoned()). The caller must then keep the pool alive
  // (leak it): a worker that wakes later only sees the failure, closes its
  // descriptors and ends, touching nothing but the pool; the prolog's
  // exit ends any still waiting.
  void Finish();
  bool abandoned() const { return abandoned_; }
  static constexpr double kAbandonGrace = 5;
  // The first failure wins; the workers stop copying (descriptors are
  // still closed) and a blocked Push returns.
  void Fail(Status s, FaultSide side);
  bool failed() { return failed_fast_.load(std::memory_order_relaxed); }
  Status status();
  FaultSide side();
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> files{0};

 private:
  static constexpr size_t kBatch = 32;
  static constexpr uint64_t kBatchBytes = kLargeFile;
  static constexpr size_t kMaxQueued = 64;  // batches

  // What a worker is copying, for the message of an abandoned pool.
  struct Slot {
    std::mutex mu;
    const Task* task = nullptr;
  };
  void Loop(Slot* slot);
  // Fail under mu_ (held).
  void FailLocked(Status s, FaultSide side);
  // Copies one file, verifies it (all bytes, source unchanged since the
  // walker opened it), sets its times; on failure calls Fail.
  void CopyOne(const Task& t, std::vector<char>& buf);
  // One range of a split file (Task::ranged); the last one finishes it.
  void CopyPart(const Task& t, std::vector<char>& buf);
  // Reads [off, off + len) of t.src into `out` at the same offsets with
  // pread/pwrite, adding to *done; false after a Fail.
  bool CopyBytes(const Task& t, int out, uint64_t off, uint64_t len, std::vector<char>& buf, uint64_t* done);
  // After the bytes: verify (all `done` bytes, the source unchanged), set
  // the times, close `out`, mark an ACL; counts the file when all is well.
  void FinishFile(const Task& t, int out, uint64_t done, bool ok);

  const CopyOptions o_;  // a copy: an abandoned worker outlives the caller's
  StageFs& fs_;
  CheckManifestBuilder* check_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<std::vector<Task>> q_;
  std::vector<Task> pending_;  // the receiver's batch being filled
  uint64_t pending_bytes_ = 0;
  std::atomic<bool> failed_fast_{false};
  bool split_ = false;
  std::vector<std::thread> threads_;
  std::deque<Slot> slots_;  // one per thread; a deque: stable addresses
  std::condition_variable ended_cv_;
  size_t ended_ = 0;  // workers whose Loop has returned
  bool abandoned_ = false;
  bool done_ = false;
  bool failed_ = false;
  Status status_;
  FaultSide side_ = FaultSide::kNone;
};

// Raises RLIMIT_NOFILE's soft limit towards 65536 (the queue holds open
// source descriptors).
void RaiseFdLimit();

}  // namespace preflight::stage_internal
