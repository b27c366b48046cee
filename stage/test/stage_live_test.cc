// Issue 29, defect 3: a garbage collector (epilog, health check, `preflight
// cache gc`, `state gc`) never releases anything of a job slurmctld still
// lists as running on the node, however stale it looks (job_liveness.h).
// Before the fix, a job with no slurmstepd on the node (salloc between
// steps, a batch job's non-first node before its first srun, with no
// extern step) lost its view and cache holds after stage_timeout + 10 min.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ctime>
#include <set>

#include "preflight/fileutil.h"
#include "preflight/job_liveness.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"
#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

namespace preflight {
namespace {

using preflight_test::TempDir;
using preflight_test::Write;

// Jobs 901 (Slurm: running here), 902 (Slurm: unknown) and 903 (Slurm:
// running on another node), each with a view and a cache hold, none with a
// slurmstepd, all past the grace.
struct Node {
  TempDir t;
  Config cfg;
  StageCacheOptions co;
  double later = 0;
  Node() {
    cfg.stage.dir = t.path() + "/stage";
    cfg.stage.timeout_ms = 1000;
    co = CacheOptionsFor(cfg);
    std::string src = t.path() + "/src";
    MakeDirs(src);
    Write(src + "/f", "data");
    StagedDataset d;
    FaultSide side;
    for (const char* j : {"901", "902", "903"}) {
      EXPECT_TRUE(StageDataset(co, src, {}, j, &d, &side).ok());
      MakeDirs(cfg.stage.dir + "/jobs/" + j + "/ds");
    }
    later = static_cast<double>(::time(nullptr)) + 1 + 601;
  }
  bool view(const std::string& j) const { return ::access((cfg.stage.dir + "/jobs/" + j).c_str(), F_OK) == 0; }
  std::set<std::string> holders() const {
    auto list = ListCache(co);
    EXPECT_TRUE(list.ok());
    std::set<std::string> jobs;
    if (list)
      for (const auto& e : *list) jobs.insert(e.jobs.begin(), e.jobs.end());
    return jobs;
  }
};

// The rule itself (ClassifyJob, MayReleaseStage...): core/test/job_liveness_test.cc.

TEST(StageLive, AJobSlurmListsHereKeepsItsViewAndHolds) {
  Node n;
  EXPECT_EQ(StaleStageJobs(n.cfg, {}, n.later), std::set<std::string>({"901", "902", "903"}));
  SlurmJobs s;
  s.answered = true;
  AddAnswer(&s, "901", JobWhere::kHere);
  AddAnswer(&s, "902", JobWhere::kGone);
  AddAnswer(&s, "903", JobWhere::kElsewhere);
  auto lines = ReleaseStaleJobs(n.cfg, {}, s, n.later);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "job 901: no slurmstepd on this host; view and cache hold kept: slurmctld lists it as running on this node");
  EXPECT_TRUE(n.view("901"));
  EXPECT_FALSE(n.view("902"));
  EXPECT_FALSE(n.view("903"));
  EXPECT_EQ(n.holders(), std::set<std::string>({"901"}));
}

TEST(StageLive, SlurmUnreachableReleasesNothing) {
  Node n;
  SlurmJobs s;  // answered = false
  s.error = "preflight slurm job 902: no answer within 5000 ms";
  auto lines = ReleaseStaleJobs(n.cfg, {}, s, n.later);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& l : lines) EXPECT_NE(l.find("kept: slurmctld could not be asked"), std::string::npos) << l;
  for (const char* j : {"901", "902", "903"}) EXPECT_TRUE(n.view(j)) << j;
  EXPECT_EQ(n.holders(), std::set<std::string>({"901", "902", "903"}));
  // A job slurmctld was not asked about (past the per-run limit) is kept too.
  s.answered = true;
  AddAnswer(&s, "902", JobWhere::kGone);
  ReleaseStaleJobs(n.cfg, {}, s, n.later);
  EXPECT_FALSE(n.view("902"));
  EXPECT_TRUE(n.view("901"));
  EXPECT_TRUE(n.view("903"));
}

TEST(StateLive, StateGcKeepsTheRecordsOfAJobSlurmListsAsRunning) {
  TempDir t;
  Config cfg;
  cfg.state_dir = t.path() + "/state";
  cfg.state_keep_ms = 3600 * 1000;
  double now = static_cast<double>(::time(nullptr));
  for (const char* j : {"31", "32", "33"}) {
    std::string d = cfg.state_dir + "/jobs/" + j;
    MakeDirs(d);
    Write(d + "/n1.prolog.json", "{}");
    struct timespec ts[2] = {{static_cast<time_t>(now - 5 * 3600), 0}, {static_cast<time_t>(now - 5 * 3600), 0}};
    ::utimensat(AT_FDCWD, (d + "/n1.prolog.json").c_str(), ts, 0);
    ::utimensat(AT_FDCWD, d.c_str(), ts, 0);
  }
  auto exists = [&](const std::string& j) { return ::access((cfg.state_dir + "/jobs/" + j).c_str(), F_OK) == 0; };
  EXPECT_EQ(state::JobsToPrune(cfg, "", now), std::set<std::string>({"31", "32", "33"}));
  SlurmJobs down;
  down.error = "exit 1";
  auto r = state::PruneJobState(cfg, "", now, down);
  EXPECT_TRUE(r.removed.empty());
  EXPECT_EQ(r.kept_live.size(), 3u);
  EXPECT_TRUE(exists("31") && exists("32") && exists("33"));
  SlurmJobs s;
  s.answered = true;
  AddAnswer(&s, "31", JobWhere::kHere);
  AddAnswer(&s, "32", JobWhere::kElsewhere);
  AddAnswer(&s, "33", JobWhere::kGone);
  r = state::PruneJobState(cfg, "", now, s);
  std::set<std::string> kept(r.kept_live.begin(), r.kept_live.end());
  EXPECT_EQ(kept, std::set<std::string>({"31 no epilog, older than 4 x state_keep, but kept: slurmctld lists it as running on this node",
                                         "32 no epilog, older than 4 x state_keep, but kept: slurmctld lists it as not ended"}));
  EXPECT_TRUE(exists("31"));
  EXPECT_TRUE(exists("32"));
  EXPECT_FALSE(exists("33"));
}

}  // namespace
}  // namespace preflight
