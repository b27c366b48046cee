// RunJob and its pieces. The command is the real stand-in program
// (PF_TEST_APP); scontrol is a fake script that logs its arguments, and
// `preflight slurm` a fake that answers job and node records as JSON (the real scontrol is
// exercised by tests/system/run_*_test.sh).
#include "preflight/run_job.h"

#include "preflight/checkpoint.h"

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace preflight {
namespace {

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Hostlist, Expands) {
  auto h = ExpandHostlist("n[1-3,7],gpu[08-10],login");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (std::vector<std::string>{"n1", "n2", "n3", "n7", "gpu08", "gpu09", "gpu10", "login"}));
  auto two = ExpandHostlist("r[1-2]n[1-2]");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_FALSE(ExpandHostlist("n[1-3").ok());
  EXPECT_FALSE(ExpandHostlist("n[3-1]").ok());
  EXPECT_FALSE(ExpandHostlist("n[a-b]").ok());
}

TEST(Condemned, NamedNodesDrainedNodesElseSelf) {
  std::vector<std::string> nodes = {"n1", "n2", "n3", "n10"};
  EXPECT_EQ(CondemnedNodes("n2:1234:1299 [0] NCCL WARN Timeout", nodes, {}, "n1"),
            (std::vector<std::string>{"n2"}));
  EXPECT_EQ(CondemnedNodes("n10.cluster.local: CUDA error", nodes, {"n3"}, "n1"),
            (std::vector<std::string>{"n3", "n10"}));
  EXPECT_EQ(CondemnedNodes("CUDA error: an illegal memory access", nodes, {}, "n1"),
            (std::vector<std::string>{"n1"}));
}

RunPolicy Defaults() {
  Config cfg;
  po::variables_map vm;
  RunCli cli;
  auto p = ResolveRunPolicy(cfg, vm, cli);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(Classify, DefaultClassesAndUserErrors) {
  RunPolicy p = Defaults();
  std::string line;
  auto c = ClassifyFailure({"step 1", "n2:99:99 [3] NCCL WARN Call to recv failed : Connection timed out", "bye"},
                           p.retry_classes, &line);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "nccl");
  EXPECT_NE(line.find("n2:99:99"), std::string::npos);
  EXPECT_EQ(*ClassifyFailure({"RuntimeError: CUDA error: uncorrectable ECC error encountered"}, p.retry_classes, nullptr),
            "cuda");
  EXPECT_EQ(*ClassifyFailure({"Traceback (most recent call last):", "KeyError: 'lr'"}, p.retry_classes, nullptr), "");
  // Issue #19: a NUL byte before the error hid it from the retry patterns.
  EXPECT_EQ(*ClassifyFailure({std::string("rank 3\0 RuntimeError: CUDA error: an illegal memory access", 58)},
                             p.retry_classes, nullptr),
            "cuda");
}

TEST(Decide, Table) {
  RunPolicy p = Defaults();
  SuperviseResult r;
  RunCounters c;
  // Preempted: requeue while below the maximum, in Slurm, with requeue on.
  r.preempted = true;
  r.preempt_signal = SIGUSR2;
  auto d = Decide(r, p, c, true);
  EXPECT_EQ(d.action, RunAction::kRequeue);
  EXPECT_EQ(d.kind, "preemption");
  EXPECT_FALSE(d.exclude_nodes);
  EXPECT_EQ(Decide(r, p, c, false).action, RunAction::kExit);
  c.preempt_requeues = p.max_requeues;
  d = Decide(r, p, c, true);
  EXPECT_EQ(d.action, RunAction::kExit);
  EXPECT_NE(d.reason.find("max 3"), std::string::npos);
  RunPolicy off = p;
  off.requeue = false;
  EXPECT_EQ(Decide(r, off, RunCounters{}, true).action, RunAction::kExit);
  // Plain user error: never retried.
  r = SuperviseResult{};
  r.exit.exit_code = 1;
  r.tail = {"ValueError: bad config"};
  d = Decide(r, p, RunCounters{}, true);
  EXPECT_EQ(d.action, RunAction::kExit);
  EXPECT_EQ(d.kind, "user-error");
  // Retryable failure: requeue with exclusion, bounded apart from preemption.
  r.tail = {"NCCL WARN Watchdog: Connection timed out"};
  RunCounters many_preempts;
  many_preempts.preempt_requeues = 100;
  d = Decide(r, p, many_preempts, true);
  EXPECT_EQ(d.action, RunAction::kRequeue);
  EXPECT_EQ(d.kind, "failure:nccl");
  EXPECT_TRUE(d.exclude_nodes);
  RunCounters spent;
  spent.failure_restarts = p.max_failure_restarts;
  EXPECT_EQ(Decide(r, p, spent, true).action, RunAction::kExit);
  // Success.
  r = SuperviseResult{};
  EXPECT_EQ(Decide(r, p, RunCounters{}, true).kind, "done");
  // Killed for a stall: retried without exclusion.
  r.killed_for_alert = true;
  r.alerts.push_back({AlertKind::kOutput, "no output line for 30s (limit 30s)", 0});
  r.exit.exit_code = 143;
  d = Decide(r, p, RunCounters{}, true);
  EXPECT_EQ(d.action, RunAction::kRequeue);
  EXPECT_EQ(d.kind, "stall:output");
  EXPECT_FALSE(d.exclude_nodes);
}

TEST(Policy, CommandLineBeatsSiteConfigAndErrorsNameTheOption) {
  po::options_description desc;
  RunCli cli;
  CommonCli common;
  AddCommonOptions(desc, common);
  AddRunOptions(desc, cli);
  Config site;
  site.run.max_requeues = 5;
  site.run.grace_ms = 30000;
  {
    const char* argv[] = {"preflight-run", "--max-requeues", "1", "--checkpoint-dir", "/tmp/x/"};
    po::variables_map vm;
    ASSERT_TRUE(ParseCommandLine(5, const_cast<char**>(argv), desc, nullptr, vm).ok());
    auto p = ResolveRunPolicy(site, vm, cli);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->max_requeues, 1u);        // command line
    EXPECT_DOUBLE_EQ(p->grace_s, 30.0);    // site config
    EXPECT_EQ(p->checkpoint_dir, "/tmp/x");
    EXPECT_EQ(p->checkpoint_request_file, "/tmp/x/.preflight-checkpoint-request");
  }
  struct Bad {
    std::vector<const char*> args;
    const char* expect;
  } bad[] = {
      {{"--grace", "soon"}, "--grace"},
      {{"--max-requeues", "-1"}, "--max-requeues"},
      {{"--preempt-signals", "USR2,KILL"}, "KILL"},
      {{"--checkpoint-signal", "USR9"}, "USR9"},
      {{"--retry-nccl", "(unclosed"}, "nccl"},
      {{"--nan-pattern", "[x"}, "[x"},
      {{"--keep-checkpoints", "2"}, "--checkpoint-dir"},
      {{"--stall-heartbeat", "10s"}, "--heartbeat-file"},
      {{"--checkpoint-marker", "a/b", "--checkpoint-dir", "/tmp/x"}, "plain file name"},
      {{"--checkpoint-signal", "none", "--preempt-signals", "USR2"}, "could not reach"},
  };
  for (const auto& b : bad) {
    std::vector<const char*> argv = {"preflight-run"};
    argv.insert(argv.end(), b.args.begin(), b.args.end());
    po::variables_map vm;
    RunCli c2;
    po::options_description d2;
    AddRunOptions(d2, c2);
    ASSERT_TRUE(ParseCommandLine(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), d2, nullptr, vm).ok());
    auto p = ResolveRunPolicy(site, vm, c2);
    ASSERT_FALSE(p.ok()) << b.args[0];
    EXPECT_NE(p.status().message().find(b.expect), std::string::npos) << p.status().message();
  }
}

TEST(Counters, RoundTripAndOtherJobStartsOver) {
  preflight_test::TempDir tmp("counters");
  std::string path = CountersPath(tmp);
  RunCounters c;
  c.preempt_requeues = 2;
  c.failure_restarts = 1;
  ASSERT_TRUE(SaveCounters(path, "42", c).ok());
  auto same = LoadCounters(path, "42", 9);
  EXPECT_EQ(same.preempt_requeues, 2u);
  EXPECT_EQ(same.failure_restarts, 1u);
  auto other = LoadCounters(path, "43", 9);
  EXPECT_EQ(other.preempt_requeues, 0u);
  auto none = LoadCounters("", "42", 4);  // no checkpoint dir: Slurm's restart count
  EXPECT_EQ(none.failure_restarts, 4u);
}

// RunJob end to end with a fake scontrol.
class RunJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_ + "/scontrol.log";
    std::string fake = dir_ + "/scontrol";
    std::ofstream(fake) << "#!/bin/sh\necho \"$*\" >> " << log_ << "\nexit 0\n";
    chmod(fake.c_str(), 0755);
    cfg_.scontrol = fake;
    // Records come from `preflight slurm job|nodes` (JSON); this one answers
    // as the real one does for job 42 and its nodes.
    std::string query = dir_ + "/preflight";
    std::ofstream(query) << "#!/bin/sh\necho \"$*\" >> " << log_
                         << "\ncase \"$*\" in\n"
                            "  'slurm job 42') echo '{\"job_id\":42,\"state\":\"'\"${FAKE_JOB_STATE:-RUNNING}\"'\",\"node_list\":\"n[1-3]\",'"
                            "'\"nodes\":[\"n1\",\"n2\",\"n3\"],\"restarts\":0,\"exc_node_list\":\"n9\"}';;\n"
                            "  'slurm nodes n[1-3]') echo '{\"nodes\":[{\"name\":\"n1\",\"state\":\"IDLE\",\"drain\":false,\"reason\":\"\"},'"
                            "'{\"name\":\"n3\",\"state\":\"IDLE+DRAIN\",\"drain\":true,\"reason\":\"preflight: gpu.ecc GPU0\"}]}';;\n"
                            "  *) echo \"unexpected: $*\" >&2; exit 1;;\n"
                            "esac\n";
    chmod(query.c_str(), 0755);
    cfg_.slurm_query = query;
    cfg_.state_dir = dir_ + "/state";
    cfg_.textfile_dir = dir_ + "/metrics";
    policy_ = Defaults();
    policy_.checkpoint_dir = dir_ + "/ckpt";
    policy_.checkpoint_request_file = policy_.checkpoint_dir + "/.preflight-checkpoint-request";
    policy_.preempt_signals = {SIGUSR2, SIGTERM};
    policy_.checkpoint_signal = SIGUSR2;
    policy_.result_file = dir_ + "/result.json";
    env_ = {{"SLURM_JOB_ID", "42"}, {"SLURMD_NODENAME", "n1"}, {"SLURM_JOB_NODELIST", "n[1-3]"}};
  }
  std::vector<std::string> App(std::vector<std::string> args) {
    args.insert(args.begin(), PF_TEST_APP);
    args.push_back("--done-file");
    args.push_back(dir_ + "/done");
    return args;
  }
  preflight_test::TempDir tmp_{"run"};
  std::string dir_ = tmp_.path(), log_;
  Config cfg_;
  RunPolicy policy_;
  EnvMap env_;
};

TEST_F(RunJobTest, PreemptCheckpointRequeueThenResume) {
  std::string ckdir = policy_.checkpoint_dir;
  std::thread t([ckdir] {
    // Preempt once the app has made progress (its first periodic checkpoint).
    for (int i = 0; i < 6000 && access((ckdir + "/ckpt-2/COMPLETE").c_str(), F_OK) != 0; ++i) usleep(10000);
    kill(getpid(), SIGUSR2);
  });
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "100000", "--step-ms", "5", "--checkpoint-every", "2"}));
  t.join();
  EXPECT_EQ(rc, kRequeuedExit);
  std::string log = Slurp(log_);
  EXPECT_NE(log.find("requeue 42"), std::string::npos) << log;
  EXPECT_EQ(log.find("ExcNodeList"), std::string::npos) << log;  // preemption excludes nobody
  EXPECT_NE(Slurp(CountersPath(policy_.checkpoint_dir)).find("preempt_requeues=1"), std::string::npos);
  std::string result = Slurp(policy_.result_file);
  EXPECT_NE(result.find("\"action\": \"requeued\""), std::string::npos) << result;
  EXPECT_NE(result.find("\"kind\": \"preemption\""), std::string::npos);
  auto newest = NewestCompleteCheckpoint(policy_.checkpoint_dir, "COMPLETE");
  ASSERT_TRUE(newest.ok());
  ASSERT_FALSE(newest->empty());

  // The requeued job: Slurm sets SLURM_RESTART_COUNT; the app resumes.
  env_["SLURM_RESTART_COUNT"] = "1";
  std::string step = Slurp(*newest + "/state");
  long resumed_step = std::stol(step);
  rc = RunJob(cfg_, policy_, env_, App({"--steps", std::to_string(resumed_step + 3), "--step-ms", "1"}));
  EXPECT_EQ(rc, 0);
  std::string done = Slurp(dir_ + "/done");
  EXPECT_EQ(done, "done steps=" + std::to_string(resumed_step + 3) + " restart=1 resumed_from=" + *newest + "\n");
  EXPECT_NE(Slurp(policy_.result_file).find("\"kind\": \"done\""), std::string::npos);
}

TEST_F(RunJobTest, UserErrorIsNotRetried) {
  int rc = RunJob(cfg_, policy_, env_, App({"--fail-at", "2", "--code", "3", "--message", "KeyError: 'lr'"}));
  EXPECT_EQ(rc, 3);
  EXPECT_EQ(Slurp(log_).find("requeue"), std::string::npos);
  std::string result = Slurp(policy_.result_file);
  EXPECT_NE(result.find("\"kind\": \"user-error\""), std::string::npos) << result;
  // The site copies too: JSON under state_dir and the Prometheus textfile.
  EXPECT_NE(Slurp(cfg_.state_dir + "/jobs/42/n1.run.json").find("user-error"), std::string::npos);
  EXPECT_NE(Slurp(cfg_.textfile_dir + "/preflight_n1_run.prom").find("check=\"run.exit\""), std::string::npos);
}

TEST_F(RunJobTest, NcclFailureRequeuesExcludingTheNamedAndDrainedNodes) {
  int rc = RunJob(cfg_, policy_, env_,
                  App({"--fail-at", "2", "--code", "1", "--message", "n2:4242:4250 [0] NCCL WARN socket timed out"}));
  EXPECT_EQ(rc, kRequeuedExit);
  std::string log = Slurp(log_);
  // Requeue first, then the exclusion (Slurm refuses it for a running job),
  // merged with what the job already excluded.
  size_t rq = log.find("requeue 42"), ex = log.find("update JobId=42 ExcNodeList=n9,n2,n3");
  ASSERT_NE(rq, std::string::npos) << log;
  ASSERT_NE(ex, std::string::npos) << log;
  EXPECT_LT(rq, ex);
  EXPECT_NE(Slurp(CountersPath(policy_.checkpoint_dir)).find("failure_restarts=1"), std::string::npos);
}

TEST_F(RunJobTest, FailureRetriesStopAtTheMaximum) {
  policy_.max_failure_restarts = 0;
  int rc = RunJob(cfg_, policy_, env_, App({"--fail-at", "1", "--code", "4", "--message", "CUDA error: Xid 79"}));
  EXPECT_EQ(rc, 4);
  EXPECT_EQ(Slurp(log_).find("requeue"), std::string::npos);
}

TEST_F(RunJobTest, StallAlertWritesMetricsRunsHookAndRestarts) {
  policy_.stall.output_s = 0.5;
  policy_.stall_restart = true;
  policy_.kill_wait_s = 5;
  std::string hook_out = dir_ + "/hook";
  policy_.alert_hook = "echo \"$PREFLIGHT_ALERT_KIND $PREFLIGHT_JOB_ID $PREFLIGHT_NODE\" > " + hook_out;
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "100", "--step-ms", "1", "--hang-at", "3"}));
  EXPECT_EQ(rc, kRequeuedExit);
  std::string prom = Slurp(cfg_.textfile_dir + "/preflight_n1_run.prom");
  EXPECT_NE(prom.find("check=\"run.stall\",device=\"output\",verdict=\"fail\""), std::string::npos) << prom;
  std::string result = Slurp(policy_.result_file);
  EXPECT_NE(result.find("\"kind\": \"stall:output\""), std::string::npos) << result;
  // The hook runs detached: wait for it, bounded.
  for (int i = 0; i < 500 && Slurp(hook_out).empty(); ++i) usleep(10000);
  EXPECT_EQ(Slurp(hook_out), "output 42 n1\n");
}

TEST_F(RunJobTest, ACancelledJobIsNotRequeued) {
  // scancel: SIGTERM to the job, JobState CANCELLED; the TERM looks like a preemption.
  setenv("FAKE_JOB_STATE", "COMPLETING", 1);
  std::string first = policy_.checkpoint_dir + "/ckpt-1/COMPLETE";
  std::thread t([first] {
    for (int i = 0; i < 6000 && access(first.c_str(), F_OK) != 0; ++i) usleep(10000);
    kill(getpid(), SIGTERM);
  });
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "100000", "--step-ms", "5", "--checkpoint-every", "1"}));
  t.join();
  unsetenv("FAKE_JOB_STATE");
  EXPECT_EQ(rc, 0);  // the app checkpointed and exited 0
  std::string log = Slurp(log_);
  EXPECT_EQ(log.find("requeue"), std::string::npos) << log;
  EXPECT_NE(Slurp(policy_.result_file).find("\"kind\": \"cancelled\""), std::string::npos);
}

TEST_F(RunJobTest, OutsideSlurmNothingIsRequeued) {
  env_.clear();
  int rc = RunJob(cfg_, policy_, env_, App({"--fail-at", "1", "--code", "1", "--message", "NCCL WARN timed out"}));
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(Slurp(log_), "");
}

TEST_F(RunJobTest, IdleGpusThroughNvmlAreAStall) {
  // The fake NVML (tests/fakes) behind the production dlopen path: the job's
  // GPUs 2 and 3 (SLURM_JOB_GPUS are minor numbers) sit at 0 % utilisation.
  cfg_.nvml_library = PREFLIGHT_FAKE_NVML;
  setenv("PREFLIGHT_FAKE_NVML", "util 2 0;util 3 0", 1);
  env_["SLURM_JOB_GPUS"] = "2,3";
  policy_.stall.gpu_s = 0.5;
  policy_.gpu_sample_s = 0.1;
  policy_.stall_restart = true;
  policy_.kill_wait_s = 5;
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "100000", "--step-ms", "5"}));
  unsetenv("PREFLIGHT_FAKE_NVML");
  EXPECT_EQ(rc, kRequeuedExit);
  std::string result = Slurp(policy_.result_file);
  EXPECT_NE(result.find("\"kind\": \"stall:gpu\""), std::string::npos) << result;
  EXPECT_NE(result.find("every GPU at or below 5% utilisation"), std::string::npos) << result;
}

TEST_F(RunJobTest, BusyGpusAreNoStall) {
  cfg_.nvml_library = PREFLIGHT_FAKE_NVML;
  setenv("PREFLIGHT_FAKE_NVML", "util 2 0", 1);  // GPU 3 stays busy (the fake's default)
  env_["SLURM_JOB_GPUS"] = "2,3";
  policy_.stall.gpu_s = 0.3;
  policy_.gpu_sample_s = 0.05;
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "100", "--step-ms", "10"}));
  unsetenv("PREFLIGHT_FAKE_NVML");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Slurp(policy_.result_file).find("run.stall"), std::string::npos);
}

TEST_F(RunJobTest, PruneKeepsNewestK) {
  policy_.keep_checkpoints = 2;
  int rc = RunJob(cfg_, policy_, env_, App({"--steps", "10", "--step-ms", "1", "--checkpoint-every", "2"}));
  EXPECT_EQ(rc, 0);
  auto list = ListCheckpoints(policy_.checkpoint_dir, "COMPLETE");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "ckpt-8");
  EXPECT_EQ((*list)[1].name, "ckpt-10");
}

}  // namespace
}  // namespace preflight
