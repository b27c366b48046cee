#include "preflight/fileutil.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <fstream>
#include <thread>

#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

TEST(WriteAll, WritesEverythingThroughShortWrites) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  // More than a pipe's buffer (64 KiB): the writer sees short writes while
  // the reader drains.
  std::string data(1 << 20, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  });
  EXPECT_TRUE(WriteAll(p[1], data));
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  EXPECT_EQ(got, data);
}

TEST(WriteAll, AGonePeerIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(sv[1]);
  // With no_sigpipe, send(MSG_NOSIGNAL): EPIPE comes back; SIGPIPE would
  // have ended this test process.
  errno = 0;
  EXPECT_FALSE(WriteAll(sv[0], "abc", 3, /*no_sigpipe=*/true));
  EXPECT_EQ(errno, EPIPE);
  ::close(sv[0]);
}

TEST(WriteAll, ABadDescriptorFailsWithItsErrno) {
  errno = 0;
  EXPECT_FALSE(WriteAll(-1, std::string("x")));
  EXPECT_EQ(errno, EBADF);
}

// The durable replace leaves the target and nothing else: its temporary
// is hidden while it exists and gone after a rename that succeeded or
// failed; threads replacing one file each land whole.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WriteFileAtomic, LeavesOnlyTheTargetWhetherTheRenameWorksOrNot) {
  preflight_test::TempDir t{"atomic"};
  ASSERT_TRUE(WriteFileAtomic(t.path() + "/a.json", "{}\n").ok());
  EXPECT_EQ(Entries(t.path()), std::vector<std::string>{"a.json"});
  EXPECT_EQ(*ReadWholeFile(t.path() + "/a.json"), "{}\n");
  // A folder where the file should go: the rename fails, nothing is left.
  MakeDirs(t.path() + "/b.json/x");
  Status s = WriteFileAtomic(t.path() + "/b.json", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rename"), std::string::npos) << s.message();
  EXPECT_EQ(Entries(t.path()), (std::vector<std::string>{"a.json", "b.json"}));
}

TEST(WriteFileAtomic, ThreadsReplacingOneFileEachLandWhole) {
  preflight_test::TempDir t{"atomic"};
  std::string path = t.path() + "/same";
  std::vector<std::thread> ts;
  std::vector<int> failed(8, 0);
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k)
        if (!WriteFileAtomic(path, std::string(4096, static_cast<char>('a' + i))).ok()) failed[i]++;
    });
  for (auto& th : ts) th.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(failed[i], 0) << "thread " << i;
  std::string got = *ReadWholeFile(path);
  ASSERT_EQ(got.size(), 4096u);
  EXPECT_EQ(got.find_first_not_of(got[0]), std::string::npos);
  EXPECT_EQ(Entries(t.path()), std::vector<std::string>{"same"});
}

// Issue 29 (6): a user who pre-created stage_dir (or a folder of its
// chain) in a sticky world-writable folder drained every node a stage job
// landed on, as a config fault. With set_aside, root moves the user's
// entry aside untouched and uses a fresh private folder.
struct StickyScratch {
  preflight_test::TempDir t{"setaside"};
  std::string scratch = t.path() + "/scratch";
  struct passwd* pw = ::getpwnam("nobody");
  bool usable() const { return ::geteuid() == 0 && pw; }
  StickyScratch() {
    MakeDirs(scratch);
    ::chmod(scratch.c_str(), 01777);
  }
  // The one entry in `scratch` whose name starts with `prefix`.set-aside.
  std::vector<std::string> Aside(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(scratch))
      if (e.path().filename().string().rfind(prefix + ".set-aside.", 0) == 0) out.push_back(e.path().string());
    return out;
  }
};

TEST(MakePrivateDirs, AUsersFolderInAStickyFolderIsSetAsideUntouched) {
  StickyScratch s;
  if (!s.usable()) GTEST_SKIP() << "needs root and a user 'nobody'";
  std::string dir = s.scratch + "/pf";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((dir + "/cache").c_str(), 0777), 0);
  std::ofstream(dir + "/cache/mine") << "the user's bytes";
  for (const char* p : {"", "/cache", "/cache/mine"}) ASSERT_EQ(::chown((dir + p).c_str(), s.pw->pw_uid, s.pw->pw_gid), 0);
  struct stat before;
  ASSERT_EQ(::lstat(dir.c_str(), &before), 0);
  // Without set_aside: refused as before (the caller decides whose fault).
  Status r = MakePrivateDirs(dir + "/cache", 0700);
  EXPECT_EQ(r.code(), Status::Code::kPermission);
  std::vector<SetAside> aside;
  Status ok = MakePrivateDirs(dir + "/cache", 0700, &aside);
  ASSERT_TRUE(ok.ok()) << ok.message();
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(aside[0].path, dir);
  EXPECT_EQ(aside[0].owner, s.pw->pw_uid);
  EXPECT_EQ(s.Aside("pf"), std::vector<std::string>({aside[0].moved_to}));
  EXPECT_NE(aside[0].moved_to.find(".uid" + std::to_string(s.pw->pw_uid)), std::string::npos) << aside[0].moved_to;
  // The user's folder, as it was: owner, mode, contents.
  struct stat st;
  ASSERT_EQ(::lstat(aside[0].moved_to.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, s.pw->pw_uid);
  EXPECT_EQ(st.st_ino, before.st_ino);
  EXPECT_EQ(st.st_mode, before.st_mode);
  auto mine = ReadWholeFile(aside[0].moved_to + "/cache/mine");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(*mine, "the user's bytes");
  // The new chain is root's and private; a second call sets nothing aside.
  for (const char* p : {"", "/cache"}) {
    ASSERT_EQ(::lstat((dir + p).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 022, 0u);
  }
  aside.clear();
  EXPECT_TRUE(MakePrivateDirs(dir + "/cache", 0700, &aside).ok());
  EXPECT_TRUE(aside.empty());
}

TEST(MakePrivateDirs, AUsersSymlinkIsSetAsideNotFollowed) {
  StickyScratch s;
  if (!s.usable()) GTEST_SKIP() << "needs root and a user 'nobody'";
  std::string target = s.t.path() + "/victim";
  ASSERT_TRUE(MakeDirs(target).ok());
  std::string dir = s.scratch + "/pf";
  ASSERT_EQ(::symlink(target.c_str(), dir.c_str()), 0);
  ASSERT_EQ(::lchown(dir.c_str(), s.pw->pw_uid, s.pw->pw_gid), 0);
  std::vector<SetAside> aside;
  Status ok = MakePrivateDirs(dir + "/jobs", 0711, &aside);
  ASSERT_TRUE(ok.ok()) << ok.message();
  ASSERT_EQ(aside.size(), 1u);
  struct stat st;
  ASSERT_EQ(::lstat(aside[0].moved_to.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(::access((target + "/jobs").c_str(), F_OK), -1) << "followed the user's link";
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
}

TEST(MakePrivateDirs, WhatRootPlacedIsNeverSetAside) {
  StickyScratch s;
  if (!s.usable()) GTEST_SKIP() << "needs root and a user 'nobody'";
  // stage_dir 1777, root's (the admin's doing, hostile_stage case 7): a
  // config fault as before, not moved.
  std::string dir = s.scratch + "/pf";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  std::vector<SetAside> aside;
  Status r = MakePrivateDirs(dir, 0711, &aside);
  EXPECT_EQ(r.code(), Status::Code::kPermission);
  EXPECT_NE(r.message().find("mode 1777 lets others write in it"), std::string::npos) << r.message();
  EXPECT_TRUE(aside.empty());
  EXPECT_TRUE(s.Aside("pf").empty());
  // A user's folder where only root can write (chowned by an admin): refused, not moved.
  std::string priv = s.t.path() + "/private";
  ASSERT_EQ(::mkdir(priv.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((priv + "/pf").c_str(), 0700), 0);
  ASSERT_EQ(::chown((priv + "/pf").c_str(), s.pw->pw_uid, s.pw->pw_gid), 0);
  r = MakePrivateDirs(priv + "/pf", 0711, &aside);
  EXPECT_EQ(r.code(), Status::Code::kPermission);
  EXPECT_NE(r.message().find("owned by uid " + std::to_string(s.pw->pw_uid) + ", not root"), std::string::npos) << r.message();
  EXPECT_TRUE(aside.empty());
}

}  // namespace
}  // namespace preflight
