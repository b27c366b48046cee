// The walker's openers (stage_walk_open.h).
#include "stage_walk_open.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace preflight::stage_internal {

int OpenRegularAt(int dirfd, const char* name, struct stat* st, int* err) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || ::fstat(fd, st) != 0) {
    *err = errno;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    *err = 0;
    return -1;
  }
  return fd;
}

DirFd::~DirFd() {
  if (fd >= 0) ::close(fd);
}

Openers::Openers(unsigned threads, std::string root, Emit emit) : root_(std::move(root)), emit_(std::move(emit)) {
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

Openers::~Openers() { Finish(); }

bool Openers::Open(std::shared_ptr<DirFd> dir, std::string name, std::string path) {
  std::unique_lock<std::mutex> l(mu_);
  not_full_.wait(l, [&] { return queued_ < kMaxQueued || failed(); });
  if (failed()) return false;
  if (q_.empty() || q_.back().dir != dir) q_.push_back({std::move(dir), {}});
  q_.back().jobs.push_back({std::move(name), std::move(path)});
  ++queued_;
  not_empty_.notify_one();
  return true;
}

bool Openers::Finish() {
  {
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait(l, [&] { return (queued_ == 0 && busy_ == 0) || failed(); });
    done_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  return !failed();
}

void Openers::Fail(std::string what, int err) {
  std::lock_guard<std::mutex> l(mu_);
  if (!failed()) {
    error_ = std::move(what);
    error_errno_ = err;
    failed_ = true;
    q_.clear();  // their directories close with the last reference
    queued_ = 0;
  }
  not_full_.notify_all();
  idle_.notify_all();
}

void Openers::Loop() {
  for (;;) {
    Job j;
    std::shared_ptr<DirFd> dir;
    {
      std::unique_lock<std::mutex> l(mu_);
      not_empty_.wait(l, [&] { return !q_.empty() || done_ || failed(); });
      if (q_.empty() || failed()) return;
      DirJobs d = std::move(q_.front());
      q_.pop_front();
      j = std::move(d.jobs.front());
      d.jobs.pop_front();
      dir = d.dir;
      if (!d.jobs.empty()) q_.push_back(std::move(d));  // the next file comes from the next folder
      --queued_;
      ++busy_;
      not_full_.notify_one();
    }
    struct stat st;
    int e = 0;
    int fd = OpenRegularAt(dir->fd, j.name.c_str(), &st, &e);
    if (fd < 0 && e != 0) {
      Fail(root_ + "/" + j.path + ": " + std::strerror(e), e);
    } else if (fd < 0) {
      Fail(root_ + "/" + j.path + ": changed type while walking", 0);
    } else if (!emit_(st, j.path, fd)) {
      e = errno;
      Fail(std::string("sending to the stager: ") + std::strerror(e), e);
    }
    dir.reset();
    std::lock_guard<std::mutex> l(mu_);
    if (--busy_ == 0 && queued_ == 0) idle_.notify_all();
  }
}

}  // namespace preflight::stage_internal
