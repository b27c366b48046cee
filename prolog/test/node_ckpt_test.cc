// The node side of checkpoint persistence (node_ckpt.h), as a non-root
// user: the prolog's folder, the epilog's finishing copy through its
// forked child, what it reports, keeps and removes.
#include "preflight/node_ckpt.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <set>
#include <fstream>

#include "preflight/ckpt_tier.h"
#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

class NodeCkptTest : public ::testing::Test {
 protected:
  preflight_test::TempDir tmp_{"node-ckpt"};
  Config cfg_;
  JobContext job_;
  void SetUp() override {
    ::chmod(tmp_.path().c_str(), 0755);  // the chain must not be writable by others
    cfg_.ckpt.dir = tmp_ / "local/ckpt";
    cfg_.ckpt.epilog_budget_ms = 20000;
    cfg_.state_dir = tmp_ / "state";
    cfg_.textfile_dir = tmp_ / "metrics";
    job_.job_id = "77";
    job_.node = "n1";
    // As root (a container), the job is nobody's: the child really drops.
    job_.uid = ::geteuid() == 0 ? 65534 : ::geteuid();
    job_.gid = ::geteuid() == 0 ? 65534 : ::getegid();
  }
  // What the test wrote as root becomes the job user's.
  void Own(const std::string& path) {
    if (::geteuid() != 0) return;
    EXPECT_EQ(::lchown(path.c_str(), job_.uid, job_.gid), 0);
    if (fs::is_directory(fs::symlink_status(path))) {
      for (const auto& e : fs::recursive_directory_iterator(path)) {
        EXPECT_EQ(::lchown(e.path().c_str(), job_.uid, job_.gid), 0);
      }
    }
  }
  std::string Dir() { return CkptJobDir(cfg_.ckpt, job_.job_id); }
  void Ckpt(const std::string& name, bool complete) {
    Write(Dir() + "/" + name + "/model.bin", std::string(1000, 'x'));
    if (complete) Write(Dir() + "/" + name + "/COMPLETE", "");
    Own(Dir());
  }
  void Plan(const std::string& tier) {
    CkptPlan p;
    p.tier = tier;
    p.run = "77.0";
    p.nodes = {"n1"};
    p.keep_local = 0;
    ASSERT_TRUE(WriteCkptPlan(Dir(), p).ok());
    Own(Dir());
  }
};

TEST_F(NodeCkptTest, PrologMakesPrivateFolderAndKeepsOurOwnLeftover) {
  cfg_.ckpt.dir.clear();
  EXPECT_FALSE(MakeCkptJobDir(cfg_, job_).made) << "no ckpt_dir: nothing asked";
  EXPECT_TRUE(MakeCkptJobDir(cfg_, job_).message.empty());
  SetUp();
  CkptDirResult r = MakeCkptJobDir(cfg_, job_);
  ASSERT_TRUE(r.made) << r.message;
  struct stat st;
  ASSERT_EQ(::lstat(Dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::lstat(cfg_.ckpt.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  Write(Dir() + "/step_1/COMPLETE", "");
  Own(Dir());
  r = MakeCkptJobDir(cfg_, job_);
  ASSERT_TRUE(r.made) << r.message;
  EXPECT_TRUE(Exists(Dir() + "/step_1/COMPLETE")) << "a requeued job's kept checkpoints stay for its resume";
  ASSERT_EQ(r.warnings.size(), 1u);
}

TEST_F(NodeCkptTest, PrologRefusesChainOthersCanWriteAsConfig) {
  fs::create_directories(cfg_.ckpt.dir);
  ::chmod(cfg_.ckpt.dir.c_str(), 0777);
  CkptDirResult r = MakeCkptJobDir(cfg_, job_);
  EXPECT_FALSE(r.made);
  EXPECT_EQ(r.owner, FaultOwner::kConfig) << r.message;
  ::chmod(cfg_.ckpt.dir.c_str(), 0755);
  job_.job_id = "../x";
  r = MakeCkptJobDir(cfg_, job_);
  EXPECT_FALSE(r.made);
  EXPECT_EQ(r.owner, FaultOwner::kUser);
}

TEST_F(NodeCkptTest, EpilogMakesNewestCompleteDurableAndFreesTheFolder) {
  ASSERT_TRUE(MakeCkptJobDir(cfg_, job_).made);
  std::string tier = tmp_ / "tier";
  fs::create_directories(tier);
  Own(tier);
  Plan(tier);
  Ckpt("step_10", true);
  Ckpt("step_20", true);
  Ckpt("step_30", false);
  CkptEpilogResult r = FinishCkptForJob(cfg_, job_);
  ASSERT_TRUE(r.requested);
  EXPECT_EQ(r.child_error, "");
  EXPECT_EQ(r.report.round.newest_durable, "step_20");
  EXPECT_TRUE(Exists(tier + "/step_20/" + kCkptDurableMarker));
  EXPECT_FALSE(Exists(tier + "/step_30")) << "an incomplete checkpoint is never copied";
  EXPECT_TRUE(r.removed);
  EXPECT_FALSE(Exists(Dir()));
  EXPECT_EQ(r.check.verdict, Verdict::kPass) << r.check.message;
  std::string lines;
  for (const auto& l : r.lines) lines += l + "\n";
  EXPECT_NE(lines.find("checkpoint step_20: durable on " + tier), std::string::npos) << lines;
  auto rec = ReadWholeFile(state::JobNodeFile(cfg_, "77", "n1", state::kCkptJson));
  ASSERT_TRUE(rec.ok());
  EXPECT_NE(rec->find("\"newest_durable\": \"step_20\""), std::string::npos) << *rec;
  auto prom = ReadWholeFile(cfg_.textfile_dir + "/preflight_n1_ckpt.prom");
  ASSERT_TRUE(prom.ok());
  EXPECT_NE(prom->find("preflight_ckpt_bytes_not_durable{node=\"n1\"} 0\n"), std::string::npos) << *prom;
  EXPECT_EQ(prom->find("preflight_ckpt_newest_durable_timestamp_seconds{node=\"n1\"} 0\n"), std::string::npos) << *prom;
}

TEST_F(NodeCkptTest, EpilogKeepsWhatIsNotDurableAndSaysSo) {
  ASSERT_TRUE(MakeCkptJobDir(cfg_, job_).made);
  std::string tier = tmp_ / "tier-is-a-file";
  Write(tier, "not a folder");
  Plan(tier);
  Ckpt("step_20", true);
  CkptEpilogResult r = FinishCkptForJob(cfg_, job_);
  EXPECT_EQ(r.child_error, "");
  EXPECT_FALSE(r.removed);
  EXPECT_TRUE(Exists(Dir() + "/step_20/COMPLETE")) << "a checkpoint that is not durable is not lost";
  EXPECT_EQ(r.check.verdict, Verdict::kWarn);
  EXPECT_EQ(r.check.owner, FaultOwner::kUser) << "the job's outcome, never the node's";
  std::string lines;
  for (const auto& l : r.lines) lines += l + "\n";
  EXPECT_NE(lines.find("kept"), std::string::npos) << lines;
  auto prom = ReadWholeFile(cfg_.textfile_dir + "/preflight_n1_ckpt.prom");
  ASSERT_TRUE(prom.ok());
  EXPECT_NE(prom->find("preflight_ckpt_epilog_ok{node=\"n1\"} 0\n"), std::string::npos) << *prom;
}

TEST_F(NodeCkptTest, EpilogGarbagePlanKeepsNoPlanFrees) {
  ASSERT_TRUE(MakeCkptJobDir(cfg_, job_).made);
  Write(Dir() + "/" + kCkptPlanFile, "{garbage");
  Ckpt("step_20", true);  // owned by the user
  CkptEpilogResult r = FinishCkptForJob(cfg_, job_);
  EXPECT_EQ(r.child_error, "");
  EXPECT_NE(r.report.plan_error.find("could not be read"), std::string::npos) << r.report.plan_error;
  EXPECT_TRUE(Exists(Dir() + "/step_20/COMPLETE"));
  ASSERT_EQ(::unlink((Dir() + "/" + kCkptPlanFile).c_str()), 0);
  r = FinishCkptForJob(cfg_, job_);
  EXPECT_FALSE(r.report.had_plan);
  EXPECT_TRUE(r.removed) << "without a plan nothing was asked to persist: the folder is scratch";
  EXPECT_FALSE(Exists(Dir()));
  EXPECT_FALSE(FinishCkptForJob(cfg_, job_).requested) << "no folder: nothing to do";
}

TEST_F(NodeCkptTest, GcRemovesOldFoldersOfEndedJobsOnly) {
  cfg_.state_keep_ms = 3600 * 1000;
  double now = static_cast<double>(::time(nullptr));
  auto old = [&](const std::string& job) {
    job_.job_id = job;
    ASSERT_TRUE(MakeCkptJobDir(cfg_, job_).made);
    Ckpt("step_1", true);
    struct timespec ts[2] = {{static_cast<time_t>(now) - 7200, 0}, {static_cast<time_t>(now) - 7200, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, Dir().c_str(), ts, AT_SYMLINK_NOFOLLOW), 0);
  };
  old("5");
  old("6");
  old("7");
  job_.job_id = "8";
  ASSERT_TRUE(MakeCkptJobDir(cfg_, job_).made);  // new: not stale
  EXPECT_EQ(StaleCkptJobs(cfg_, "7", now), (std::set<std::string>{"5", "6"})) << "the running job is never picked";
  SlurmJobs slurm;
  slurm.answered = true;
  slurm.asked = {"5", "6"};
  slurm.alive = {"6"};  // requeued, pending: its kept checkpoints are for its resume
  auto lines = GcCkptJobs(cfg_, "7", now, slurm);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_FALSE(Exists(cfg_.ckpt.dir + "/5")) << all;
  EXPECT_TRUE(Exists(cfg_.ckpt.dir + "/6/step_1/COMPLETE")) << all;
  EXPECT_TRUE(Exists(cfg_.ckpt.dir + "/7")) << all;
  EXPECT_TRUE(Exists(cfg_.ckpt.dir + "/8")) << all;
  EXPECT_NE(all.find("/5: removed"), std::string::npos) << all;
  EXPECT_NE(all.find("/6: older than state_keep, but kept"), std::string::npos) << all;
  SlurmJobs none;  // slurmctld could not be asked: nothing goes
  GcCkptJobs(cfg_, "", now, none);
  EXPECT_TRUE(Exists(cfg_.ckpt.dir + "/6/step_1/COMPLETE"));
}

TEST_F(NodeCkptTest, BudgetSpentNamesWhatDidNotFit) {
  CkptChildReport r;
  r.had_plan = true;
  CkptRecord rec;
  rec.name = "step_20";
  rec.state = CkptState::kFailed;
  rec.error = "deadline passed";
  r.round.records = {rec};
  r.round.bytes_not_durable = 4096;
  r.round.timed_out = true;
  r.kept_reason = "its newest complete checkpoint is not durable";
  auto back = ParseCkptChildReport(CkptChildReportJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::string lines;
  for (const auto& l : CkptOutcomeLines(*back, "", 120)) lines += l + "\n";
  EXPECT_NE(lines.find("checkpoint step_20: not durable, budget 120 s spent; 4096 bytes left on local disk"),
            std::string::npos) << lines;
  EXPECT_FALSE(ParseCkptChildReport("{\"had_plan\":1}").ok());
  EXPECT_FALSE(ParseCkptChildReport(std::string(kCkptChildReportMax + 1, ' ')).ok());
  // Another node committed step_20 while this one also offered step_10.
  CkptChildReport w;
  w.had_plan = true;
  w.tier = "/t";
  CkptRecord a, b;
  a.name = "step_20";
  a.state = CkptState::kDurable;
  a.tier = "/t";
  b.name = "step_10";
  b.state = CkptState::kPersisting;
  b.missing = {"n3"};
  w.round.records = {a, b};
  w.round.newest_durable = "step_20";
  std::string wl;
  for (const auto& l : CkptOutcomeLines(w, "", 120)) wl += l + "\n";
  EXPECT_NE(wl.find("checkpoint step_10: not needed, step_20 is durable"), std::string::npos) << wl;
  EXPECT_EQ(wl.find("waiting"), std::string::npos) << wl;
  // The loser of two runs writing one name: its copy finished, the commit was
  // refused; the summary says that, not "the copy did not finish".
  CkptChildReport lost;
  lost.had_plan = true;
  CkptRecord l;
  l.name = "step_20";
  l.state = CkptState::kFailed;
  l.error = "step_20 already exists on the tier with other contents";
  lost.round.records = {l};
  lost.round.bytes_not_durable = 8192;
  std::string ll;
  for (const auto& x : CkptOutcomeLines(lost, "", 120)) ll += x + "\n";
  EXPECT_NE(ll.find("checkpoint step_20: not durable, step_20 already exists on the tier with other contents; 8192 "
                    "bytes left"),
            std::string::npos) << ll;
  EXPECT_EQ(ll.find("did not finish"), std::string::npos) << ll;
  std::string killed = CkptOutcomeLines(r, "killed after the budget", 120).front();
  EXPECT_NE(killed.find("kept"), std::string::npos) << killed;
}

}  // namespace
}  // namespace preflight
