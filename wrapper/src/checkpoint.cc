#include "preflight/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

namespace preflight {
namespace {

double MtimeOf(const struct stat& st) { return st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9; }

}  // namespace

Expected<std::vector<Checkpoint>> ListCheckpoints(const std::string& dir, const std::string& marker) {
  std::vector<Checkpoint> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return Status::FromErrno(errno, "checkpoint dir " + dir);
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    Checkpoint c;
    c.name = name;
    c.path = dir + "/" + name;
    struct stat st;
    if (::lstat(c.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    c.mtime = MtimeOf(st);
    struct stat ms;
    // Only a regular file marks a finished checkpoint: a directory (a
    // framework's own layout, or a mistake) or a symlink (which could point
    // anywhere) named like the marker does not, or the real older one would
    // be pruned in its favour.
    if (!marker.empty() && ::lstat((c.path + "/" + marker).c_str(), &ms) == 0 && S_ISREG(ms.st_mode)) {
      c.complete = true;
      c.mtime = MtimeOf(ms);
    }
    out.push_back(c);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Checkpoint& a, const Checkpoint& b) {
    if (a.mtime != b.mtime) return a.mtime < b.mtime;
    if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();  // step_9 < step_10
    return a.name < b.name;
  });
  return out;
}

Expected<std::string> NewestCompleteCheckpoint(const std::string& dir, const std::string& marker) {
  auto list = ListCheckpoints(dir, marker);
  if (!list) return list.status();
  for (auto it = list->rbegin(); it != list->rend(); ++it)
    if (it->complete) return it->path;
  return std::string();
}

Expected<std::vector<std::string>> PruneCheckpoints(const std::string& dir, const std::string& marker,
                                                    uint64_t keep) {
  std::vector<std::string> deleted;
  if (keep == 0) return deleted;
  auto list = ListCheckpoints(dir, marker);
  if (!list) return list.status();
  // Walk newest to oldest: the first `keep` complete ones stay; once the
  // newest complete one is seen, older incomplete ones are abandoned.
  uint64_t complete_seen = 0;
  std::vector<const Checkpoint*> doomed;
  for (auto it = list->rbegin(); it != list->rend(); ++it) {
    if (it->complete) {
      if (++complete_seen > keep) doomed.push_back(&*it);
    } else if (complete_seen > 0) {
      doomed.push_back(&*it);
    }
  }
  for (auto* c : doomed) {
    std::error_code ec;
    std::filesystem::remove_all(c->path, ec);
    if (ec) return Status::IOError("cannot delete old checkpoint " + c->path + ": " + ec.message());
    deleted.push_back(c->path);
  }
  return deleted;
}

Status CheckpointDirWritable(const std::string& dir) {
  std::string probe = dir + "/.preflight-run-probe." + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "checkpoint dir " + dir + " is not writable");
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace preflight
