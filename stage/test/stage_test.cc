// Staging: the option grammar, the copy engine (real files in a temp dir;
// write-side faults through the StageFs seam) and the cross-job cache
// (real flock, real fork, a real SIGKILL).
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/options.h"
#include "preflight/stage_spec.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"

namespace preflight {
namespace {

// The shared scratch directory (preflight_test/temp_dir.h), private.
struct TempDir : preflight_test::TempDir {
  TempDir() : preflight_test::TempDir("stage", 0700) {}
};

using preflight_test::Blob;
using preflight_test::kNoNobody;
using preflight_test::NobodyReader;
using preflight_test::Write;
std::string Read(const std::string& path) {
  auto r = ReadWholeFile(path);
  return r ? *r : "<missing>";
}

// A dataset with the shapes that matter: nesting, many small files, one
// file over the copy_file_range threshold, an empty file, an executable,
// an in-tree relative symlink.
void MakeDataset(const std::string& root) {
  MakeDirs(root + "/a/b/c");
  for (int i = 0; i < 50; ++i) Write(root + "/a/f" + std::to_string(i), Blob(8192, static_cast<char>(i)));
  Write(root + "/a/b/c/big", Blob(3 << 20, 'x'));
  Write(root + "/empty", "");
  Write(root + "/run.sh", "#!/bin/sh\n", 0755);
  ASSERT_EQ(::symlink("a/f1", (root + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("../f2", (root + "/a/b/up").c_str()), 0);
}

CopyOptions Opts(StageFs* fs = nullptr) {
  CopyOptions o;
  o.workers = 3;
  o.fs = fs;
  return o;
}

// ---- option grammar --------------------------------------------------------

TEST(StageSpec, ParsesNamesAndDefaults) {
  auto v = ParseStageSpec("/data/imagenet,/data/x.tar:shard,rel/dir/:mine");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].name, "imagenet");
  EXPECT_EQ((*v)[1].path, "/data/x.tar");
  EXPECT_EQ((*v)[1].name, "shard");
  EXPECT_EQ((*v)[2].name, "mine");
  EXPECT_EQ(StageSpecText(*v), "/data/imagenet:imagenet,/data/x.tar:shard,rel/dir/:mine");
  // A ':' followed by a '/' belongs to the path.
  auto p = ParseStageSpec("/data/a:b/c");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].path, "/data/a:b/c");
  EXPECT_EQ((*p)[0].name, "c");
  auto l = ParseStageSpec("@lists/train.txt");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE((*l)[0].list);
  EXPECT_EQ(StageVarName("imagenet-val.v2"), "PREFLIGHT_STAGE_IMAGENET_VAL_V2");
  auto w = ParseStageSpec("/data/my set");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)[0].name, "my_set");
}

TEST(StageSpec, RefusesBadInput) {
  struct Case { const char* spec; const char* why; } cases[] = {
      {"", "expected SRC"},
      {"(null)", "expected SRC"},
      {"/data/../etc", "'..' is not allowed"},
      {"../x", "'..' is not allowed"},
      {"/a,", "empty dataset"},
      {"/a:bad name", "has ' '"},
      {"/a:.hidden", "must be 1-64"},
      {"/x/data,/y/data", "given twice"},
      {"/", "give one with SRC:NAME"},
      {"@", "list file path missing"},
  };
  for (const auto& c : cases) {
    auto v = ParseStageSpec(c.spec);
    ASSERT_FALSE(v.ok()) << c.spec;
    EXPECT_NE(v.status().message().find(c.why), std::string::npos) << c.spec << ": " << v.status().message();
  }
}

TEST(StageSpec, ResolvesAtSubmission) {
  TempDir t;
  MakeDirs(t.path() + "/ds");
  Write(t.path() + "/one.bin", "x");
  Write(t.path() + "/list", "# datasets\nds:train\n\n" + t.path() + "/one.bin\n");
  auto v = ParseStageSpec("@list,ds:d2");
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(ResolveStageSources(*v, t.path()).ok());
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].path, t.path() + "/ds");  // relative to the list's folder
  EXPECT_EQ((*v)[0].name, "train");
  EXPECT_EQ((*v)[1].name, "one.bin");
  EXPECT_EQ((*v)[2].path, t.path() + "/ds");

  auto missing = ParseStageSpec("nope");
  ASSERT_TRUE(ResolveStageSources(*missing, t.path()).code() == Status::Code::kNotFound);
  EXPECT_NE(ResolveStageSources(*missing, t.path()).message().find(t.path() + "/nope: No such file"), std::string::npos);
  Write(t.path() + "/badlist", "ds\n@other\n");
  auto bl = ParseStageSpec("@badlist");
  Status s = ResolveStageSources(*bl, t.path());
  EXPECT_NE(s.message().find("badlist:2"), std::string::npos) << s.message();
  ::mkfifo((t.path() + "/fifo").c_str(), 0644);
  auto ff = ParseStageSpec("fifo");
  EXPECT_NE(ResolveStageSources(*ff, t.path()).message().find("not a directory or regular file"), std::string::npos);
}

TEST(StageSpec, IsInTheOptionTable) {
  const UserOption* stage = nullptr;
  for (const auto& o : UserOptions())
    if (std::string(o.name) == "stage") stage = &o;
  ASSERT_NE(stage, nullptr);
  EXPECT_STREQ(stage->env_name, "PREFLIGHT_STAGE");
  JobOptions opts;
  ASSERT_TRUE(stage->apply("/tmp", opts).ok());
  ASSERT_TRUE(stage->apply("/tmp", opts).ok());  // Slurm may call twice
  EXPECT_TRUE(stage->given(opts));
  EXPECT_EQ(stage->value_text(opts), "/tmp:tmp");
  ASSERT_NE(stage->resolve_local, nullptr);
  EXPECT_TRUE(stage->resolve_local(opts).ok());
  EXPECT_FALSE(stage->apply("/x/../y", opts).ok());
}

// ---- copy engine -----------------------------------------------------------

TEST(CopyTree, CopiesATreeFaithfully) {
  TempDir t;
  MakeDataset(t.path() + "/src");
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyTree(t.path() + "/src", dfd, "data", Opts(), &st, &m, &side);
  ::close(dfd);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(st.files, 53u);
  EXPECT_EQ(st.symlinks, 2u);
  EXPECT_EQ(st.bytes, 50u * 8192 + (3u << 20) + 10);
  std::string d = t.path() + "/dst/data";
  EXPECT_EQ(Read(d + "/a/f7"), Blob(8192, 7));
  EXPECT_EQ(Read(d + "/a/b/c/big"), Blob(3 << 20, 'x'));
  EXPECT_EQ(Read(d + "/empty"), "");
  EXPECT_EQ(Read(d + "/link"), Blob(8192, 1));
  struct stat a, b;
  ASSERT_EQ(::stat((d + "/run.sh").c_str(), &a), 0);
  EXPECT_TRUE(a.st_mode & S_IXUSR);
  ASSERT_EQ(::stat((t.path() + "/src/a/f3").c_str(), &b), 0);
  ASSERT_EQ(::stat((d + "/a/f3").c_str(), &a), 0);
  EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
  EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
  // The scan sees the same dataset the copy recorded.
  std::vector<std::string> scan;
  ASSERT_TRUE(ScanSource(t.path() + "/src", Opts(), &scan, &side).ok());
  EXPECT_TRUE(SameManifest(scan, m));
  EXPECT_EQ(m[0], "root d " + t.path() + "/src");
  // The digest the walker computes alone (the cache's check) is the one of
  // the manifest the copy recorded, and does not depend on line order.
  std::string digest;
  ASSERT_TRUE(ScanSource(t.path() + "/src", Opts(), nullptr, &side, &digest).ok());
  EXPECT_EQ(digest, DigestOf(m));
  std::vector<std::string> reversed(m.rbegin(), m.rend());
  EXPECT_EQ(DigestOf(reversed), digest);
  std::vector<std::string> changed = m;
  changed.back() += "x";
  EXPECT_NE(DigestOf(changed), digest);
}

TEST(CopyTree, CopiesASingleFile) {
  TempDir t;
  Write(t.path() + "/one", Blob(5000, 'q'));
  int dfd = ::open(t.path().c_str(), O_RDONLY | O_DIRECTORY);
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  ASSERT_TRUE(CopyTree(t.path() + "/one", dfd, "copy", Opts(), &st, &m, &side).ok());
  ::close(dfd);
  EXPECT_EQ(Read(t.path() + "/copy"), Blob(5000, 'q'));
  EXPECT_EQ(st.files, 1u);
}

Status CopyExpectingFailure(const std::string& src, const std::string& dst, StageFs* fs, FaultSide* side) {
  MakeDirs(dst);
  int dfd = ::open(dst.c_str(), O_RDONLY | O_DIRECTORY);
  CopyStats st;
  std::vector<std::string> m;
  Status s = CopyTree(src, dfd, "data", Opts(fs), &st, &m, side);
  ::close(dfd);
  return s;
}

TEST(CopyTree, RefusesLinksLeavingTheTreeAndSpecialFiles) {
  TempDir t;
  struct Case { const char* target; const char* why; } cases[] = {
      {"/etc/passwd", "symlink to absolute path"},
      {"../../outside", "leaves the source tree"},
      {"../../src-x/../outside", "leaves the source tree"},
  };
  MakeDirs(t.path() + "/outside");
  int i = 0;
  for (const auto& c : cases) {
    std::string src = t.path() + "/src" + std::to_string(i);
    MakeDirs(src + "/d");
    ASSERT_EQ(::symlink(c.target, (src + "/d/l").c_str()), 0);
    FaultSide side;
    Status s = CopyExpectingFailure(src, t.path() + "/dst" + std::to_string(i++), nullptr, &side);
    ASSERT_FALSE(s.ok()) << c.target;
    EXPECT_EQ(side, FaultSide::kSource);
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(src + "/d/l"), std::string::npos) << s.message();
  }
  // A link to an in-tree directory whose own link climbs out: resolved as
  // the kernel would, so the escape is caught.
  std::string src = t.path() + "/chain";
  MakeDirs(src + "/x/y");
  ASSERT_EQ(::symlink("../..", (src + "/x/y/s").c_str()), 0);
  ASSERT_EQ(::symlink("x/y/s/../outside", (src + "/t").c_str()), 0);
  FaultSide side;
  Status s = CopyExpectingFailure(src, t.path() + "/dstc", nullptr, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("leaves the source tree"), std::string::npos) << s.message();
  std::string f = t.path() + "/fifo";
  MakeDirs(f);
  ::mkfifo((f + "/p").c_str(), 0644);
  s = CopyExpectingFailure(f, t.path() + "/dstf", nullptr, &side);
  EXPECT_NE(s.message().find("fifo, socket or device"), std::string::npos) << s.message();
  s = CopyExpectingFailure(t.path() + "/vanished", t.path() + "/dstv", nullptr, &side);
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find(t.path() + "/vanished: No such file"), std::string::npos) << s.message();
}

// Write-side faults through the seam.
class FaultFs : public StageFs {
 public:
  int fail_write_after = -1;   // fail the Nth write (0-based) with `write_errno`
  int write_errno = ENOSPC;
  bool kill_on_fail = false;   // SIGKILL ourselves instead (crash mid-copy)
  int fail_pread_after = -1;   // EIO from the Nth pread of the source
  bool no_copy_range = false;  // force the pread/write path
  std::atomic<int> writes{0}, preads{0};
  ssize_t Pwrite(int fd, const void* b, size_t n, off_t off) override {
    if (fail_write_after >= 0 && writes++ >= fail_write_after) {
      if (kill_on_fail) ::kill(::getpid(), SIGKILL);
      errno = write_errno;
      return -1;
    }
    return StageFs::Pwrite(fd, b, n, off);
  }
  ssize_t Pread(int fd, void* b, size_t n, off_t off) override {
    if (fail_pread_after >= 0 && preads++ >= fail_pread_after) {
      errno = EIO;
      return -1;
    }
    return StageFs::Pread(fd, b, n, off);
  }
  ssize_t CopyFileRange(int in, off_t* off, int out, size_t n) override {
    if (no_copy_range) {
      errno = EXDEV;
      return -1;
    }
    return StageFs::CopyFileRange(in, off, out, n);
  }
};

TEST(CopyTree, DiskFullIsASpaceFault) {
  TempDir t;
  MakeDataset(t.path() + "/src");
  FaultFs fs;
  fs.fail_write_after = 10;
  FaultSide side;
  Status s = CopyExpectingFailure(t.path() + "/src", t.path() + "/dst", &fs, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace);
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("write data/"), std::string::npos) << s.message();
}

// The walker's failure kind comes from its errno, not from its message: a
// file the user named like an error text is classified by what happened.
TEST(CopyTree, SourceErrorsAreClassifiedByErrnoNotByText) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDirs(src);
  ASSERT_EQ(::mkfifo((src + "/No such file or directory").c_str(), 0644), 0);
  FaultSide side;
  Status s = CopyExpectingFailure(src, t.path() + "/dst", nullptr, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("refused"), std::string::npos) << s.message();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.message();  // a refusal, not a missing file
  Status missing = CopyExpectingFailure(t.path() + "/Permission denied", t.path() + "/dst2", nullptr, &side);
  EXPECT_EQ(missing.code(), Status::Code::kNotFound) << missing.message();
  EXPECT_EQ(side, FaultSide::kSource);
}

TEST(CopyTree, DestinationEioIsANodeFault) {
  TempDir t;
  MakeDataset(t.path() + "/src");
  FaultFs fs;
  fs.fail_write_after = 3;
  fs.write_errno = EIO;
  FaultSide side;
  Status s = CopyExpectingFailure(t.path() + "/src", t.path() + "/dst", &fs, &side);
  EXPECT_EQ(side, FaultSide::kNode);
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.message();
}

TEST(CopyTree, SourceEioMidFileIsASourceFault) {
  TempDir t;
  MakeDirs(t.path() + "/src");
  Write(t.path() + "/src/big", Blob(5 << 20, 'b'));
  FaultFs fs;
  fs.no_copy_range = true;
  fs.fail_pread_after = 2;  // third MiB of the file
  FaultSide side;
  Status s = CopyExpectingFailure(t.path() + "/src", t.path() + "/dst", &fs, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("read " + t.path() + "/src/big: Input/output error"), std::string::npos) << s.message();  // the source path
  EXPECT_EQ(fs.preads.load(), 3);
}

TEST(CopyTree, FallbackPathCopiesLargeFiles) {
  TempDir t;
  MakeDataset(t.path() + "/src");
  FaultFs fs;
  fs.no_copy_range = true;
  FaultSide side;
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  CopyStats st;
  std::vector<std::string> m;
  ASSERT_TRUE(CopyTree(t.path() + "/src", dfd, "data", Opts(&fs), &st, &m, &side).ok());
  ::close(dfd);
  EXPECT_EQ(Read(t.path() + "/dst/data/a/b/c/big"), Blob(3 << 20, 'x'));
}

// Files of 1 MiB and more are handed out one by one, so they spread over
// the workers (they used to share one batch of 32 files: one worker copied
// them all). Each copy call holds its worker 20 ms, so an idle worker
// always has time to take the next file.
class ThreadsFs : public StageFs {
 public:
  ssize_t CopyFileRange(int in, off_t* off, int out, size_t n) override {
    {
      std::lock_guard<std::mutex> l(mu);
      threads.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return StageFs::CopyFileRange(in, off, out, n);
  }
  std::mutex mu;
  std::set<std::thread::id> threads;
};

TEST(CopyTree, LargeFilesSpreadOverTheWorkers) {
  TempDir t;
  MakeDirs(t.path() + "/src");
  for (int i = 0; i < 4; ++i) Write(t.path() + "/src/big" + std::to_string(i), Blob(2 << 20, static_cast<char>('a' + i)));
  ThreadsFs fs;
  CopyOptions o = Opts(&fs);
  o.workers = 2;
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  ASSERT_TRUE(CopyTree(t.path() + "/src", dfd, "data", o, &st, &m, &side).ok());
  ::close(dfd);
  EXPECT_EQ(st.files, 4u);
  EXPECT_EQ(fs.threads.size(), 2u) << "the large files were not spread over both workers";
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(Read(t.path() + "/dst/data/big" + std::to_string(i)), Blob(2 << 20, static_cast<char>('a' + i)));
}

// ---- cache -----------------------------------------------------------------

StageCacheOptions CacheOpts(const std::string& dir, StageFs* fs = nullptr) {
  StageCacheOptions o;
  o.dir = dir;
  o.workers = 3;
  o.fs = fs;
  return o;
}

std::vector<std::string> Versions(const std::string& keydir, const char* prefix) {
  std::vector<std::string> v;
  auto d = std::unique_ptr<DIR, int (*)(DIR*)>(::opendir(keydir.c_str()), ::closedir);
  if (!d) return v;
  while (auto* e = ::readdir(d.get()))
    if (std::string(e->d_name).rfind(prefix, 0) == 0) v.push_back(e->d_name);
  return v;
}

TEST(StageCache, HitWhenUnchangedMissWhenChanged) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  StagedDataset d1, d2, d3;
  FaultSide side;
  ASSERT_TRUE(StageDataset(o, src, {}, "101", &d1, &side).ok());
  EXPECT_FALSE(d1.hit);
  EXPECT_EQ(Read(d1.data_path + "/a/f9"), Blob(8192, 9));
  ASSERT_TRUE(StageDataset(o, src, {}, "102", &d2, &side).ok());
  EXPECT_TRUE(d2.hit);
  EXPECT_EQ(d2.data_path, d1.data_path);
  EXPECT_EQ(d2.files, d1.files);
  // A changed file (same size, new mtime) is a new version; the old one
  // stays while jobs 101 and 102 use it.
  Write(src + "/a/f9", Blob(8192, 99));
  struct timespec ts[2] = {{0, UTIME_OMIT}, {1700000000, 5}};
  ::utimensat(AT_FDCWD, (src + "/a/f9").c_str(), ts, 0);
  ASSERT_TRUE(StageDataset(o, src, {}, "103", &d3, &side).ok());
  EXPECT_FALSE(d3.hit);
  EXPECT_NE(d3.data_path, d1.data_path);
  EXPECT_EQ(Read(d3.data_path + "/a/f9"), Blob(8192, 99));
  EXPECT_EQ(Read(d1.data_path + "/a/f9"), Blob(8192, 9));
  std::string keydir = o.dir + "/" + d1.key;
  EXPECT_EQ(Versions(keydir, "v-").size(), 2u);
  ASSERT_TRUE(ReleaseJob(o, "101").ok());
  EXPECT_EQ(Versions(keydir, "v-").size(), 2u);  // 102 still holds it
  ASSERT_TRUE(ReleaseJob(o, "102").ok());
  EXPECT_EQ(Versions(keydir, "v-").size(), 1u);
  auto list = ListCache(o);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].source, src);
  EXPECT_EQ((*list)[0].jobs, std::vector<std::string>{"103"});
  Status rm = RemoveCacheEntry(o, src);
  EXPECT_EQ(rm.code(), Status::Code::kUnavailable);
  EXPECT_NE(rm.message().find("in use by job(s) 103"), std::string::npos) << rm.message();
  ASSERT_TRUE(ReleaseJob(o, "103").ok());
  ASSERT_TRUE(RemoveCacheEntry(o, d1.key).ok());
  EXPECT_TRUE(ListCache(o)->empty());
}

TEST(StageCache, KilledMidCopyIsNeverServedAndTheLockIsFreed) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  pid_t pid = ::fork();
  if (pid == 0) {
    FaultFs fs;
    fs.fail_write_after = 20;
    fs.kill_on_fail = true;
    auto oc = CacheOpts(o.dir, &fs);
    StagedDataset d;
    FaultSide side;
    StageDataset(oc, src, {}, "201", &d, &side);
    ::_exit(0);  // not reached
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  std::string keydir = o.dir + "/" + StageCacheKey(src);
  EXPECT_EQ(Versions(keydir, "tmp-").size(), 1u);  // the crashed build's leftovers
  EXPECT_TRUE(Versions(keydir, "v-").empty());
  EXPECT_FALSE(ReadWholeFile(keydir + "/current").ok());
  StagedDataset d;
  FaultSide side;
  o.deadline = MonotonicSeconds() + 30;  // a stuck lock would fail, not hang
  ASSERT_TRUE(StageDataset(o, src, {}, "202", &d, &side).ok());
  EXPECT_FALSE(d.hit);
  EXPECT_EQ(Read(d.data_path + "/a/b/c/big"), Blob(3 << 20, 'x'));
  EXPECT_TRUE(Versions(keydir, "tmp-").empty());
}

TEST(StageCache, TimeoutFailsWithoutPublishing) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  o.deadline = MonotonicSeconds() - 1;  // already past: no sleeping in tests
  StagedDataset d;
  FaultSide side;
  Status s = StageDataset(o, src, {}, "251", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kTimeout);
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s.message();
  std::string keydir = o.dir + "/" + StageCacheKey(src);
  EXPECT_TRUE(Versions(keydir, "v-").empty());
  EXPECT_TRUE(Versions(keydir, "tmp-").empty());
}

TEST(StageCache, ConcurrentStagersShareOneCopy) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  std::vector<pid_t> kids;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      StagedDataset d;
      FaultSide side;
      Status s = StageDataset(o, src, {}, "30" + std::to_string(i), &d, &side);
      ::_exit(!s.ok() ? 1 : d.hit ? 10 : 11);
    }
    kids.push_back(pid);
  }
  int hits = 0, misses = 0;
  for (pid_t p : kids) {
    int st = 0;
    ::waitpid(p, &st, 0);
    ASSERT_TRUE(WIFEXITED(st));
    hits += WEXITSTATUS(st) == 10;
    misses += WEXITSTATUS(st) == 11;
  }
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(hits, 2);
  std::string keydir = o.dir + "/" + StageCacheKey(src);
  EXPECT_EQ(Versions(keydir, "v-").size(), 1u);
  EXPECT_EQ(ListCache(o)->at(0).jobs.size(), 3u);
}

TEST(StageCache, TrimEvictsLeastRecentlyUsedNeverInUse) {
  TempDir t;
  auto o = CacheOpts(t.path() + "/cache");
  std::vector<std::string> srcs;
  for (int i = 0; i < 3; ++i) {
    std::string s = t.path() + "/ds" + std::to_string(i);
    MakeDirs(s);
    Write(s + "/f", Blob(100000, static_cast<char>(i)));
    srcs.push_back(s);
    StagedDataset d;
    FaultSide side;
    ASSERT_TRUE(StageDataset(o, s, {}, "40" + std::to_string(i), &d, &side).ok());
    // Order the LRU clock explicitly (no sleeps).
    struct timespec ts[2] = {{1000 + i, 0}, {1000 + i, 0}};
    ::utimensat(AT_FDCWD, (o.dir + "/" + d.key + "/last_used").c_str(), ts, 0);
  }
  ASSERT_TRUE(ReleaseJob(o, "401").ok());
  ASSERT_TRUE(ReleaseJob(o, "402").ok());
  // ds0 is the oldest but job 400 uses it; ds1 is next: it goes.
  std::vector<std::string> removed;
  ASSERT_TRUE(TrimCache(o, 250000, &removed).ok());
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_NE(removed[0].find(srcs[1]), std::string::npos);
  ASSERT_TRUE(TrimCache(o, 1, &removed).ok());
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_NE(removed[1].find(srcs[2]), std::string::npos);
  auto list = ListCache(o);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].source, srcs[0]);
}

TEST(StageCache, ReadsAsTheJobUser) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << kNoNobody;
  TempDir t;
  ::chmod(t.path().c_str(), 0755);
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  StagedDataset d;
  FaultSide side;
  Status s = StageDataset(o, src, who, "501", &d, &side);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Read(d.data_path + "/a/f4"), Blob(8192, 4));
  // Root-only file: the root stager must not read it for nobody, even
  // though root could, and even though a copy is already cached.
  Write(src + "/a/secret", "root only", 0600);
  s = StageDataset(o, src, who, "502", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find(src + "/a/secret: Permission denied"), std::string::npos) << s.message();
  ASSERT_TRUE(StageDataset(o, src, {}, "503", &d, &side).ok());  // root's own job may
  s = StageDataset(o, src, who, "504", &d, &side);               // cached now; still refused
  EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s.message();
}

TEST(StageCache, DirsOnlyVerifyCatchesAddedFilesButNotInPlaceRewrites) {
  TempDir t;
  ::chmod(t.path().c_str(), 0755);
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  o.verify_dirs_only = true;
  StagedDataset d;
  FaultSide side;
  ASSERT_TRUE(StageDataset(o, src, {}, "601", &d, &side).ok());
  ASSERT_TRUE(StageDataset(o, src, {}, "602", &d, &side).ok());
  EXPECT_TRUE(d.hit);
  // Rewritten in place, same name: the documented blind spot of "dirs".
  Write(src + "/a/f3", "changed");
  ASSERT_TRUE(StageDataset(o, src, {}, "603", &d, &side).ok());
  EXPECT_TRUE(d.hit);
  // A new file changes its directory's mtime: caught.
  struct timespec ts[2] = {{0, UTIME_OMIT}, {1600000000, 0}};
  ::utimensat(AT_FDCWD, (src + "/a/b").c_str(), ts, 0);  // whatever the clock's granularity
  Write(src + "/a/b/new", "new");
  ASSERT_TRUE(StageDataset(o, src, {}, "604", &d, &side).ok());
  EXPECT_FALSE(d.hit);
  EXPECT_EQ(Read(d.data_path + "/a/b/new"), "new");
  EXPECT_EQ(Read(d.data_path + "/a/f3"), "changed");
  StageIdentity who;
  if (!NobodyReader(&who)) return;
  // Another reader gets the full check, so a file it can't read is refused.
  Write(src + "/a/f3", "root only", 0600);
  Status s = StageDataset(o, src, who, "605", &d, &side);
  EXPECT_NE(s.message().find(src + "/a/f3: Permission denied"), std::string::npos) << s.message();
}

// A cache an older release filled has key=value `info` files; a new one
// writes info.json. Both read the same.
TEST(StageCache, ReadsItsInfoInBothFormats) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  auto o = CacheOpts(t.path() + "/cache");
  StagedDataset d;
  FaultSide side;
  ASSERT_TRUE(StageDataset(o, src, {}, "101", &d, &side).ok());
  std::string vdir = d.data_path.substr(0, d.data_path.size() - 5);
  struct stat st;
  EXPECT_EQ(::stat((vdir + "/info.json").c_str(), &st), 0);
  EXPECT_NE(::stat((vdir + "/info").c_str(), &st), 0);
  auto info = ReadCacheInfo(vdir);
  EXPECT_EQ(info["source"], src);
  EXPECT_EQ(info["type"], "d");
  EXPECT_EQ(info["bytes"], std::to_string(d.bytes));
  EXPECT_EQ(info["check"], "1");
  // The same version as an older release left it.
  std::string legacy;
  for (const auto& kv : info) legacy += kv.first + "=" + kv.second + "\n";
  ::unlink((vdir + "/info.json").c_str());
  Write(vdir + "/info", legacy);
  EXPECT_EQ(ReadCacheInfo(vdir), info);
  StagedDataset again;
  ASSERT_TRUE(StageDataset(o, src, {}, "102", &again, &side).ok());
  EXPECT_TRUE(again.hit);  // the old version is reused, not copied again
  EXPECT_EQ(again.bytes, d.bytes);
  EXPECT_EQ((*ListCache(o))[0].source, src);
}

// The task and the epilog read the prolog's JSON record; every release
// that wrote the older .stage.kv wrote this record too, with these fields.
TEST(StageJob, ReadsTheStageRecord) {
  TempDir t;
  Config cfg;
  cfg.state_dir = t.path() + "/state";
  EXPECT_EQ(ReadStageRecord(cfg, "7", "n1").status().code(), Status::Code::kNotFound);
  MakeDirs(state::JobDir(cfg, "7"));
  Write(state::JobNodeFile(cfg, "7", "n1", state::kStageJson),
        R"({"node": "n1", "job_id": "7", "ok": true, "seconds": 1.5, "bytes": 300, "files": 4, "datasets": [)"
        R"({"name": "a", "source": "/d/a", "key": "k", "cache": "hit", "bytes": 100, "files": 1, "seconds": 0},)"
        R"({"name": "b", "source": "/d/b", "key": "k2", "cache": "miss", "bytes": 200, "files": 3, "seconds": 1.5}]})");
  auto r = ReadStageRecord(cfg, "7", "n1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ok);
  EXPECT_EQ(r->bytes, 300u);
  EXPECT_EQ(r->files, 4u);
  EXPECT_EQ(r->seconds, 1.5);
  EXPECT_EQ(r->hits, 1u);
  EXPECT_EQ(r->misses, 1u);
  EXPECT_EQ(r->datasets, (std::vector<std::string>{"a", "b"}));
  MakeDirs(state::JobDir(cfg, "8"));
  Write(state::JobNodeFile(cfg, "8", "n1", state::kStageJson), "ok=1\n");  // not JSON: no success
  EXPECT_EQ(ReadStageRecord(cfg, "8", "n1").status().code(), Status::Code::kInvalidArgument);
}

TEST(StageJob, PrometheusNamesEveryFigure) {
  std::string p = StagePrometheus("n1", {{"stage.bytes", "42"}, {"stage.cache_hits", "1"}});
  EXPECT_NE(p.find("preflight_stage_last_bytes{node=\"n1\"} 42\n"), std::string::npos);
  EXPECT_NE(p.find("preflight_stage_last_cache_hits{node=\"n1\"} 1\n"), std::string::npos);
  EXPECT_NE(p.find("preflight_stage_cache_bytes{node=\"n1\"} 0\n"), std::string::npos);
}

// ---- hostile input (issue 19): every bound refuses as the user's error ---------

TEST(Hostile, OversizedStageValueIsRefusedAtSubmission) {
  std::string spec;
  for (int i = 0; spec.size() <= kMaxStageSpecBytes; ++i) spec += (spec.empty() ? "" : ",") + std::string("/d/x:n") + std::to_string(i);
  auto v = ParseStageSpec(spec);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("the limit is 16384"), std::string::npos) << v.status().message();
  // Many entries in a list file: the expanded value is bounded too.
  TempDir t;
  MakeDirs(t.path() + "/ds1");
  std::string list;
  for (size_t i = 0; i < kMaxStageSources + 1; ++i) list += t.path() + "/ds1:n" + std::to_string(i) + "\n";
  Write(t.path() + "/l.many", list);
  auto l = ParseStageSpec("@l.many");
  ASSERT_TRUE(l.ok());
  Status s = ResolveStageSources(*l, t.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the limit is 256 per job"), std::string::npos) << s.message();
  // 200 entries with long names fit the count but not the encoded bound.
  list.clear();
  std::string longdir = t.path() + "/" + std::string(120, 'd');
  MakeDirs(longdir);
  for (int i = 0; i < 200; ++i) list += longdir + ":n" + std::to_string(i) + "\n";
  Write(t.path() + "/l.long", list);
  auto ll = ParseStageSpec("@l.long");
  s = ResolveStageSources(*ll, t.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expanded dataset list is"), std::string::npos) << s.message();
}

TEST(Hostile, ListFileMustBeABoundedRegularFile) {
  TempDir t;
  ASSERT_EQ(::mkfifo((t.path() + "/fifo").c_str(), 0644), 0);
  auto f = ParseStageSpec("@fifo");
  Status s = ResolveStageSources(*f, t.path());  // must not block
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
  Write(t.path() + "/huge", std::string(kMaxStageListFileBytes + 1, '#'));
  auto h = ParseStageSpec("@huge");
  s = ResolveStageSources(*h, t.path());
  EXPECT_NE(s.message().find("the limit is 1048576"), std::string::npos) << s.message();
}

TEST(Hostile, PseudoFilesystemSourcesAreRefused) {
  for (const char* src : {"/proc/self/status", "/proc/sys/kernel", "/sys/kernel"}) {
    auto v = ParseStageSpec(std::string(src) + ":x");
    ASSERT_TRUE(v.ok());
    Status s = ResolveStageSources(*v, "/");
    EXPECT_NE(s.message().find("pseudo filesystem"), std::string::npos) << src << ": " << s.message();
  }
  // The walker refuses them as well (a source the submit check never saw).
  TempDir t;
  FaultSide side;
  Status s = CopyExpectingFailure("/proc/sys/kernel", t.path() + "/dst", nullptr, &side);
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("proc pseudo filesystem"), std::string::npos) << s.message();
}

TEST(Hostile, TreeDeeperThanPathMaxIsTheUsersError) {
  TempDir t;
  // 25 nested 250-byte names: 6275 bytes below the root, more than PATH_MAX.
  std::string src = t.path() + "/deep";
  ASSERT_TRUE(MakeDirs(src).ok());
  int fd = ::open(src.c_str(), O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < 25; ++i) {
    std::string name(250, static_cast<char>('a' + i % 26));
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0);
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = next;
  }
  ::close(::openat(fd, "leaf", O_WRONLY | O_CREAT, 0644));
  ::close(fd);
  FaultSide side;
  Status s = CopyExpectingFailure(src, t.path() + "/dst", nullptr, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource) << s.message();
  EXPECT_NE(s.message().find("the limit is 4000 (PATH_MAX); refused"), std::string::npos) << s.message();
  RemoveTree(src);  // RemoveTreeAt walks by descriptor
}

TEST(Hostile, DatasetLargerThanTheFreeSpaceIsRefusedBeforeItIsWritten) {
  TempDir t;
  std::string src = t.path() + "/sparse";
  MakeDirs(src);
  int fd = ::open((src + "/huge").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(1) << 40), 0);  // 1 TiB, no blocks
  ::close(fd);
  MakeDirs(t.path() + "/dst");
  int dfd = ::open((t.path() + "/dst").c_str(), O_RDONLY | O_DIRECTORY);
  CopyOptions o = Opts();
  o.space_limit = 1 << 30;
  CopyStats st;
  std::vector<std::string> m;
  FaultSide side;
  Status s = CopyTree(src, dfd, "data", o, &st, &m, &side);
  ::close(dfd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace);
  EXPECT_NE(s.message().find("needs at least 1.0T"), std::string::npos) << s.message();
  struct stat hs;
  EXPECT_NE(::stat((t.path() + "/dst/data/huge").c_str(), &hs), 0) << "the file was written";
  // Through the cache: the free space of the cache's disk is the bound.
  StageCacheOptions co;
  co.dir = t.path() + "/cache";
  StagedDataset d;
  s = StageDataset(co, src, {}, "700", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kDestSpace) << s.message();
}

TEST(Hostile, PrivateDirsRefuseWhatAUserCouldHavePlaced) {
  TempDir t;
  std::string root = t.path() + "/scratch";
  ASSERT_TRUE(MakeDirs(root).ok());
  ASSERT_EQ(::chmod(root.c_str(), 01777), 0);  // NVMe scratch: anyone may create here
  // The chain is created private under a sticky world-writable parent.
  EXPECT_TRUE(MakePrivateDirs(root + "/pf/cache", 0700).ok());
  // stage_dir itself world-writable: refused.
  Status s = MakePrivateDirs(root, 0711);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("mode 1777 lets others write in it"), std::string::npos) << s.message();
  // A symlink a user planted where root expects a folder: refused, not followed.
  ASSERT_EQ(::symlink((t.path() + "/elsewhere").c_str(), (root + "/pf/jobs").c_str()), 0);
  MakeDirs(t.path() + "/elsewhere");
  s = MakePrivateDirs(root + "/pf/jobs", 0711);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("a symlink or not a directory"), std::string::npos) << s.message();
  // A folder others can write (without the sticky bit) in the chain.
  MakeDirs(root + "/open/inner");
  ::chmod((root + "/open").c_str(), 0777);
  s = MakePrivateDirs(root + "/open/inner", 0700);
  EXPECT_EQ(s.code(), Status::Code::kPermission);
  EXPECT_NE(s.message().find("lets anyone rename"), std::string::npos) << s.message();
  // Owned by another user: refused (root only; a non-root run skips this part).
  struct passwd* pw = ::getpwnam("nobody");
  if (::geteuid() == 0 && pw) {
    MakeDirs(root + "/theirs");
    ASSERT_EQ(::chown((root + "/theirs").c_str(), pw->pw_uid, pw->pw_gid), 0);
    s = MakePrivateDirs(root + "/theirs", 0700);
    EXPECT_NE(s.message().find("owned by uid " + std::to_string(pw->pw_uid)), std::string::npos) << s.message();
  }
}

TEST(Hostile, JobStateIsPrunedByAgeAndSizeNeverTheRunningJob) {
  TempDir t;
  Config cfg;
  cfg.state_dir = t.path() + "/state";
  cfg.state_keep_ms = 3600 * 1000;  // 1 h
  cfg.state_keep_bytes = 0;
  double now = static_cast<double>(::time(nullptr));
  auto job = [&](const std::string& id, double age, bool finished, size_t bytes = 100) {
    std::string d = cfg.state_dir + "/jobs/" + id;
    MakeDirs(d);
    Write(d + "/n1.prolog.json", std::string(bytes, 'x'));
    if (finished) Write(d + "/n1.epilog.json", "{}");
    struct timespec ts[2] = {{static_cast<time_t>(now - age), 0}, {static_cast<time_t>(now - age), 0}};
    for (const char* f : {"/n1.prolog.json", "/n1.epilog.json", ""}) ::utimensat(AT_FDCWD, (d + f).c_str(), ts, AT_SYMLINK_NOFOLLOW);
  };
  job("10", 7200, true);        // finished, old: goes
  job("11", 60, true);          // finished, recent: stays
  job("12", 7200, false);       // unfinished, 2 h: stays (a running job's later steps read it)
  job("13", 5 * 3600, false);   // unfinished, past 4 x state_keep: goes
  job("14", 9 * 3600, true);    // the running job: never touched
  auto exists = [&](const std::string& id) { return ::access((cfg.state_dir + "/jobs/" + id).c_str(), F_OK) == 0; };
  // slurmctld knows none of them (job_liveness.h; stage_live_test.cc has
  // the jobs it lists as running).
  auto gone = [&](double when) {
    SlurmJobs s;
    s.answered = true;
    for (const auto& j : state::JobsToPrune(cfg, "14", when)) AddAnswer(&s, j, JobWhere::kGone);
    return s;
  };
  state::StateGcResult dry = state::PruneJobState(cfg, "14", now, gone(now), true);
  EXPECT_EQ(dry.removed.size(), 2u);
  EXPECT_TRUE(exists("10"));  // a dry run removes nothing
  state::StateGcResult r = state::PruneJobState(cfg, "14", now, gone(now));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_FALSE(exists("10"));
  EXPECT_TRUE(exists("11"));
  EXPECT_TRUE(exists("12"));
  EXPECT_FALSE(exists("13"));
  EXPECT_TRUE(exists("14"));
  // Over the size bound: the oldest finished folders go first.
  cfg.state_keep_ms = 0;
  cfg.state_keep_bytes = 40000;
  for (int i = 0; i < 6; ++i) job("2" + std::to_string(i), 600 - i * 60, true, 8000);
  r = state::PruneJobState(cfg, "14", now, gone(now));
  EXPECT_LE(r.kept_bytes, 40000u) << "kept " << r.kept_bytes;
  EXPECT_FALSE(exists("20"));
  EXPECT_TRUE(exists("25"));
  EXPECT_TRUE(exists("12"));  // unfinished: never pruned for size
  EXPECT_TRUE(exists("14"));
  // A symlink planted in jobs/ is neither followed nor counted.
  MakeDirs(t.path() + "/victim");
  Write(t.path() + "/victim/keep", "x");
  ASSERT_EQ(::symlink((t.path() + "/victim").c_str(), (cfg.state_dir + "/jobs/99").c_str()), 0);
  state::PruneJobState(cfg, "14", now + 1e6, gone(now + 1e6));
  EXPECT_EQ(::access((t.path() + "/victim/keep").c_str(), F_OK), 0);
}

TEST(Hostile, HoldsOfJobsWithNoSlurmstepdAreReleased) {
  TempDir t;
  Config cfg;
  cfg.stage.dir = t.path() + "/stage";
  cfg.stage.timeout_ms = 1000;
  std::string src = t.path() + "/src";
  MakeDataset(src);
  StageCacheOptions co = CacheOptionsFor(cfg);
  StagedDataset d;
  FaultSide side;
  ASSERT_TRUE(StageDataset(co, src, {}, "801", &d, &side).ok());
  ASSERT_TRUE(StageDataset(co, src, {}, "802", &d, &side).ok());
  MakeDirs(cfg.stage.dir + "/jobs/801/ds");
  // A fake /proc: job 802 still has a slurmstepd, 801 has none.
  std::string proc = t.path() + "/proc";
  MakeDirs(proc + "/4242");
  Write(proc + "/4242/cmdline", std::string("slurmstepd: [802.batch]\0", 24));
  MakeDirs(proc + "/4243");
  Write(proc + "/4243/cmdline", std::string("/usr/bin/sleep\0" "1000\0", 20));
  std::set<std::string> live = LiveSlurmJobs(proc);
  EXPECT_EQ(live, std::set<std::string>({"802"}));
  double now = static_cast<double>(::time(nullptr));
  // Within the grace (a prolog may still be staging): not even stale.
  EXPECT_TRUE(StaleStageJobs(cfg, live, now).empty());
  EXPECT_EQ(StaleStageJobs(cfg, live, now + 1 + 601), std::set<std::string>({"801"}));
  // slurmctld does not know 801 (stage_live_test.cc: the jobs it does).
  SlurmJobs slurm;
  slurm.answered = true;
  AddAnswer(&slurm, "801", JobWhere::kGone);
  auto lines = ReleaseStaleJobs(cfg, live, slurm, now + 1 + 601);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("job 801: no slurmstepd on this host and slurmctld lists it as not running here; view and cache hold released"),
            std::string::npos) << lines[0];
  EXPECT_NE(::access((cfg.stage.dir + "/jobs/801").c_str(), F_OK), 0);
  auto list = ListCache(co);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].jobs, std::vector<std::string>({"802"}));
}

}  // namespace
}  // namespace preflight
