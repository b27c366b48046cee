#include "preflight/gpu_job_map.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include "preflight/fileutil.h"

namespace preflight {

namespace {

// The lock every prolog and epilog of the node takes around its update:
// root's, 0600, so no user can open it and hold it (a lock on the folder
// itself could be taken by anyone who can read the folder).
constexpr const char* kLockName = ".preflight.lock";
// How long an update waits for another job's prolog or epilog to finish
// its own (a few small files; seconds mean a stuck filesystem).
constexpr int kLockWaitMs = 10000;
// A GPU file holds a few job ids; more than this is not ours to parse.
constexpr size_t kMaxFileBytes = 64 * 1024;

// An fd closed at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { if (fd >= 0) ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Status LockFolder(int dfd, const std::string& dir, Fd* lock) {
  lock->fd = ::openat(dfd, kLockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock->fd < 0) return Status::FromErrno(errno, "open " + dir + "/" + kLockName);
  for (int waited = 0;; waited += 10) {
    if (::flock(lock->fd, LOCK_EX | LOCK_NB) == 0) return Status::Ok();
    if (errno != EWOULDBLOCK && errno != EINTR) return Status::FromErrno(errno, "lock " + dir + "/" + kLockName);
    if (waited >= kLockWaitMs)
      return Status::Timeout("lock " + dir + "/" + kLockName + ": still held by another prolog or epilog after " +
                             std::to_string(kLockWaitMs / 1000) + "s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The jobs in GPU file `name`; NotFound when there is none. A symlink or
// anything but a regular file is refused (Permission): never followed.
Expected<std::vector<std::string>> ReadGpuFile(int dfd, const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  Fd f(::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.fd < 0) {
    int e = errno;
    if (e == ENOENT) return Status::NotFound(path + ": no such file");
    if (e == ELOOP) return Status::Permission(path + ": a symlink; left alone");
    return Status::FromErrno(e, "open " + path);
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Status::Permission(path + ": not a regular file; left alone");
  if (static_cast<size_t>(st.st_size) > kMaxFileBytes)
    return Status::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, more than a GPU file's " +
                                   std::to_string(kMaxFileBytes) + "; left alone");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(f.fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return ParseGpuJobFile(text);
}

// Publishes `text` as `name` in the folder: a hidden name dcgm-exporter
// skips, fsync, renameat over the old file (readers see the old or the new
// whole file).
Status WriteGpuFile(int dfd, const std::string& dir, const std::string& name, const std::string& text) {
  std::string tmp = "." + name + ".tmp." + std::to_string(::getpid());
  ::unlinkat(dfd, tmp.c_str(), 0);  // a crashed run's, same pid: ours to replace (the folder is root's)
  Fd f(::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (f.fd < 0) return Status::FromErrno(errno, "create " + dir + "/" + tmp);
  Status s;
  if (!WriteAll(f.fd, text)) s = Status::FromErrno(errno, "write " + dir + "/" + tmp);
  else if (::fchmod(f.fd, 0644) != 0) s = Status::FromErrno(errno, "chmod " + dir + "/" + tmp);  // umask
  else if (::fsync(f.fd) != 0) s = Status::FromErrno(errno, "sync " + dir + "/" + tmp);
  else if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0)
    s = Status::FromErrno(errno, "rename " + dir + "/" + tmp + " to " + name);
  if (!s.ok()) ::unlinkat(dfd, tmp.c_str(), 0);
  return s;
}

// Rewrites or removes GPU file `name` to hold `jobs`; records what it did.
Status Publish(int dfd, const std::string& dir, const std::string& name, const std::vector<std::string>& jobs,
               GpuJobMapChange* change) {
  int gpu = std::stoi(name);
  if (jobs.empty()) {
    if (::unlinkat(dfd, name.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno(errno, "remove " + dir + "/" + name);
    change->removed.push_back(gpu);
    return Status::Ok();
  }
  Status s = WriteGpuFile(dfd, dir, name, FormatGpuJobFile(jobs));
  if (s.ok()) change->written.push_back(gpu);
  return s;
}

// The folder's renames and unlinks made durable.
Status SyncFolder(int dfd, const std::string& dir) {
  if (::fsync(dfd) != 0) return Status::FromErrno(errno, "sync " + dir);
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ParseGpuJobFile(const std::string& text) {
  std::vector<std::string> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) jobs.push_back(line);
  }
  return jobs;
}

std::string FormatGpuJobFile(const std::vector<std::string>& jobs) {
  std::string out;
  for (const auto& j : jobs) out += j + "\n";
  return out;
}

std::vector<std::string> WithJob(std::vector<std::string> jobs, const std::string& job) {
  if (std::find(jobs.begin(), jobs.end(), job) == jobs.end()) jobs.push_back(job);
  return jobs;
}

std::vector<std::string> WithoutJob(std::vector<std::string> jobs, const std::string& job) {
  jobs.erase(std::remove(jobs.begin(), jobs.end(), job), jobs.end());
  return jobs;
}

bool IsGpuJobFileName(const std::string& name) {
  return !name.empty() && name.size() <= 9 && name.find_first_not_of("0123456789") == std::string::npos;
}

Status CheckMapJobId(const std::string& job) {
  if (job.empty() || job.size() > 20 || job.find_first_not_of("0123456789") != std::string::npos)
    return Status::InvalidArgument("job id '" + job + "': expected 1 to 20 digits");
  return Status::Ok();
}

Expected<GpuJobMapChange> AddJobToGpuMap(const std::string& dir, const std::vector<int>& gpus, const std::string& job) {
  Status s = CheckMapJobId(job);
  if (!s.ok()) return s;
  GpuJobMapChange change;
  if (gpus.empty()) return change;
  auto dfd = OpenPrivateDir(dir, 0755);
  if (!dfd) return dfd.status().Context("dcgm_job_map_dir");
  Fd d(*dfd), lock(-1);
  if (!(s = LockFolder(d.fd, dir, &lock)).ok()) return s;
  for (int gpu : gpus) {
    if (gpu < 0) return Status::InvalidArgument("GPU id " + std::to_string(gpu) + ": negative");
    std::string name = std::to_string(gpu);
    auto jobs = ReadGpuFile(d.fd, dir, name);
    if (!jobs && jobs.status().code() != Status::Code::kNotFound) return jobs.status();
    std::vector<std::string> now = WithJob(jobs ? *jobs : std::vector<std::string>{}, job);
    if (jobs && now == *jobs) continue;  // listed already (a prolog run twice)
    if (!(s = Publish(d.fd, dir, name, now, &change)).ok()) return s;
  }
  if (!(s = SyncFolder(d.fd, dir)).ok()) return s;
  return change;
}

Expected<GpuJobMapChange> RemoveJobFromGpuMap(const std::string& dir, const std::string& job) {
  Status s = CheckMapJobId(job);
  if (!s.ok()) return s;
  GpuJobMapChange change;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) return change;
  auto dfd = OpenPrivateDir(dir, 0755);
  if (!dfd) return dfd.status().Context("dcgm_job_map_dir");
  Fd d(*dfd), lock(-1);
  if (!(s = LockFolder(d.fd, dir, &lock)).ok()) return s;
  // The names first, then the updates: renames while readdir walks the
  // folder could show a name twice or not at all.
  std::vector<std::string> names;
  {
    int scan = ::openat(d.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* dp = scan < 0 ? nullptr : ::fdopendir(scan);
    if (dp == nullptr) {
      int e = errno;
      if (scan >= 0) ::close(scan);
      return Status::FromErrno(e, "list " + dir);
    }
    while (struct dirent* e = ::readdir(dp))
      if (IsGpuJobFileName(e->d_name)) names.push_back(e->d_name);
    ::closedir(dp);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return std::stoi(a) < std::stoi(b); });
  Status first;  // one bad file does not keep this job in the others
  for (const auto& name : names) {
    auto jobs = ReadGpuFile(d.fd, dir, name);
    if (!jobs) {
      if (jobs.status().code() != Status::Code::kNotFound && first.ok()) first = jobs.status();
      continue;
    }
    std::vector<std::string> now = WithoutJob(*jobs, job);
    if (now == *jobs) continue;
    s = Publish(d.fd, dir, name, now, &change);
    if (!s.ok() && first.ok()) first = s;
  }
  if (!(s = SyncFolder(d.fd, dir)).ok() && first.ok()) first = s;
  if (!first.ok()) return first;
  return change;
}

}  // namespace preflight
