// PruneJobState (state_paths.h) on folders it cannot remove and on names
// with any byte (issue 29): one "cannot remove PATH: REASON" per folder,
// PATH printable, nothing of that folder removed, the others pruned. The
// age and size rules themselves: stage/test/stage_test.cc (Hostile.JobState...).
#include "preflight/state_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include <gtest/gtest.h>

#include "preflight/fileutil.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

class StateGc : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.state_dir = dir_.path() + "/state";
    cfg_.state_keep_ms = 3600 * 1000;
    cfg_.state_keep_bytes = 0;
  }
  std::string Jobs() const { return cfg_.state_dir + "/jobs"; }
  // A finished job folder whose files are `age` seconds old.
  void Job(const std::string& id, double age, size_t bytes = 100) {
    std::string d = Jobs() + "/" + id;
    ASSERT_TRUE(MakeDirs(d).ok());
    std::ofstream(d + "/n1.prolog.json") << std::string(bytes, 'x');
    std::ofstream(d + "/n1.epilog.json") << "{}";
    Age(d, age);
  }
  void Age(const std::string& d, double age) {
    struct timespec ts[2] = {{static_cast<time_t>(now_ - age), 0}, {static_cast<time_t>(now_ - age), 0}};
    for (const char* f : {"/n1.prolog.json", "/n1.epilog.json", "/sub", ""})
      ::utimensat(AT_FDCWD, (d + f).c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  bool Exists(const std::string& rel) const { return ::access((Jobs() + "/" + rel).c_str(), F_OK) == 0; }
  // slurmctld knows none of them (the names are no job ids: gone).
  SlurmJobs Gone() const {
    SlurmJobs s;
    s.answered = true;
    for (const auto& j : state::JobsToPrune(cfg_, "", now_)) AddAnswer(&s, j, JobWhere::kGone);
    return s;
  }

  preflight_test::TempDir dir_{"state-gc"};
  Config cfg_;
  double now_ = static_cast<double>(::time(nullptr));
};

// Before: "<jobs>/unlink <name>/sub: Is a directory", the control bytes of
// the name printed raw, the folder's other files (its epilog record)
// already gone, and the size rule trying it a second time.
TEST_F(StateGc, AFolderThatCannotBeEmptiedIsReportedOnceKeptWholeAndSkipped) {
  std::string esc = "evil\x1b[2Jname\n";  // ESC, a terminal's clear-screen, a newline
  Job("10", 7200);
  Job(esc, 7200);
  Job("12", 7200);
  // A folder inside a job folder: gc removes files only, so it can never
  // empty this one (as an immutable file, or a mount, would make it).
  std::string stuck = Jobs() + "/" + esc;
  ASSERT_TRUE(MakeDirs(stuck + "/sub").ok());
  Age(stuck, 7200);
  // Both rules pick it: past state_keep, and over state_keep_size.
  cfg_.state_keep_bytes = 1;
  state::StateGcResult r = state::PruneJobState(cfg_, "", now_, Gone());
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.left.size(), 1u);
  EXPECT_EQ(r.left[0], "cannot remove " + Jobs() + "/evil\\x1b[2Jname\\x0a/sub: a folder (a job folder holds only "
                       "files; gc removes no folder inside it); the folder is left as it is");
  // Nothing of it went: on-call still has every record, the epilog's too.
  EXPECT_TRUE(Exists(esc + "/n1.epilog.json"));
  EXPECT_TRUE(Exists(esc + "/n1.prolog.json"));
  // The others went on.
  EXPECT_FALSE(Exists("10"));
  EXPECT_FALSE(Exists("12"));
  EXPECT_EQ(r.removed.size(), 2u);
  EXPECT_EQ(r.kept, 1u);
  // Every line is printable: no control byte reaches a terminal or a log.
  for (const auto& v : {r.removed, r.left, r.kept_live})
    for (const auto& line : v)
      EXPECT_TRUE(std::none_of(line.begin(), line.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
          << line;
  // Once it can be emptied, the next run removes it.
  ASSERT_EQ(::rmdir((stuck + "/sub").c_str()), 0);
  r = state::PruneJobState(cfg_, "", now_, Gone());
  EXPECT_TRUE(r.left.empty());
  ASSERT_EQ(r.removed.size(), 1u);
  EXPECT_EQ(r.removed[0].rfind("evil\\x1b[2Jname\\x0a ", 0), 0u) << r.removed[0];
  EXPECT_FALSE(Exists(esc));
}

// An immutable file fails its unlink: found before anything of its folder
// goes. Needs root and a file system with the flag; skipped elsewhere (the
// system test hostile_weak_shell has it, and a mount, on the cluster).
TEST_F(StateGc, AnImmutableFileKeepsItsFolderWhole) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chattr +i)";
  Job("20", 7200);
  Job("21", 7200);
  std::string imm = Jobs() + "/20/n1.prolog.json";
  std::string chattr = "chattr +i '" + imm + "' 2>/dev/null";
  if (std::system(chattr.c_str()) != 0) GTEST_SKIP() << "no immutable flag on this file system";
  Age(Jobs() + "/20", 7200);
  state::StateGcResult r = state::PruneJobState(cfg_, "", now_, Gone());
  EXPECT_EQ(std::system(("chattr -i '" + imm + "'").c_str()), 0);
  ASSERT_EQ(r.left.size(), 1u);
  EXPECT_EQ(r.left[0], "cannot remove " + imm + ": immutable (chattr +i); the folder is left as it is");
  EXPECT_TRUE(Exists("20/n1.epilog.json"));
  EXPECT_FALSE(Exists("21"));
}

TEST_F(StateGc, AnUnreadableJobsFolderIsAnErrorNamingItPrintably) {
  cfg_.state_dir = dir_.path() + "/st\x07te";
  ASSERT_TRUE(MakeDirs(cfg_.state_dir).ok());
  std::ofstream(cfg_.state_dir + "/jobs") << "not a folder";
  state::StateGcResult r = state::PruneJobState(cfg_, "", now_, Gone());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "cannot read " + dir_.path() + "/st\\x07te/jobs: Not a directory");
  EXPECT_TRUE(r.left.empty());
}

}  // namespace
}  // namespace preflight
