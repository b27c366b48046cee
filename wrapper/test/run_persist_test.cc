// preflight-run's two tiers (run_persist.h, the tier part of run_policy.h):
// the options, the plan, the output lines, the agent's command line, and
// one node's agent loop persisting to a temporary tier, then the resume
// choice across both tiers. The srun step is exercised by
// tests/system/run_persist_test.sh.
#include "preflight/run_persist.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <thread>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

Expected<RunPolicy> Resolve(const Config& site, std::vector<const char*> args, RunCli cli = {}) {
  po::options_description desc;
  AddRunOptions(desc, cli);
  args.insert(args.begin(), "preflight-run");
  po::variables_map vm;
  Status s = ParseCommandLine(static_cast<int>(args.size()), const_cast<char**>(args.data()), desc, nullptr, vm);
  if (!s.ok()) return s;
  return ResolveRunPolicy(site, vm, cli);
}

TEST(PersistPolicy, OptionsSiteDefaultAndTheLocalDir) {
  Config site;
  RunCli cli;
  cli.user = "alice";
  cli.node = "n3";
  cli.ckpt_local = "/local/ckpt/77";
  auto p = Resolve(site, {"--persist-to", "/shared/%u/", "--checkpoint-convention", "torchtitan", "--verify-resume",
                          "sample", "--keep-checkpoints", "2"},
                   cli);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->persist_to, "/shared/alice");
  EXPECT_EQ(p->checkpoint_dir, "/local/ckpt/77");  // $PREFLIGHT_CKPT_LOCAL when no --checkpoint-dir
  EXPECT_EQ(p->convention, CkptConvention::kDcp);
  EXPECT_EQ(p->verify_resume, CkptVerify::kSample);
  EXPECT_EQ(p->keep_checkpoints, 2u);

  auto n = Resolve(site, {"--persist-to", "/t", "--checkpoint-dir", "/scratch/%n/ck"}, cli);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->checkpoint_dir, "/scratch/n3/ck");
  EXPECT_EQ(n->checkpoint_dir_arg, "/scratch/%n/ck");  // the agent expands it on its own node

  // The site's default tier: used with a local dir, silently off without
  // one (a job that never asked for checkpoints runs as before), off with none.
  site.ckpt.persist_to = "/shared/ckpt/%u";
  auto d = Resolve(site, {}, cli);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->persist_to, "/shared/ckpt/alice");
  RunCli bare = cli;
  bare.ckpt_local.clear();
  auto off = Resolve(site, {}, bare);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->persist_to, "");
  EXPECT_EQ(off->checkpoint_dir, "");
  auto none = Resolve(site, {"--persist-to", "none"}, cli);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->persist_to, "");
  EXPECT_EQ(none->checkpoint_dir, "");
}

TEST(PersistPolicy, ErrorsNameTheOption) {
  Config site;
  RunCli cli;
  cli.node = "n1";
  struct Bad {
    std::vector<const char*> args;
    const char* expect;
  } bad[] = {
      {{"--persist-to", "/t"}, "--checkpoint-dir"},  // a tier and no local dir
      {{"--persist-to", "rel/t", "--checkpoint-dir", "/c"}, "absolute"},
      {{"--persist-to", "/t/%u", "--checkpoint-dir", "/c"}, "%u"},  // no user name known
      {{"--checkpoint-convention", "keras"}, "--checkpoint-convention 'keras'"},
      {{"--verify-resume", "some"}, "--verify-resume 'some'"},
  };
  for (const auto& b : bad) {
    auto p = Resolve(site, b.args, cli);
    ASSERT_FALSE(p.ok()) << b.args[0] << " " << b.args[1];
    EXPECT_NE(p.status().message().find(b.expect), std::string::npos) << p.status().message();
  }
}

TEST(PersistPlan, FromTheJobsEnvironment) {
  Config cfg;
  cfg.ckpt.keep_local = 2;
  RunPolicy p;
  p.persist_to = "/shared/t";
  p.keep_checkpoints = 5;
  p.convention = CkptConvention::kMegatron;
  p.verify_resume = CkptVerify::kFull;
  EnvMap env = {{"SLURM_JOB_ID", "42"}, {"SLURM_RESTART_COUNT", "2"}, {"SLURM_JOB_NODELIST", "n[1-3]"}};
  auto plan = BuildCkptPlan(cfg, p, env);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tier, "/shared/t");
  EXPECT_EQ(plan->run, "42.2");
  EXPECT_EQ(plan->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(plan->convention, CkptConvention::kMegatron);
  EXPECT_EQ(plan->keep_shared, 5u);
  EXPECT_EQ(plan->keep_local, 2u);
  EXPECT_EQ(plan->verify, CkptVerify::kFull);
  EXPECT_TRUE(plan->ConventionFor("n1").coordinator);
  EXPECT_FALSE(plan->ConventionFor("n2").coordinator);
  EXPECT_FALSE(BuildCkptPlan(cfg, p, {{"SLURM_JOB_NODELIST", "n1"}}).ok());  // no job: no run id
  env["SLURM_JOB_NODELIST"] = "n[1-";
  EXPECT_FALSE(BuildCkptPlan(cfg, p, env).ok());
}

TEST(PersistLines, OneLinePerOutcome) {
  CkptRecord r;
  r.name = "step-20";
  r.node = "n2";
  r.tier = "/shared/t";
  r.state = CkptState::kDurable;
  r.bytes = 3000000;
  r.copy_seconds = 1.5;
  EXPECT_EQ(CkptRecordLine(r), "preflight: checkpoint step-20 on n2: durable on /shared/t (3000000 bytes in 1.5 s, 2.0 MB/s)");
  r.state = CkptState::kPersisting;
  r.missing = {"n1", "n3"};
  EXPECT_EQ(CkptRecordLine(r), "preflight: checkpoint step-20 on n2: waiting for parts of n1,n3");
  r.state = CkptState::kFailed;
  r.error = "No space left on device";
  EXPECT_EQ(CkptRecordLine(r), "preflight: checkpoint step-20 on n2: failed: No space left on device");
}

TEST(PersistAgentArgv, StepOnSeveralNodesChildOnOne) {
  RunPolicy p;
  p.persist_to = "/t";
  p.checkpoint_dir_arg = "/scratch/%n";
  p.keep_checkpoints = 3;
  auto multi = PersistAgentArgv("/bin/preflight-run", "/etc/p.conf", {"ckpt_interval=1s"}, p, 3);
  ASSERT_GE(multi.size(), 2u);
  EXPECT_EQ(multi[0], "srun");
  EXPECT_EQ(multi[1], "--overlap");
  auto has = [](const std::vector<std::string>& v, const std::vector<std::string>& seq) {
    return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
  };
  EXPECT_TRUE(has(multi, {"--nodes=3", "--ntasks=3", "--ntasks-per-node=1"}));
  EXPECT_TRUE(has(multi, {"/bin/preflight-run", "--persist-agent", "--config", "/etc/p.conf", "--set", "ckpt_interval=1s"}));
  EXPECT_TRUE(has(multi, {"--checkpoint-dir", "/scratch/%n"}));
  EXPECT_TRUE(has(multi, {"--persist-to", "/t"}));
  EXPECT_TRUE(has(multi, {"--keep-checkpoints", "3"}));
  // One node's agent killed ends the step, so Watch restarts it on every node.
  EXPECT_TRUE(has(multi, {"--kill-on-bad-exit=1"}));
  auto one = PersistAgentArgv("/bin/preflight-run", "", {}, p, 1);
  EXPECT_EQ(one[0], "/bin/preflight-run");
  EXPECT_FALSE(has(one, {"--config"}));  // the default config, as preflight-run had it
}

bool IsRegularFile(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void WriteCkpt(const std::string& dir, const std::string& name, const std::string& data, bool complete) {
  ASSERT_TRUE(MakeDirs(dir + "/" + name, 0755).ok());
  std::ofstream(dir + "/" + name + "/state") << data;
  if (complete) std::ofstream(dir + "/" + name + "/COMPLETE");
}

TEST(PersistLoop, OneNodePersistsToTheTierThenResumeChoosesAcrossTiers) {
  preflight_test::TempDir tmp;
  const std::string local = tmp.path() + "/local", tier = tmp.path() + "/tier";
  ASSERT_TRUE(MakeDirs(tier, 0700).ok());
  WriteCkpt(local, "step-1", "1 1", true);
  CkptPlan plan;
  plan.tier = tier;
  plan.run = "7.0";
  plan.nodes = {"n1"};
  plan.keep_local = 5;
  ASSERT_TRUE(WriteCkptPlan(local, plan).ok());
  PersistLoop loop(local, plan, "n1", 0.05, CkptIoClass::kNormal);
  unsigned rounds = 0;
  std::thread t([&] { rounds = loop.Run(); });
  for (int i = 0; i < 200 && !IsRegularFile(tier + "/step-1/.preflight-durable"); ++i) ::usleep(50000);
  // A checkpoint completed while the agent runs becomes durable too.
  WriteCkpt(local, "step-2", "2 3", true);
  for (int i = 0; i < 200 && !IsRegularFile(tier + "/step-2/.preflight-durable"); ++i) ::usleep(50000);
  WriteCkpt(local, "step-3", "3 6", false);  // incomplete: never persisted
  loop.Stop();
  t.join();
  EXPECT_GE(rounds, 2u);
  EXPECT_TRUE(IsRegularFile(tier + "/step-1/.preflight-durable"));
  EXPECT_TRUE(IsRegularFile(tier + "/step-2/.preflight-durable"));
  EXPECT_TRUE(IsRegularFile(tier + "/step-2/COMPLETE"));  // complete by the marker convention on the tier too
  EXPECT_FALSE(IsRegularFile(tier + "/step-3/state"));

  RunPolicy p;
  p.checkpoint_dir = local;
  // A multi-node job: the tier only.
  auto shared = ChooseRunResume(p, tier, plan.ConventionFor("n1"), false);
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  ASSERT_TRUE(shared->found);
  EXPECT_EQ(shared->chosen.path, tier + "/step-2");
  auto lines = shared->Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "preflight: resume from step-2 on the shared tier (" + tier + "/step-2)");
  // A one-node job: local disk too, the same checkpoint read from there.
  auto both = ChooseRunResume(p, tier, plan.ConventionFor("n1"), true);
  ASSERT_TRUE(both.ok());
  ASSERT_TRUE(both->found);
  EXPECT_EQ(both->chosen.path, local + "/step-2");
  EXPECT_EQ(both->chosen.where, CkptWhere::kLocal);
}

// ckpt_rate_cap: the copy writes no faster than the cap. The bound is one
// the pacer guarantees by construction (each write waits until the bytes so
// far fit the rate since the copy started), not a measured speed.
TEST(PersistRateCap, TheCopyKeepsUnderTheCap) {
  preflight_test::TempDir tmp;
  const std::string local = tmp.path() + "/local", tier = tmp.path() + "/tier";
  ASSERT_TRUE(MakeDirs(tier, 0700).ok());
  WriteCkpt(local, "step-1", std::string(3 << 20, 'x'), true);
  CkptPlan plan;
  plan.tier = tier;
  plan.run = "8.0";
  plan.nodes = {"n1"};
  CkptRoundOptions o;
  o.rate_cap = 8 << 20;  // 3 MiB at 8 MiB/s: at least 0.375 s
  auto r = PersistRound(local, plan, "n1", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->records.size(), 1u);
  EXPECT_EQ(r->records[0].state, CkptState::kDurable) << r->records[0].error;
  EXPECT_EQ(r->records[0].bytes, 3u << 20);
  EXPECT_GE(r->records[0].copy_seconds, 0.375);
}

// The whole one-node path through the binary: preflight-run starts its
// agent as a child (`preflight-run --persist-agent`), the agent's last round
// after the command exits makes the final checkpoint durable, and the
// restart on another node (empty local disk) resumes from the tier.
TEST(PersistAgent, OneNodeJobPersistsThroughTheChildAgentAndTheRestartResumesFromTheTier) {
  preflight_test::TempDir tmp;
  const std::string tier = tmp.path() + "/tier";
  auto run = [&](const std::string& restart, const std::string& local) {
    std::vector<std::string> env = {"SLURM_JOB_ID=5", "SLURM_RESTART_COUNT=" + restart, "SLURMD_NODENAME=n1",
                                    "SLURM_JOB_NODELIST=n1", "PREFLIGHT_CKPT_LOCAL="};
    return RunCommand({PF_RUN_BINARY, "--set", "state_dir=" + tmp.path() + "/state", "--set", "textfile_dir=",
                       "--set", "ckpt_interval=1s", "--checkpoint-dir", local, "--persist-to", tier, "--",
                       PF_TEST_APP, "--steps", "12", "--step-ms", "10", "--checkpoint-every", "4"},
                      env, 60000);
  };
  auto first = run("0", tmp.path() + "/n1");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->exit_code, 0) << first->output;
  EXPECT_NE(first->output.find("preflight: no checkpoint to resume from"), std::string::npos) << first->output;
  EXPECT_NE(first->output.find("preflight: checkpoint ckpt-12 on n1: durable on " + tier + " ("), std::string::npos)
      << first->output;
  EXPECT_TRUE(IsRegularFile(tmp.path() + "/n1/.preflight-persist.json"));  // the plan, for the epilog
  auto second = run("1", tmp.path() + "/elsewhere");
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_NE(second->output.find("preflight: resume from ckpt-12 on the shared tier (" + tier + "/ckpt-12)"),
            std::string::npos)
      << second->output;
  EXPECT_NE(second->output.find("restart 1: resuming from " + tier + "/ckpt-12"), std::string::npos) << second->output;
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

// Watch until `done` or 60 s; every line Watch said.
std::vector<std::string> WatchLines(PersistAgent& a, const std::function<bool(const std::vector<std::string>&)>& done,
                                    double bound_s = 60) {
  std::vector<std::string> lines;
  const double until = MonotonicSeconds() + bound_s;
  while (MonotonicSeconds() < until && !done(lines)) {
    std::string l = a.Watch();
    if (!l.empty()) lines.push_back(l);
    ::usleep(50 * 1000);
  }
  return lines;
}

// An agent killed (here: by itself, kill -9) is restarted kAgentRestarts
// times, each said with how it ended, then left to the epilog.
TEST(PersistAgentWatch, AKilledAgentIsRestartedThenLeftToTheEpilog) {
  preflight_test::TempDir tmp;
  const std::string count = tmp.path() + "/starts";
  auto a = PersistAgent::Start({"/bin/sh", "-c", "echo x >>" + count + "; kill -9 $$"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto lines = WatchLines(**a, [](const std::vector<std::string>& l) {
    return !l.empty() && l.back().find("not restarted again") != std::string::npos;
  });
  ASSERT_EQ(lines.size(), static_cast<size_t>(kAgentRestarts) + 1) << ::testing::PrintToString(lines);
  for (int i = 0; i < kAgentRestarts; ++i)
    EXPECT_EQ(lines[i], "preflight: run: node agent ended (killed by signal 9 (SIGKILL)); restarted (" +
                            std::to_string(i + 1) + " of " + std::to_string(kAgentRestarts) + ")");
  EXPECT_EQ(lines.back(), "preflight: run: node agent ended (killed by signal 9 (SIGKILL)) after 3 restarts: not "
                          "restarted again; the epilog makes the newest complete checkpoint durable");
  auto starts = ReadWholeFile(count);
  ASSERT_TRUE(starts.ok());
  EXPECT_EQ(std::count(starts->begin(), starts->end(), '\n'), kAgentRestarts + 1);
  EXPECT_EQ((*a)->Watch(), "");
  (*a)->Finish(1);  // nothing left to stop
}

// An agent that ends by itself with status 0 said why (nothing to do): not
// restarted. One that exits non-zero is.
TEST(PersistAgentWatch, ACleanEndIsNotRestartedAFailureIs) {
  auto ok = PersistAgent::Start({"/bin/true"});
  ASSERT_TRUE(ok.ok());
  auto none = WatchLines(**ok, [](const std::vector<std::string>&) { return false; }, 6);
  EXPECT_TRUE(none.empty()) << ::testing::PrintToString(none);
  auto bad = PersistAgent::Start({"/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(bad.ok());
  auto lines = WatchLines(**bad, [](const std::vector<std::string>& l) { return !l.empty(); });
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "preflight: run: node agent ended (exit status 3); restarted (1 of 3)");
  (*bad)->Finish(5);
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

TEST(PersistEarlierRuns, OnlyLowerRestartsOfTheSameJob) {
  EXPECT_TRUE(EarlierRunOfJob("77.0", "77.1"));
  EXPECT_TRUE(EarlierRunOfJob("77.3", "77.12"));  // numbers, not text
  EXPECT_FALSE(EarlierRunOfJob("77.1", "77.1"));  // this run: may be copying
  EXPECT_FALSE(EarlierRunOfJob("77.2", "77.1"));
  EXPECT_FALSE(EarlierRunOfJob("76.0", "77.1"));  // another job: may be running
  EXPECT_FALSE(EarlierRunOfJob("177.0", "77.1"));
  EXPECT_FALSE(EarlierRunOfJob("77", "77.1"));
  EXPECT_FALSE(EarlierRunOfJob("77.x", "77.1"));
}

// What a preemption or a killed agent left on the tier (seen on the
// cluster: system.ckpt_faults_agent left 12 partial copies): the next run
// of the job removes its earlier runs' and leaves everything else.
TEST(PersistEarlierRuns, TheNextRunRemovesItsEarlierRunsPartialCopies) {
  preflight_test::TempDir tmp;
  const std::string tier = tmp.path() + "/tier";
  for (const char* d : {"/.partial-77.0-step-20/sub", "/.partial-77.0-step-40", "/.partial-77.1-step-60",
                        "/.partial-76.0-step-20", "/step-10"})
    ASSERT_TRUE(MakeDirs(tier + d, 0700).ok());
  CkptPlan plan;
  plan.tier = tier;
  plan.run = "77.1";
  auto lines = CleanEarlierRuns(plan);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("removed 2 unfinished copies of ended runs from " + tier), std::string::npos) << lines[0];
  struct stat st;
  EXPECT_NE(::stat((tier + "/.partial-77.0-step-20").c_str(), &st), 0);
  EXPECT_NE(::stat((tier + "/.partial-77.0-step-40").c_str(), &st), 0);
  EXPECT_EQ(::stat((tier + "/.partial-77.1-step-60").c_str(), &st), 0) << "this run's own";
  EXPECT_EQ(::stat((tier + "/.partial-76.0-step-20").c_str(), &st), 0) << "another job's";
  EXPECT_EQ(::stat((tier + "/step-10").c_str(), &st), 0);
  EXPECT_TRUE(CleanEarlierRuns(plan).empty()) << "nothing left to say";
}

// A chain's earlier job: no run of its own comes to clean its last run's
// partial folders, so a later job does once slurmctld says that job ended
// (or does not know it); a job it lists as alive, one it was not asked
// about, and every one when it cannot be asked, are kept.
TEST(PersistEarlierRuns, OtherJobsPartialCopiesGoOnlyWhenSlurmctldSaysTheyEnded) {
  preflight_test::TempDir tmp;
  const std::string tier = tmp.path() + "/tier";
  for (const char* d : {"/.partial-70.2-step-20/sub", "/.partial-71.0-step-30", "/.partial-72.0-step-40",
                        "/.partial-77.0-step-50", "/.partial-77.1-step-60"})
    ASSERT_TRUE(MakeDirs(tier + d, 0700).ok());
  CkptPlan plan;
  plan.tier = tier;
  plan.run = "77.1";
  struct stat st;
  auto there = [&](const char* d) { return ::stat((tier + d).c_str(), &st) == 0; };
  // slurmctld unreachable: only this job's earlier run goes.
  std::set<std::string> asked_with;
  auto lines = CleanEarlierRuns(plan, [&](const std::set<std::string>& jobs) {
    asked_with = jobs;
    SlurmJobs s;
    s.error = "no answer within 5000 ms";
    return s;
  });
  EXPECT_EQ(asked_with, (std::set<std::string>{"70", "71", "72"})) << "this job is never asked about";
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("other jobs' unfinished copies on " + tier + " kept: slurmctld could not be asked: no answer"),
            std::string::npos) << all;
  EXPECT_FALSE(there("/.partial-77.0-step-50"));
  EXPECT_TRUE(there("/.partial-70.2-step-20") && there("/.partial-71.0-step-30") && there("/.partial-72.0-step-40"));
  // 70 ended, 71 unknown (purged after MinJobAge), 72 still running.
  lines = CleanEarlierRuns(plan, [&](const std::set<std::string>& jobs) {
    SlurmJobs s;
    s.answered = true;
    for (const auto& j : jobs) AddAnswer(&s, j, j == "72" ? JobWhere::kElsewhere : JobWhere::kGone);
    return s;
  });
  all.clear();
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("removed 2 unfinished copies of ended runs"), std::string::npos) << all;
  EXPECT_FALSE(there("/.partial-70.2-step-20"));
  EXPECT_FALSE(there("/.partial-71.0-step-30"));
  EXPECT_TRUE(there("/.partial-72.0-step-40")) << "a running job's copy";
  EXPECT_TRUE(there("/.partial-77.1-step-60")) << "this run's own";
}

}  // namespace
}  // namespace preflight
