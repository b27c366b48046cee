#include "preflight/checkpoint.h"

#include "preflight/ckpt_convention.h"

#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace preflight {

// The marker convention of ckpt/ (ckpt_convention.h) decides what is
// complete and orders the list; this keeps preflight-run's view of it.
Expected<std::vector<Checkpoint>> ListCheckpoints(const std::string& dir, const std::string& marker) {
  CkptConventionSpec spec;
  spec.kind = CkptConvention::kMarker;
  spec.marker = marker;
  auto local = LocalCkpts(dir, spec);
  if (!local) return local.status();
  std::vector<Checkpoint> out;
  for (const auto& l : *local) out.push_back(Checkpoint{l.name, dir + "/" + l.name, l.complete, l.time});
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
