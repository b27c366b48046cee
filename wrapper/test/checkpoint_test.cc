#include "preflight/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace preflight {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"ckpt"};
  std::string dir_ = tmp_.path();
  // A checkpoint directory whose marker (or, incomplete, the directory) has mtime t.
  void Make(const std::string& name, bool complete, time_t t) {
    std::string d = dir_ + "/" + name;
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    std::ofstream(d + "/state") << name;
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    if (complete) {
      std::ofstream(d + "/COMPLETE");
      ASSERT_EQ(utimensat(AT_FDCWD, (d + "/COMPLETE").c_str(), ts, 0), 0);
    }
    ASSERT_EQ(utimensat(AT_FDCWD, d.c_str(), ts, 0), 0);
  }
  bool Exists(const std::string& name) { return access((dir_ + "/" + name).c_str(), F_OK) == 0; }
};

TEST_F(CheckpointTest, MissingDirIsEmpty) {
  auto l = ListCheckpoints(dir_ + "/nope", "COMPLETE");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->empty());
  auto n = NewestCompleteCheckpoint(dir_ + "/nope", "COMPLETE");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, "");
}

TEST_F(CheckpointTest, NewestCompleteIgnoresIncompleteFilesAndDotEntries) {
  Make("step_9", true, 1000);
  Make("step_10", true, 2000);
  Make("step_11", false, 3000);  // being written
  Make(".tmp", true, 4000);
  std::ofstream(dir_ + "/notes.txt") << "x";
  auto n = NewestCompleteCheckpoint(dir_, "COMPLETE");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, dir_ + "/step_10");
}

TEST_F(CheckpointTest, TiesBreakByNumericName) {
  Make("step_9", true, 1000);
  Make("step_10", true, 1000);
  EXPECT_EQ(*NewestCompleteCheckpoint(dir_, "COMPLETE"), dir_ + "/step_10");
}

TEST_F(CheckpointTest, PruneKeepsNewestKAndInProgress) {
  Make("a", true, 1000);
  Make("b", false, 1500);  // abandoned: older than the newest complete
  Make("c", true, 2000);
  Make("d", true, 3000);
  Make("e", false, 4000);  // in progress
  auto d = PruneCheckpoints(dir_, "COMPLETE", 2);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->size(), 2u);
  EXPECT_FALSE(Exists("a"));
  EXPECT_FALSE(Exists("b"));
  EXPECT_TRUE(Exists("c"));
  EXPECT_TRUE(Exists("d"));
  EXPECT_TRUE(Exists("e"));
}

TEST_F(CheckpointTest, PruneDeletesNothingBeforeANewerOneIsComplete) {
  Make("a", true, 1000);
  Make("b", false, 2000);  // newer than the only complete one: may be in progress
  auto d = PruneCheckpoints(dir_, "COMPLETE", 1);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
  EXPECT_TRUE(Exists("a"));
  EXPECT_TRUE(Exists("b"));
}

TEST_F(CheckpointTest, KeepZeroPrunesNothing) {
  Make("a", true, 1000);
  Make("b", true, 2000);
  auto d = PruneCheckpoints(dir_, "COMPLETE", 0);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
  EXPECT_TRUE(Exists("a"));
}

TEST_F(CheckpointTest, OnlyARegularFileMarksComplete) {
  // Issue #19: a COMPLETE directory counted as finished, and the older real
  // checkpoint was pruned in its favour. Neither a directory nor a symlink
  // (to a real marker elsewhere) counts.
  Make("real", true, 1000);
  Make("dirmark", false, 2000);
  ASSERT_EQ(mkdir((dir_ + "/dirmark/COMPLETE").c_str(), 0755), 0);
  Make("linkmark", false, 3000);
  ASSERT_EQ(symlink((dir_ + "/real/COMPLETE").c_str(), (dir_ + "/linkmark/COMPLETE").c_str()), 0);
  auto l = ListCheckpoints(dir_, "COMPLETE");
  ASSERT_TRUE(l.ok());
  for (const auto& c : *l) EXPECT_EQ(c.complete, c.name == "real") << c.name;
  EXPECT_EQ(*NewestCompleteCheckpoint(dir_, "COMPLETE"), dir_ + "/real");
  auto d = PruneCheckpoints(dir_, "COMPLETE", 1);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
  EXPECT_TRUE(Exists("real"));
}

TEST_F(CheckpointTest, UnwritableDirIsSaid) {
  EXPECT_TRUE(CheckpointDirWritable(dir_).ok());
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // nobody may reach it; only 'ro' itself is closed
  std::string ro = dir_ + "/ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
  // As a job's user would see it: root passes any mode, so drop to nobody.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    Status s = CheckpointDirWritable(ro);
    _exit(s.ok() ? 0 : s.message().find("checkpoint dir " + ro + " is not writable") != std::string::npos ? 1 : 2);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << "1: refused with the folder named";
  EXPECT_FALSE(CheckpointDirWritable(dir_ + "/missing").ok());
  auto l = ListCheckpoints(dir_, "COMPLETE");  // the probe left nothing behind
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 1u);
}

TEST_F(CheckpointTest, UnreadableDirNamesThePath) {
  std::string f = dir_ + "/file";
  std::ofstream(f) << "x";
  auto l = ListCheckpoints(f, "COMPLETE");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find(f), std::string::npos);
}

}  // namespace
}  // namespace preflight
