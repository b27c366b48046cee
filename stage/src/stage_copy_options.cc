// The staging copy engine's write-side seam and its free-room limits
// (stage_copy_options.h).
#include "preflight/stage_copy_options.h"

#include <fcntl.h>
#include <unistd.h>

#include "preflight/report.h"

namespace preflight {

int StageFs::OpenAt(int dirfd, const char* path, int flags, mode_t mode) { return ::openat(dirfd, path, flags, mode); }
ssize_t StageFs::Pread(int fd, void* buf, size_t n, off_t off) { return ::pread(fd, buf, n, off); }
ssize_t StageFs::Pwrite(int fd, const void* buf, size_t n, off_t off) { return ::pwrite(fd, buf, n, off); }
ssize_t StageFs::CopyFileRange(int in, off_t* in_off, int out, size_t n) {
  return ::copy_file_range(in, in_off, out, nullptr, n, 0);
}
int StageFs::MkdirAt(int dirfd, const char* path, mode_t mode) { return ::mkdirat(dirfd, path, mode); }
int StageFs::SymlinkAt(const char* target, int dirfd, const char* path) { return ::symlinkat(target, dirfd, path); }
int StageFs::Futimens(int fd, const struct timespec ts[2]) { return ::futimens(fd, ts); }
int StageFs::Close(int fd) { return ::close(fd); }

StageFs& DefaultStageFs() {
  static StageFs fs;
  return fs;
}

void FreeRoomLimits(const struct statvfs& v, CopyOptions* o) {
  o->space_limit = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  if (o->space_limit == 0) o->space_limit = 1;  // a full disk: the first byte is refused
  o->free_inodes = v.f_files == 0 ? CopyOptions::kNoInodeLimit : static_cast<uint64_t>(v.f_favail);
}

void LimitToFreeRoom(int dst_fd, CopyOptions* o) {
  struct statvfs v;
  if (::fstatvfs(dst_fd, &v) == 0) FreeRoomLimits(v, o);
}

Status TooManyEntries(const CopyOptions& o, uint64_t entries) {
  if (o.max_entries == 0 || entries <= o.max_entries) return Status::Ok();
  return Status::Failed("it has more than " + std::to_string(o.max_entries) +
                        " files, folders and symlinks, the most one staged dataset may have (stage_max_entries: the "
                        "copy keeps every entry in memory); pack it (tar, webdataset shards) or split it");
}

Status RoomFor(const CopyOptions& o, uint64_t bytes, uint64_t entries) {
  if (o.space_limit != 0 && bytes > o.space_limit)
    return Status::Failed("the dataset needs at least " + HumanBytes(static_cast<double>(bytes)) +
                          " (apparent size, sparse files count in full), more than the " +
                          HumanBytes(static_cast<double>(o.space_limit)) + " free");
  if (o.free_inodes != CopyOptions::kNoInodeLimit && entries + CopyOptions::kInodeReserve > o.free_inodes)
    return Status::Failed("it has at least " + std::to_string(entries) + " files and folders, the file system has " +
                          std::to_string(o.free_inodes) + " free inodes (" + std::to_string(CopyOptions::kInodeReserve) +
                          " of them kept for the cache's own records; see df -i)");
  return Status::Ok();
}

}  // namespace preflight
