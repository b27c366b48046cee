// The training stage's checkpoint round trip (accept_train.h,
// train_trip.cc): its rules, and the tap's two runs around a stand-in for
// preflight-run. The stand-in (a shell script written here) keeps only the
// part of preflight-run's contract the tap relies on: SIGTERM to it asks
// the command to checkpoint (SIGUSR2), and the command gets
// PREFLIGHT_CHECKPOINT_DIR and PREFLIGHT_RESUME_FROM. The real preflight-run
// runs it in system.accept.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "preflight/accept_train.h"
#include "preflight_test/temp_dir.h"
#include "tap_capture.h"

namespace preflight::accept {
namespace {

TEST(RoundTrip, TheStepACheckpointsNameCarries) {
  EXPECT_EQ(CheckpointStep("step-60"), 60);
  EXPECT_EQ(CheckpointStep("iter_0000060"), 60);
  EXPECT_EQ(CheckpointStep("global_step60"), 60);
  EXPECT_EQ(CheckpointStep("epoch3-step120"), 120);
  EXPECT_EQ(CheckpointStep("step-000"), 0);
  EXPECT_EQ(CheckpointStep("final"), -1);
  EXPECT_EQ(CheckpointStep("run-12345678901234567890"), -1) << "not a step count";
}

TEST(RoundTrip, TheShellCatchesTheCheckpointSignalOnly) {
  EXPECT_EQ(RoundTripShell("python3 train.py", "USR2"),
            (std::vector<std::string>{"/bin/sh", "-c", "trap : USR2; python3 train.py"}));
  EXPECT_EQ(RoundTripShell("./t.sh", "none")[2], "./t.sh");
  EXPECT_EQ(RoundTripShell("./t.sh", "USR2; rm -rf ~")[2], "./t.sh") << "a name, or nothing";
}

TEST(RoundTrip, PreflightRunIsToldNoRequeueNoTierAndTheGrace) {
  auto a = RoundTripRunner("/usr/bin/preflight-run", {"--config", "/etc/site.conf"}, 300);
  std::string all;
  for (const auto& w : a) all += w + " ";
  EXPECT_EQ(all, "/usr/bin/preflight-run --config /etc/site.conf --requeue no --persist-to none --stall-restart no "
                 "--watch-gpus 0 --grace 30s --kill-wait 5s --checkpoint-dir ");
  EXPECT_EQ(CheckpointGrace(30), 10);
  EXPECT_EQ(CheckpointGrace(3600), 60);
  EXPECT_EQ(RunnerGrace(30), 20);
  EXPECT_EQ(ResumeSeconds(30), 15);
  EXPECT_EQ(ResumeSeconds(300), 60);
  auto d = RoundTripDir("/scratch/%n", "n3", "77-1");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d, "/scratch/n3/.preflight-accept-n3-77-1-train");
  EXPECT_FALSE(RoundTripDir("/scratch/%n", "../etc", "77-1").ok()) << "a node name that is not one";
}

std::string Capture(const TrainTapArgs& a, int* rc = nullptr) { return testing::CaptureTap(a, rc); }

// The newest step-N folder with its COMPLETE marker.
Expected<std::string> Newest(const std::string& dir) {
  std::string best;
  long n = -1;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("step-", 0) != 0 || ::access((dir + "/" + name + "/COMPLETE").c_str(), F_OK) != 0) continue;
      if (CheckpointStep(name) > n) { n = CheckpointStep(name); best = name; }
    }
    ::closedir(d);
  }
  return best;
}

// The stand-in runner (DIR -- COMMAND...) and a command that trains, saves
// on SIGUSR2 (unless `saves` is false) and resumes from its checkpoint.
struct Trip {
  preflight_test::TempDir tmp{"trip"};
  std::string runner = tmp.path() + "/runner", dir = tmp.path() + "/ckpt";
  explicit Trip(bool saves = true) {
    std::ofstream(runner) << "#!/bin/sh\n"
                             "dir=$1; shift 2\n"
                             "export PREFLIGHT_CHECKPOINT_DIR=$dir\n"
                             "last=$(ls \"$dir\" | grep '^step-' | sort -t- -k2 -n | tail -1)\n"
                             "[ -n \"$last\" ] && export PREFLIGHT_RESUME_FROM=$dir/$last\n"
                             "\"$@\" &\n"
                             "child=$!\n"
                             "trap 'kill -USR2 $child; wait $child; exit 0' TERM\n"
                             "wait $child\n";
    ::chmod(runner.c_str(), 0755);
  }
  TrainTapArgs Args(bool resume, bool saves = true) {
    TrainTapArgs a;
    std::string save = saves ? "mkdir -p $PREFLIGHT_CHECKPOINT_DIR/step-$n; : > $PREFLIGHT_CHECKPOINT_DIR/step-$n/COMPLETE; "
                             : "";
    a.cmd = {"/bin/sh", "-c",
             "n=0; [ -n \"$PREFLIGHT_RESUME_FROM\" ] && n=${PREFLIGHT_RESUME_FROM##*-} && echo resumed at step $n; "
             "trap '" + save + "exit 0' USR2; "
             "while :; do n=$((n+1)); echo step $n loss 0.5; sleep 0.05; done"};
    a.seconds = resume ? 30 : 1.5;
    a.grace = 20;
    a.trip.runner = {runner};
    a.trip.dir = dir;
    a.trip.newest = Newest;
    a.trip.resume = resume;
    return a;
  }
};

TEST(RoundTrip, TheTapSavesThenResumesFromTheNewestAndRemovesTheFolder) {
  Trip t;
  TapRecord first = ReadTap(Capture(t.Args(false)));
  EXPECT_EQ(first.end, "bound");
  ASSERT_FALSE(first.ckpt_saved.empty()) << "saved on SIGUSR2";
  long c = CheckpointStep(first.ckpt_saved);
  EXPECT_GT(c, 0);
  EXPECT_EQ(::access(t.dir.c_str(), F_OK), 0) << "kept for the resume run";
  TapRecord second = ReadTap(Capture(t.Args(true)));
  EXPECT_EQ(second.ckpt_from, first.ckpt_saved);
  ASSERT_FALSE(second.steps.empty());
  EXPECT_EQ(second.steps.front().second, c) << "the 'resumed at step N' line, without a loss";
  EXPECT_EQ(second.first_loss_step, c + 1) << "the first step trained";
  EXPECT_EQ(second.end, "bound") << "stopped at its first step, well before its 30 s";
  EXPECT_NE(::access(t.dir.c_str(), F_OK), 0) << "removed";

  // A node whose resume cannot be had: its folder removed, nothing run.
  TapRecord again = ReadTap(Capture(t.Args(false)));
  ASSERT_FALSE(again.ckpt_saved.empty());
  TrainTapArgs clean = t.Args(false);
  clean.trip.clean = true;
  TapRecord cleaned = ReadTap(Capture(clean));
  EXPECT_TRUE(cleaned.steps.empty());
  EXPECT_NE(::access(t.dir.c_str(), F_OK), 0) << "removed";
}

TEST(RoundTrip, ACommandThatNeverSavesLeavesNothingAndAFolderThatCannotBeMadeOrIsTakenIsSaid) {
  Trip t;
  TapRecord r = ReadTap(Capture(t.Args(false, false)));
  EXPECT_TRUE(r.ckpt_tried);
  EXPECT_EQ(r.ckpt_saved, "");
  EXPECT_NE(::access(t.dir.c_str(), F_OK), 0) << "nothing to resume: removed at once";

  std::ofstream(t.tmp.path() + "/file") << "x";
  TrainTapArgs a = t.Args(false);
  a.trip.dir = t.tmp.path() + "/file/ckpt";
  TapRecord off = ReadTap(Capture(a));
  EXPECT_NE(off.ckpt_off.find("cannot make the checkpoint directory"), std::string::npos) << off.ckpt_off;
  EXPECT_FALSE(off.steps.empty()) << "the training run goes on without the round trip";

  // A folder of that name that exists already (another user's in a shared
  // path, a link) is not this run's: not used, not removed.
  ASSERT_EQ(::symlink(t.tmp.path().c_str(), t.dir.c_str()), 0);
  TapRecord taken = ReadTap(Capture(t.Args(false)));
  EXPECT_NE(taken.ckpt_off.find("File exists (not made by this run: left alone)"), std::string::npos)
      << taken.ckpt_off;
  struct stat st;
  EXPECT_EQ(::lstat(t.dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "left as it was";
}

TEST(RoundTrip, ThroughASharedTierOnePreflightRunIsAroundTheSrunWithEveryNodesFolder) {
  auto a = TierRunner("/usr/bin/preflight-run", {"--config", "/etc/site.conf"}, 30, "/tier/.preflight-accept-77-1-tier",
                      RoundTripDirPattern("/scratch/%n", "77-1"));
  std::string all;
  for (const auto& w : a) all += w + " ";
  EXPECT_EQ(all, "timeout --foreground --kill-after=90 30 /usr/bin/preflight-run --config /etc/site.conf --requeue no "
                 "--persist-to /tier/.preflight-accept-77-1-tier --stall-restart no --watch-gpus 0 --grace 10s "
                 "--kill-wait 5s --checkpoint-dir /scratch/%n/.preflight-accept-%n-77-1-train -- ")
      << "SIGTERM to preflight-run alone at the bound; SIGKILL after its grace and its agent's last round";
  EXPECT_EQ(RoundTripTier("/tier/pfuser", "77-1"), "/tier/pfuser/.preflight-accept-77-1-tier");
  // preflight-run expands %n on each node to the folder the tap made there.
  std::string pattern = RoundTripDirPattern("/scratch/%n", "77-1");
  for (size_t p; (p = pattern.find("%n")) != std::string::npos;) pattern.replace(p, 2, "n3");
  EXPECT_EQ(pattern, *RoundTripDir("/scratch/%n", "n3", "77-1"));
}

TEST(RoundTrip, ThroughASharedTierTheTapMakesItsFolderOnceAndRelaysTheSignalsFromSrun) {
  preflight_test::TempDir tmp("relay");
  TrainTapArgs m;
  m.trip.dir = tmp.path() + "/ckpt";
  m.trip.make = true;
  TapRecord made = ReadTap(Capture(m));
  EXPECT_TRUE(made.ckpt_made);
  EXPECT_TRUE(made.steps.empty()) << "nothing run";
  TapRecord again = ReadTap(Capture(m));
  EXPECT_FALSE(again.ckpt_made);
  // A node where the folder cannot be had (its site config, its name): the
  // make and clean steps say so and never run the command.
  TrainTapArgs off = m;
  off.cmd = {"/bin/sh", "-c", "echo step 1 loss 0.5; sleep 30"};
  off.seconds = 30;
  off.trip.off = "site config: /etc/preflight/preflight.conf:3: key 'x': unknown";
  for (bool clean : {false, true}) {
    off.trip.make = !clean;
    off.trip.clean = clean;
    TapRecord none = ReadTap(Capture(off));
    EXPECT_EQ(none.ckpt_off, off.trip.off);
    EXPECT_TRUE(none.steps.empty()) << "the command did not run";
    EXPECT_EQ(none.end, "");
  }
  EXPECT_NE(again.ckpt_off.find("File exists (not made by this run: left alone)"), std::string::npos)
      << again.ckpt_off;

  // The command plays srun: at step 5 it sends the tap the checkpoint
  // signal, which the tap passes on to the command's process group (its
  // trap saves step-5 in its node's folder); once saved, SIGTERM, passed on
  // as well, ends it as the bound does.
  TrainTapArgs a;
  a.cmd = {"/bin/sh", "-c",
           "n=0; saved=; trap 'mkdir -p $PREFLIGHT_CHECKPOINT_DIR/step-$n; : > $PREFLIGHT_CKPT_LOCAL/step-$n/COMPLETE; "
           "saved=1' USR2; trap 'exit 0' TERM; "
           "while :; do n=$((n+1)); [ -n \"$saved\" ] && { saved=; kill -TERM $PPID; }; echo step $n loss 0.5; "
           "[ $n = 5 ] && kill -USR2 $PPID; sleep 0.05; done"};
  a.seconds = 30;
  a.grace = 10;
  a.trip.dir = m.trip.dir;
  a.trip.newest = Newest;
  a.trip.relay_signal = SIGUSR2;
  TapRecord run = ReadTap(Capture(a));
  EXPECT_EQ(run.ckpt_saved, "step-5") << "the relayed signal reached the command";
  EXPECT_EQ(run.end, "bound") << "the relayed SIGTERM is the bound";
  EXPECT_LT(run.steps.back().second, 100) << "ended by the relayed SIGTERM, not its own bound";
  EXPECT_EQ(::access((m.trip.dir + "/step-5/COMPLETE").c_str(), F_OK), 0) << "kept: removed by a step of its own";

  // The resume run: where preflight-run (on the batch node) said to resume.
  a.trip.resume = true;
  a.cmd = {"/bin/sh", "-c", "echo resumed at step 5; n=5; while :; do n=$((n+1)); echo step $n loss 0.5; sleep 0.05; done"};
  ::setenv("PREFLIGHT_RESUME_FROM", "/tier/.preflight-accept-77-1-tier/step-5", 1);
  TapRecord resumed = ReadTap(Capture(a));
  ::unsetenv("PREFLIGHT_RESUME_FROM");
  EXPECT_EQ(resumed.ckpt_from, "/tier/.preflight-accept-77-1-tier/step-5") << "the whole path";
  EXPECT_EQ(resumed.first_loss_step, 6);
  EXPECT_EQ(resumed.end, "bound") << "stopped at its first step";
}

}  // namespace
}  // namespace preflight::accept
