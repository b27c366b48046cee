// The rule of job_liveness.h and AskSlurmJobs (slurmctl.h), which feeds it
// from `preflight slurm job` (here a script standing in for it): a job
// slurmctld lists as running on the node is kept, a job it does not know
// (exit 3) is gone, and when it cannot be asked nothing goes (issue 29).
#include "preflight/job_liveness.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "preflight/slurmctl.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

TEST(JobLiveness, ClassifyBySlurmsStateAndNodes) {
  std::vector<std::string> n12 = {"n1", "n2"};
  EXPECT_EQ(ClassifyJob("RUNNING", n12, "n2"), JobWhere::kHere);
  EXPECT_EQ(ClassifyJob("CONFIGURING", n12, "n2"), JobWhere::kHere);
  EXPECT_EQ(ClassifyJob("COMPLETING", n12, "n2"), JobWhere::kHere);
  EXPECT_EQ(ClassifyJob("SUSPENDED", n12, "n1"), JobWhere::kHere);
  EXPECT_EQ(ClassifyJob("SOME_NEW_STATE", n12, "n1"), JobWhere::kHere);  // unknown: kept
  EXPECT_EQ(ClassifyJob("RUNNING", {}, "n3"), JobWhere::kHere);          // no node list: kept
  EXPECT_EQ(ClassifyJob("RUNNING", n12, "n3"), JobWhere::kElsewhere);
  EXPECT_EQ(ClassifyJob("PENDING", n12, "n1"), JobWhere::kElsewhere);
  for (const char* e : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"})
    EXPECT_EQ(ClassifyJob(e, n12, "n1"), JobWhere::kGone) << e;
}

TEST(JobLiveness, ReleaseOnlyWhatSlurmAnsweredForAndDoesNotRunHere) {
  SlurmJobs s;
  s.answered = true;
  AddAnswer(&s, "1", JobWhere::kHere);
  AddAnswer(&s, "2", JobWhere::kGone);
  AddAnswer(&s, "3", JobWhere::kElsewhere);
  EXPECT_FALSE(MayReleaseStage(s, "1"));
  EXPECT_TRUE(MayReleaseStage(s, "2"));
  EXPECT_TRUE(MayReleaseStage(s, "3"));
  EXPECT_FALSE(MayReleaseStage(s, "4"));  // not asked: kept
  EXPECT_FALSE(MayRemoveRecords(s, "1"));
  EXPECT_TRUE(MayRemoveRecords(s, "2"));
  EXPECT_FALSE(MayRemoveRecords(s, "3"));  // alive elsewhere: a shared state_dir is read there
  EXPECT_EQ(KeptBecause(s, "1", false), "slurmctld lists it as running on this node");
  EXPECT_EQ(KeptBecause(s, "2", true), "");
  s.answered = false;
  s.error = "no answer within 5000 ms";
  for (const char* j : {"1", "2", "3", "4"}) {
    EXPECT_FALSE(MayReleaseStage(s, j)) << j;
    EXPECT_FALSE(MayRemoveRecords(s, j)) << j;
  }
  EXPECT_EQ(KeptBecause(s, "2", false), "slurmctld could not be asked (no answer within 5000 ms)");
}

// A stand-in for `preflight slurm job ID`: 5 unknown (exit 3), 6 running
// on n1,n2, 7 completed, 8 running on n3; anything else an error (exit 1).
TEST(AskSlurmJobs, KnownUnknownAndUnreachable) {
  preflight_test::TempDir t;
  std::string q = t.path() + "/query";
  std::ofstream(q) << "#!/bin/sh\n"
                      "case $3 in\n"
                      "5) echo 'preflight: slurm: job 5: Invalid job id specified' >&2; exit 3;;\n"
                      "6) echo '{\"job_id\":6,\"state\":\"RUNNING\",\"nodes\":[\"n1\",\"n2\"]}';;\n"
                      "7) echo '{\"job_id\":7,\"state\":\"COMPLETED\",\"nodes\":[\"n2\"]}';;\n"
                      "8) echo '{\"job_id\":8,\"state\":\"RUNNING\",\"nodes\":[\"n3\"]}';;\n"
                      "*) echo 'Unable to contact slurm controller' >&2; exit 1;;\n"
                      "esac\n";
  ::chmod(q.c_str(), 0755);
  Config cfg;
  cfg.slurm_query = q;
  cfg.probe_timeout_ms = 10000;
  SlurmJobs s = AskSlurmJobs(cfg, "n2", {"5", "6", "7", "8", "not-a-job"}, 100);
  ASSERT_TRUE(s.answered) << s.error;
  EXPECT_EQ(s.asked, std::set<std::string>({"5", "6", "7", "8", "not-a-job"}));
  EXPECT_EQ(s.on_node, std::set<std::string>({"6"}));
  EXPECT_EQ(s.alive, std::set<std::string>({"6", "8"}));
  EXPECT_FALSE(MayReleaseStage(s, "6"));
  EXPECT_TRUE(MayReleaseStage(s, "5"));
  EXPECT_TRUE(MayReleaseStage(s, "not-a-job"));
  // Past the limit: not asked, so kept.
  s = AskSlurmJobs(cfg, "n2", {"5", "6", "7"}, 1);
  EXPECT_TRUE(s.answered);
  EXPECT_EQ(s.asked, std::set<std::string>({"5"}));
  EXPECT_FALSE(MayReleaseStage(s, "7"));
  // slurmctld unreachable: nothing answered, nothing may go.
  s = AskSlurmJobs(cfg, "n2", {"5", "9"}, 100);
  EXPECT_FALSE(s.answered);
  EXPECT_NE(s.error.find("Unable to contact slurm controller"), std::string::npos) << s.error;
  EXPECT_FALSE(MayReleaseStage(s, "5"));
  EXPECT_FALSE(MayRemoveRecords(s, "5"));
  // Nothing to ask: answered without a request.
  cfg.slurm_query = "/nonexistent/preflight";
  EXPECT_TRUE(AskSlurmJobs(cfg, "n2", {}, 100).answered);
}

}  // namespace
}  // namespace preflight
