// The warm check (stage_manifest.h): real trees, real CopyTree, real
// fork/drop to `nobody`. Every change a user can make to a source must be
// seen, and readability must be what the kernel says for that user.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>

#include "preflight/fileutil.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_manifest.h"
#include "preflight/stage_warm.h"

namespace preflight {
namespace {

// The manifest's first line has one writer and one reader: what
// ManifestRootLine writes parses back, a path with spaces whole; anything
// else (an entry line, a bad type, no space) is not a root line.
TEST(ManifestRootLine, WritesWhatItReadsAndRefusesTheRest) {
  char type = 0;
  std::string path;
  ASSERT_TRUE(ParseManifestRootLine(ManifestRootLine('d', "/data/my set"), &type, &path));
  EXPECT_EQ(type, 'd');
  EXPECT_EQ(path, "/data/my set");
  ASSERT_TRUE(ParseManifestRootLine(ManifestRootLine('f', "/w/x.bin"), &type, &path));
  EXPECT_EQ(type, 'f');
  for (const char* bad : {"d 755 root", "root x /a", "root d", "rootd /a", "f 644 1 2.3 root d /a", ""})
    EXPECT_FALSE(ParseManifestRootLine(bad, &type, &path)) << bad;
  EXPECT_EQ(ManifestRootType({ManifestRootLine('f', "/a"), "d 755 b"}), 'f');
  EXPECT_EQ(ManifestRootPath({ManifestRootLine('d', "/a b")}), "/a b");
  EXPECT_EQ(ManifestRootType({}), 0);
  EXPECT_EQ(ManifestRootPath({"d 755 b"}), "");
}

// The shared scratch directory (preflight_test/temp_dir.h), readable by nobody.
struct TempDir : preflight_test::TempDir {
  TempDir() : preflight_test::TempDir("stage_manifest", 0755) {}
};

using preflight_test::kNoNobody;
using preflight_test::NobodyReader;
using preflight_test::Write;

void MakeTree(const std::string& root) {
  MakeDirs(root + "/a/b");
  MakeDirs(root + "/c");
  for (int i = 0; i < 20; ++i) Write(root + "/a/f" + std::to_string(i), std::string(100 + i, 'x'));
  Write(root + "/a/b/deep", "deep");
  Write(root + "/c/one", "one");
  ASSERT_EQ(::symlink("a/f1", (root + "/link").c_str()), 0);
}

// Copy `src` (as the caller) and return its check manifest.
std::shared_ptr<CheckManifest> Build(const std::string& src, const std::string& scratch) {
  RemoveTree(scratch);
  MakeDirs(scratch);
  int fd = ::open(scratch.c_str(), O_RDONLY | O_DIRECTORY);
  CopyOptions o;
  o.workers = 2;
  CopyStats st;
  std::vector<std::string> manifest;
  FaultSide side;
  CheckManifestBuilder b;
  Status s = CopyTree(src, fd, "data", o, &st, &manifest, &side, nullptr, &b);
  ::close(fd);
  EXPECT_TRUE(s.ok()) << s.message();
  // Through the file form, as the cache loads it (mapped).
  EXPECT_TRUE(WriteFileAtomic(scratch + "/check", b.Serialize(), 0600).ok());
  auto m = CheckManifest::Load(scratch + "/check");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : nullptr;
}

WarmCheckResult Check(const std::string& src, const CheckManifest& m, const StageIdentity& who = {},
                      Status* status = nullptr) {
  WarmCheckResult r;
  FaultSide side;
  Status s = CheckUnchanged(src, m, who, 2, 0, 0, &r, &side);
  if (status) *status = s;
  else EXPECT_TRUE(s.ok()) << s.message();
  return r;
}

// A directory of more than 64 entries is checked in chunks of 64 by every
// free thread: each chunk's change is still seen, whichever thread has it,
// and an unchanged one still counts every entry once.
TEST(WarmCheck, ALargeDirectoryIsSplitIntoChunksAndEveryChunkIsChecked) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeDirs(src + "/big");
  const int kFiles = 1000;
  for (int i = 0; i < kFiles; ++i) Write(src + "/big/f" + std::to_string(i), std::to_string(i));
  auto m = Build(src, t.path() + "/dst");
  ASSERT_TRUE(m);
  for (unsigned threads : {1u, 4u, 16u}) {
    WarmCheckResult r;
    FaultSide side;
    Status s = CheckUnchanged(src, *m, {}, threads, 0, 0, &r, &side);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(r.same) << threads << " threads: " << r.why;
    EXPECT_EQ(r.entries, kFiles + 1u) << threads << " threads";
  }
  // One change in the first, a middle and the last chunk, each alone.
  for (int victim : {3, 517, kFiles - 1}) {
    std::string f = src + "/big/f" + std::to_string(victim);
    Write(f, "changed " + std::to_string(victim));
    WarmCheckResult r;
    FaultSide side;
    Status s = CheckUnchanged(src, *m, {}, 8, 0, 0, &r, &side);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(r.same) << "f" << victim;
    EXPECT_NE(r.why.find("/big/f" + std::to_string(victim) + ": changed"), std::string::npos) << r.why;
    m = Build(src, t.path() + "/dst");  // that change is the new state
    ASSERT_TRUE(m);
  }
  // A remote-thread count does not apply on a local source: same verdict.
  WarmCheckResult r;
  FaultSide side;
  ASSERT_TRUE(CheckUnchanged(src, *m, {}, 2, 64, 0, &r, &side).ok());
  EXPECT_TRUE(r.same) << r.why;
}

TEST(WarmCheck, UnchangedTreeIsTheSameWithOneStatPerEntry) {
  TempDir t;
  std::string src = t.path() + "/src";
  MakeTree(src);
  auto m = Build(src, t.path() + "/dst");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->entries(), 26u);  // 3 dirs, 22 files, 1 link
  EXPECT_EQ(m->dirs(), 4u);      // root, a, a/b, c
  WarmCheckResult r = Check(src, *m);
  EXPECT_TRUE(r.same) << r.why;
  EXPECT_EQ(r.entries, 26u);
  EXPECT_EQ(r.by_mode + r.by_access, 22u);
  // The manifest survives its file form, and a damaged one is refused.
  std::string bytes = m->real();
  EXPECT_EQ(bytes, src);
  EXPECT_FALSE(CheckManifest::Parse("PFCHK01\nshort").ok());
  // A damaged file is refused by name, whole or cut short.
  auto whole = ReadWholeFile(t.path() + "/dst/check");
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(CheckManifest::Parse(*whole).ok());
  ASSERT_TRUE(WriteFileAtomic(t.path() + "/cut", whole->substr(0, whole->size() - 1), 0600).ok());
  auto cut = CheckManifest::Load(t.path() + "/cut");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find(t.path() + "/cut: check manifest: size mismatch"), std::string::npos)
      << cut.status().message();
  EXPECT_FALSE(CheckManifest::Load(t.path() + "/missing").ok());
}

// Each mutation on a fresh tree must make the check say "changed".
TEST(WarmCheck, EveryKindOfChangeIsSeen) {
  struct Case {
    const char* name;
    std::function<void(const std::string&)> change;
  };
  std::vector<Case> cases = {
      {"rewritten in place, same size, mtime put back",
       [](const std::string& s) {
         struct stat st;
         ::stat((s + "/a/f3").c_str(), &st);
         Write(s + "/a/f3", std::string(103, 'y'));
         struct timespec ts[2] = {st.st_atim, st.st_mtim};
         ::utimensat(AT_FDCWD, (s + "/a/f3").c_str(), ts, 0);
       }},
      {"file added", [](const std::string& s) { Write(s + "/a/b/new", "n"); }},
      {"file removed", [](const std::string& s) { ::unlink((s + "/c/one").c_str()); }},
      {"file renamed", [](const std::string& s) { ::rename((s + "/c/one").c_str(), (s + "/c/two").c_str()); }},
      {"mode changed", [](const std::string& s) { ::chmod((s + "/a/f0").c_str(), 0600); }},
      {"file swapped for a directory",
       [](const std::string& s) { ::unlink((s + "/a/f5").c_str()); MakeDirs(s + "/a/f5"); }},
      {"directory swapped for a symlink",
       [](const std::string& s) { RemoveTree(s + "/a/b"); ASSERT_EQ(::symlink("../c", (s + "/a/b").c_str()), 0); }},
      {"symlink retargeted",
       [](const std::string& s) { ::unlink((s + "/link").c_str()); ASSERT_EQ(::symlink("a/f2", (s + "/link").c_str()), 0); }},
      {"xattr set (ctime moves)",
       [](const std::string& s) { ::setxattr((s + "/a/f7").c_str(), "user.x", "1", 1, 0); }},
  };
  for (const auto& c : cases) {
    TempDir t;
    std::string src = t.path() + "/src";
    MakeTree(src);
    auto m = Build(src, t.path() + "/dst");
    ASSERT_TRUE(m);
    ASSERT_TRUE(Check(src, *m).same) << c.name;
    c.change(src);
    WarmCheckResult r = Check(src, *m);
    EXPECT_FALSE(r.same) << c.name;
    EXPECT_FALSE(r.why.empty()) << c.name;
  }
}

bool KernelSaysReadable(const std::string& path, const StageIdentity& who) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string err;
    if (!DropToStageUser(who, &err)) ::_exit(2);
    int fd = ::open(path.c_str(), O_RDONLY);
    ::_exit(fd >= 0 ? 0 : 1);
  }
  int st;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// A reader that cannot become the user (here: the caller is no longer
// root, so setgroups fails) is the node's fault, named, for both children
// that read as the user: the warm check and the copy's walker. Nothing is
// read as anyone else.
TEST(WarmCheck, AReaderThatCannotDropIsTheNodesFaultNamed) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << kNoNobody;
  TempDir t;
  std::string src = t.path() + "/src";
  MakeTree(src);
  auto m = Build(src, t.path() + "/dst");
  ASSERT_TRUE(m);
  MakeDirs(t.path() + "/out");
  ::chmod((t.path() + "/out").c_str(), 0777);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(who.gid) != 0 || ::setuid(who.uid) != 0) ::_exit(2);
    WarmCheckResult r;
    FaultSide side;
    Status s = CheckUnchanged(src, *m, who, 2, 0, 0, &r, &side);
    bool warm_ok = !s.ok() && side == FaultSide::kNode && !r.same &&
                   s.message().find("cannot read as user " + std::to_string(who.uid) + ": setgroups") == 0;
    int fd = ::open((t.path() + "/out").c_str(), O_RDONLY | O_DIRECTORY);
    CopyOptions o;
    o.who = who;
    CopyStats st;
    std::vector<std::string> manifest;
    s = CopyTree(src, fd, "data", o, &st, &manifest, &side);
    bool copy_ok = !s.ok() && s.message().find("cannot read as user") != std::string::npos;
    ::_exit(warm_ok ? (copy_ok ? 0 : 4) : 3);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 3) << "the warm check did not name the failed drop as the node's fault";
  EXPECT_NE(WEXITSTATUS(st), 4) << "the copy did not name the failed drop";
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// Owner, group and other bits for a reader who is the owner, in the group,
// or neither: the check's verdict equals the kernel's open() as that user.
TEST(WarmCheck, ReadabilityIsTheKernelsForEveryOwnerGroupAndMode) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << kNoNobody;
  TempDir t;
  int cases = 0, readable = 0;
  uint64_t by_mode = 0;
  for (uid_t owner : {uid_t{0}, who.uid})
    for (gid_t group : {gid_t{0}, who.gid})
      for (mode_t mode : {0400, 0040, 0004, 0440, 0044, 0404, 0000, 0444, 0640, 0604}) {
        std::string src = t.path() + "/s" + std::to_string(cases);
        MakeDirs(src);
        Write(src + "/f", "data", mode);
        ASSERT_EQ(::chown((src + "/f").c_str(), owner, group), 0);
        ::chmod((src + "/f").c_str(), mode);
        auto m = Build(src, t.path() + "/dst");
        ASSERT_TRUE(m);
        Status s;
        WarmCheckResult r = Check(src, *m, who, &s);
        bool kernel = KernelSaysReadable(src + "/f", who);
        bool ours = s.ok() && r.same;
        EXPECT_EQ(ours, kernel) << "owner " << owner << " group " << group << " mode " << std::oct << mode << ": "
                                << s.message();
        if (!kernel) {
          EXPECT_EQ(s.code(), Status::Code::kPermission) << s.message();
        }
        by_mode += r.by_mode;
        readable += kernel;
        ++cases;
      }
  EXPECT_GT(readable, 0);
  EXPECT_LT(readable, cases);
  EXPECT_GT(by_mode, 0u);  // /tmp on a generic_permission filesystem: decided by the mode bits
}

// A POSIX ACL that denies `nobody` a file whose mode bits say "other may
// read": the mode bits alone would serve it; the check must not.
TEST(WarmCheck, AclDenyingTheReaderIsHonoured) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << kNoNobody;
  TempDir t;
  std::string src = t.path() + "/src";
  MakeTree(src);
  // system.posix_acl_access, version 2: user::rw- user:nobody:--- group::r-- mask::r-- other::r--
  struct Entry { uint16_t tag, perm; uint32_t id; };
  struct { uint32_t version; Entry e[5]; } __attribute__((packed)) acl = {
      2, {{0x01, 6, UINT32_MAX}, {0x02, 0, who.uid}, {0x04, 4, UINT32_MAX}, {0x10, 4, UINT32_MAX}, {0x20, 4, UINT32_MAX}}};
  std::string f = src + "/a/f9";
  if (::setxattr(f.c_str(), "system.posix_acl_access", &acl, sizeof acl, 0) != 0)
    GTEST_SKIP() << "skipped: no POSIX ACLs here: " << std::strerror(errno);
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  ASSERT_TRUE(st.st_mode & S_IROTH);            // the mode bits say yes
  ASSERT_FALSE(KernelSaysReadable(f, who));     // the kernel says no
  auto m = Build(src, t.path() + "/dst");       // root copies it
  ASSERT_TRUE(m);
  Status s;
  WarmCheckResult r = Check(src, *m, who, &s);
  EXPECT_EQ(s.code(), Status::Code::kPermission) << s.message();
  EXPECT_NE(s.message().find(f + ": Permission denied"), std::string::npos) << s.message();
  // Without the ACL entry for nobody, the same file is served again (after
  // a fresh copy: removing the ACL moved its ctime).
  ASSERT_EQ(::removexattr(f.c_str(), "system.posix_acl_access"), 0);
  m = Build(src, t.path() + "/dst");
  r = Check(src, *m, who, &s);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(r.same) << r.why;
}

TEST(WarmCheck, UnreadableDirectoryIsAPermissionError) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << kNoNobody;
  TempDir t;
  std::string src = t.path() + "/src";
  MakeTree(src);
  ::chmod((src + "/a/b").c_str(), 0700);  // root's only
  auto m = Build(src, t.path() + "/dst");
  ASSERT_TRUE(m);
  Status s;
  Check(src, *m, who, &s);
  EXPECT_EQ(s.code(), Status::Code::kPermission) << s.message();
  EXPECT_NE(s.message().find(src + "/a/b"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace preflight
