// Issue 29 weak spots of the copy: a dataset with more entries than the
// destination has free inodes was reported as "No space left on device"
// under "does not fit" while df -h showed free space; a source changed
// mid-copy was reported as "(size 6 -> 6)". Now the free inodes are
// counted before anything is written (RoomFor), an ENOSPC from a file
// system out of inodes says so (DestFailure), and a changed source names
// what changed (DescribeChange).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "preflight/fileutil.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_job.h"
#include "preflight_test/temp_dir.h"
#include "stage_copy_pool.h"
#include "stage_test_util.h"

namespace preflight {
namespace {

using preflight_test::TempDir;
using preflight_test::Write;

// A tmpfs with few inodes and plenty of bytes, at `path`: what the test
// needs from a real node-local disk that ran out of inodes. Root only.
struct SmallInodeFs {
  std::string path;
  bool mounted = false;
  SmallInodeFs(const std::string& p, int inodes) : path(p) {
    MakeDirs(path);
    std::string opts = "size=64m,nr_inodes=" + std::to_string(inodes);
    mounted = ::geteuid() == 0 && ::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0;
  }
  ~SmallInodeFs() {
    if (mounted) ::umount2(path.c_str(), MNT_DETACH);
  }
};

void ManyFiles(const std::string& root, int n) {
  MakeDirs(root);
  for (int i = 0; i < n; ++i) Write(root + "/f" + std::to_string(i), "x");
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it); it.increment(ec)) ++n;
  return n;
}

TEST(StageRoom, TheFreeRoomDecisionFromStatvfsFigures) {
  struct statvfs v {};
  v.f_frsize = 4096;
  v.f_bavail = 1000;
  v.f_files = 1000;
  v.f_favail = 100;
  CopyOptions o;
  FreeRoomLimits(v, &o);
  EXPECT_EQ(o.space_limit, 4096000u);
  EXPECT_EQ(o.free_inodes, 100u);
  EXPECT_TRUE(RoomFor(o, 4096000, 100 - CopyOptions::kInodeReserve).ok());
  Status s = RoomFor(o, 10, 85);
  EXPECT_EQ(s.code(), Status::Code::kFailed);
  EXPECT_EQ(s.message(), "it has at least 85 files and folders, the file system has 100 free inodes "
                         "(16 of them kept for the cache's own records; see df -i)");
  EXPECT_NE(RoomFor(o, 4096001, 1).message().find("the dataset needs at least"), std::string::npos);
  // No inode count (btrfs, some network file systems report f_files 0): bytes only.
  v.f_files = 0;
  v.f_favail = 0;
  FreeRoomLimits(v, &o);
  EXPECT_EQ(o.free_inodes, CopyOptions::kNoInodeLimit);
  EXPECT_TRUE(RoomFor(o, 1, 1u << 30).ok());
  // Out of inodes: the first entry is refused. A full disk: the first byte.
  v.f_files = 1000;
  FreeRoomLimits(v, &o);
  EXPECT_FALSE(RoomFor(o, 0, 1).ok());
  v.f_bavail = 0;
  FreeRoomLimits(v, &o);
  EXPECT_EQ(o.space_limit, 1u);
}

// CopyTree of a 100-file tree in `t` (src/) into dst/data with `o` (two workers).
Status CopyHundred(const TempDir& t, CopyOptions o, FaultSide* side, std::vector<std::string>* m) {
  ManyFiles(t.path() + "/src", 100);
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  o.workers = 2;
  CopyStats st;
  Status s = CopyTree(t.path() + "/src", dfd, "data", o, &st, m, side);
  ::close(dfd);
  return s;
}

TEST(StageRoom, MoreEntriesThanFreeInodesIsRefusedBeforeTheyAreWritten) {
  TempDir t;
  CopyOptions o;
  o.free_inodes = 50;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyHundred(t, o, &side, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace);
  // The folder and 34 files fit (35 + 16 kept > 50): refused at the 35th entry.
  EXPECT_EQ(s.message(), "it has at least 35 files and folders, the file system has 50 free inodes "
                         "(16 of them kept for the cache's own records; see df -i)");
  EXPECT_LT(Entries(t.path() + "/dst"), 35u);
}

TEST(StageRoom, ADatasetPastStageMaxEntriesIsTheSourcesFaultBeforeItIsWritten) {
  TempDir t;
  CopyOptions o;
  o.max_entries = 40;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyHundred(t, o, &side, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource) << "the dataset's shape, not the node's disk";
  EXPECT_NE(s.message().find("/src: it has more than 40 files, folders and symlinks, the most one staged dataset may "
                             "have (stage_max_entries: the copy keeps every entry in memory); pack it (tar, "
                             "webdataset shards) or split it"),
            std::string::npos) << s.message();
  EXPECT_LE(Entries(t.path() + "/dst"), 41u) << "refused at the 41st entry, not after the walk";
  EXPECT_LE(m.size(), 41u) << "the manifest in memory stops there too";
  o.max_entries = 0;
  EXPECT_TRUE(TooManyEntries(o, 1u << 30).ok()) << "0: no bound";
  o.max_entries = 101;
  EXPECT_TRUE(TooManyEntries(o, 101).ok());
}

TEST(StageRoom, AFileSystemOutOfInodesSaysInodesNotSpace) {
  TempDir t;
  SmallInodeFs fs(t.path() + "/fs", 24);
  if (!fs.mounted) GTEST_SKIP() << "needs root to mount a tmpfs";
  ManyFiles(t.path() + "/src", 60);
  // The copy engine alone, no limit given: the kernel's ENOSPC, said as inodes.
  int dfd = ::open(fs.path.c_str(), O_RDONLY | O_DIRECTORY);
  CopyOptions o;
  o.workers = 1;
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyTree(t.path() + "/src", dfd, "data", o, &st, &m, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace);
  EXPECT_NE(s.message().find("(the file system has no free inodes: 0 of 24, with "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("free; see df -i): No space left on device"), std::string::npos) << s.message();
  // On a file system with inodes left, an ENOSPC stays the plain one.
  int other = ::open(t.path().c_str(), O_RDONLY | O_DIRECTORY);
  EXPECT_EQ(stage_internal::DestFailure(ENOSPC, "write x", other).message(), "write x: No space left on device");
  ::close(other);
  ::close(dfd);
  RemoveTree(fs.path + "/data");
  // Through the cache: counted against f_favail before anything is
  // written, and the failed build is removed.
  StageCacheOptions co;
  co.dir = fs.path + "/cache";
  StagedDataset d;
  s = StageDataset(co, t.path() + "/src", {}, "700", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace);
  EXPECT_NE(s.message().find("it has at least "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(" free inodes"), std::string::npos) << s.message();
  for (const auto& e : std::filesystem::directory_iterator(co.dir + "/" + StageCacheKey(t.path() + "/src")))
    EXPECT_NE(e.path().filename().string().rfind("tmp-", 0), 0u) << e.path();
}

TEST(StageRoom, ThePrologSaysDoesNotFitAndInodes) {
  TempDir t;
  SmallInodeFs fs(t.path() + "/fs", 200);
  if (!fs.mounted) GTEST_SKIP() << "needs root to mount a tmpfs";
  ManyFiles(t.path() + "/src", 300);
  Config cfg;
  cfg.stage.dir = fs.path + "/stage";
  cfg.state_dir = t.path() + "/state";
  JobContext job;
  job.job_id = "71";
  job.node = "n1";
  job.uid = 0;
  job.gid = 0;
  job.options.stage_given = true;
  job.options.stage = {{t.path() + "/src", "src"}};
  StageJobResult r = StageForJob(cfg, job);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.drain) << r.message;
  EXPECT_EQ(r.owner, FaultOwner::kUser);
  EXPECT_NE(r.message.find("dataset does not fit in " + cfg.stage.dir + " on n1: it has at least "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(" files and folders, the file system has "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(" free inodes"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("No space left"), std::string::npos) << r.message;
}

// A source file rewritten in place between the walker's open and the
// copy's check: same size, a new mtime.
struct TouchOnRead : StageFs {
  ssize_t Pread(int fd, void* b, size_t n, off_t off) override {
    struct timespec ts[2] = {{1700000000, 5}, {1700000000, 5}};
    ::futimens(fd, ts);
    return StageFs::Pread(fd, b, n, off);
  }
};

TEST(StageRoom, AChangedSourceSaysWhatChanged) {
  TempDir t;
  MakeDirs(t.path() + "/src");
  Write(t.path() + "/src/f", "abcdef");
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  TouchOnRead fs;
  CopyOptions o;
  o.workers = 1;
  o.fs = &fs;
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyTree(t.path() + "/src", dfd, "data", o, &st, &m, &side);
  ::close(dfd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find(t.path() + "/src/f: changed while being copied (mtime "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(".000000005 "), std::string::npos) << s.message();  // the new mtime, to the nanosecond
  EXPECT_EQ(s.message().find("size"), std::string::npos) << s.message();           // the size did not change
}

TEST(StageRoom, DescribeChangeNamesEachFieldOldAndNew) {
  stage_internal::Task t{};
  t.size = 6;
  t.mtime_sec = 100;
  t.mtime_nsec = 1;
  t.ctime_sec = 200;
  t.ctime_nsec = 2;
  t.ino = 5;
  struct stat now {};
  now.st_size = 6;
  now.st_mtim = {100, 1};
  now.st_ctim = {200, 2};
  now.st_ino = 5;
  EXPECT_EQ(stage_internal::DescribeChange(t, now, 6, true), "");
  now.st_size = 9;
  EXPECT_EQ(stage_internal::DescribeChange(t, now, 6, true), "size 6 -> 9 bytes");
  now.st_size = 6;
  now.st_ino = 7;
  now.st_ctim = {201, 0};
  std::string d = stage_internal::DescribeChange(t, now, 6, true);
  EXPECT_NE(d.find("inode 5 -> 7"), std::string::npos) << d;
  EXPECT_NE(d.find("ctime "), std::string::npos) << d;
  EXPECT_EQ(stage_internal::DescribeChange(t, now, 6, false), "inode 5 -> 7");  // ctime only with the warm check
  now.st_ino = 5;
  EXPECT_EQ(stage_internal::DescribeChange(t, now, 4, false), "read 4 of its 6 bytes");
}

}  // namespace
}  // namespace preflight
