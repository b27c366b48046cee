// Issue 29 (6): a user who pre-created stage_dir under a sticky
// world-writable parent (/tmp, a 1777 scratch) drained every node a stage
// job landed on, as a config fault. Now the prolog sets the user's folder
// aside, untouched, stages into a fresh private one and says so; a
// stage_dir the admin left writable stays a config fault.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "preflight/fileutil.h"
#include "preflight/stage_job.h"
#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

namespace preflight {
namespace {

using preflight_test::TempDir;
using preflight_test::Write;

struct Site {
  TempDir t;
  std::string scratch = t.path() + "/scratch";
  Config cfg;
  JobContext job;
  struct passwd* pw = ::getpwnam("nobody");
  Site() {
    MakeDirs(scratch);
    ::chmod(scratch.c_str(), 01777);
    cfg.stage.dir = scratch + "/stage";
    cfg.state_dir = t.path() + "/state";
    MakeDirs(t.path() + "/src");
    Write(t.path() + "/src/f", "data");
    job.job_id = "81";
    job.node = "n1";
    job.uid = 0;
    job.gid = 0;
    job.options.stage_given = true;
    job.options.stage = {{t.path() + "/src", "src"}};
  }
  ~Site() { UnstageForJob(cfg, job); }  // unmounts the view
};

TEST(StageSetAside, AUsersStageDirUnderAStickyParentIsSetAsideAndTheJobRuns) {
  Site s;
  if (::geteuid() != 0 || !s.pw) GTEST_SKIP() << "needs root and a user 'nobody'";
  ASSERT_EQ(::mkdir(s.cfg.stage.dir.c_str(), 0777), 0);
  Write(s.cfg.stage.dir + "/planted", "the user's");
  ASSERT_EQ(::chown(s.cfg.stage.dir.c_str(), s.pw->pw_uid, s.pw->pw_gid), 0);
  StageJobResult r = StageForJob(s.cfg, s.job);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_FALSE(r.drain);
  std::string moved;
  for (const auto& e : std::filesystem::directory_iterator(s.scratch))
    if (e.path().filename().string().rfind("stage.set-aside.", 0) == 0) moved = e.path().string();
  ASSERT_FALSE(moved.empty());
  EXPECT_NE(r.summary.find("preflight: stage on n1: warning: set aside " + s.cfg.stage.dir + " (owned by uid " +
                           std::to_string(s.pw->pw_uid) + " (nobody), not root, in a sticky world-writable folder) as " +
                           moved + ", untouched"),
            std::string::npos)
      << r.summary;
  EXPECT_EQ(*ReadWholeFile(moved + "/planted"), "the user's");
  struct stat st;
  ASSERT_EQ(::stat(moved.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, s.pw->pw_uid);
  ASSERT_EQ(::stat(s.cfg.stage.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 022, 0u);
  EXPECT_EQ(*ReadWholeFile(StageViewDir(s.cfg, "81") + "/src/f"), "data");  // staged into the fresh one
}

TEST(StageSetAside, AStageDirTheAdminLeftWritableStaysAConfigFault) {
  Site s;
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  ASSERT_EQ(::mkdir(s.cfg.stage.dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(s.cfg.stage.dir.c_str(), 01777), 0);
  StageJobResult r = StageForJob(s.cfg, s.job);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.drain);
  EXPECT_EQ(r.owner, FaultOwner::kConfig);
  EXPECT_NE(r.message.find("stage_dir " + s.cfg.stage.dir + ": mode 1777 lets others write in it"), std::string::npos) << r.message;
  EXPECT_EQ(r.summary.find("set aside"), std::string::npos) << r.summary;
}

}  // namespace
}  // namespace preflight
