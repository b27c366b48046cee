// The walker's openers (private to stage/src): on a network or FUSE
// source (OnNetworkFilesystem), where every openat and fstat is a round
// trip, the copy walk's per-file work runs on many threads at once while
// the walker thread lists directories and queues each regular file here.
// Runs inside the walker child, as the job user; opens with the same flags
// and checks as the serial walk (O_NOFOLLOW, still a regular file once
// open) and emits each file's record through the walker's own emit.
//
// Order: a directory's record is emitted before any of its files is
// queued, so the parent never sees a file before its folder. The threads
// take files round-robin across the directories queued: a FUSE source
// (s3fs, gcsfuse, the harness's preflight-netfs) answers lookups in one
// folder one at a time, so the waits overlap only across folders. Bounds:
// at most kMaxQueued files queued (Open blocks past it), so the open
// directories are at most that many plus the walk's depth.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace preflight::stage_internal {

// Opens the regular file `name` of a walked folder the one way both walks
// do: never following a symlink, never blocking on a fifo, and still a
// regular file once open (*st its fstat). The descriptor, or -1 with *err
// the errno (0: it is no longer a regular file).
int OpenRegularAt(int dirfd, const char* name, struct stat* st, int* err);

// A directory descriptor that stays open while files in it are queued.
struct DirFd {
  explicit DirFd(int f) : fd(f) {}
  ~DirFd();
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  int fd;
};

class Openers {
 public:
  // Sends one file's record (its stat, path relative to the root, the open
  // descriptor, which it takes); false when sending failed. Called from
  // the opener threads: the callee serialises with the walker's own sends.
  using Emit = std::function<bool(const struct stat& st, const std::string& path, int fd)>;

  // `root`: the resolved source, for messages.
  Openers(unsigned threads, std::string root, Emit emit);
  ~Openers();  // Finish()
  Openers(const Openers&) = delete;
  Openers& operator=(const Openers&) = delete;

  // Queues the file `name` of `dir` (at `path`); blocks while kMaxQueued
  // are queued. False once any open failed (nothing more is queued).
  bool Open(std::shared_ptr<DirFd> dir, std::string name, std::string path);
  // Waits until every queued file is sent or the first failure; ends the
  // threads. False on a failure: error() and error_errno() say which.
  bool Finish();
  // Ends the work early (the walk failed on its own): queued files are
  // dropped; error() stays empty.
  void Stop() { Fail("", 0); }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::string& error() const { return error_; }
  int error_errno() const { return error_errno_; }

  static constexpr size_t kMaxQueued = 16384;

 private:
  struct Job {
    std::string name, path;
  };
  struct DirJobs {  // one directory's queued files
    std::shared_ptr<DirFd> dir;
    std::deque<Job> jobs;
  };
  void Loop();
  void Fail(std::string what, int err);

  std::string root_;
  Emit emit_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_, idle_;
  std::deque<DirJobs> q_;  // taken round-robin
  size_t queued_ = 0;      // files in q_
  size_t busy_ = 0;
  bool done_ = false;
  std::atomic<bool> failed_{false};
  std::string error_;
  int error_errno_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace preflight::stage_internal
