// The acceptance run's training stage (run_train.cc) and its verdicts
// (report_judge.cc: JudgeTrain), through RunAccept with a runner that
// answers the tap's srun step as srun --label would; every other step
// answers nothing.
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight_test/temp_dir.h"

namespace preflight::accept {
namespace {

// Task K's tap output: samples every 1.5 s at `rate` steps/s, then `end`.
std::string TapOf(int task, const std::string& node, double rate, const std::string& end,
                  const std::string& extra = "") {
  std::string k = std::to_string(task) + ": ";
  std::string o = k + "#accept-train-node " + node + "\n";
  for (int i = 1; i <= 20 && rate > 0; ++i) {
    char b[96];
    std::snprintf(b, sizeof b, "#accept-train %.3f %ld 0.5\n", 1.5 * i, static_cast<long>(rate * 1.5 * i));
    o += k + b;
  }
  if (!extra.empty()) o += k + extra + "\n";
  return o + k + "#accept-train-end " + end + "\n";
}

struct TrainCase {
  RunOptions o;
  std::vector<std::string> tap_calls, resume_calls, clean_calls, make_calls;
  std::string tap_output, resume_output, make_output;
  std::string down;  // the node slurmctld calls down once the training step ran
  Report Go() {
    auto run = [this](const std::vector<std::string>& argv, unsigned) {
      std::string cmd;
      for (const auto& a : argv) cmd += a + " ";
      ProcessResult p;
      p.exit_code = 0;
      if (cmd.find("--train-clean") != std::string::npos) {
        clean_calls.push_back(cmd);
      } else if (cmd.find("--train-make") != std::string::npos) {
        make_calls.push_back(cmd);
        p.output = make_output;
      } else if (cmd.find("--train-resume") != std::string::npos) {
        resume_calls.push_back(cmd);
        p.output = resume_output;
      } else if (cmd.find("--train-tap") != std::string::npos) {
        tap_calls.push_back(cmd);
        p.output = tap_output;
      } else if (cmd.find("slurm nodes") != std::string::npos && !tap_calls.empty() && !down.empty()) {
        p.output = "{\"nodes\":[{\"name\":\"" + down + "\",\"state\":\"DOWN+NOT_RESPONDING\"}]}\n";
      }
      return p;
    };
    return RunAccept(o, run, nullptr);
  }
};

const Figure* TrainFigure(const Report& r, const std::string& node) {
  for (const auto& f : r.figures)
    if (f.stage == "train" && f.node == node) return &f;
  return nullptr;
}

TEST(AcceptTrain, ASlowNodeIsNamedAndTheOthersPass) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3", "n4"};
  t.o.train = "python train.py --steps 100000";
  t.tap_output = TapOf(0, "n1", 10, "bound 300 step 300") + TapOf(1, "n2", 10, "bound 300 step 300") +
                 TapOf(2, "n3", 10, "bound 300 step 300") + TapOf(3, "n4", 3, "bound 90 step 90");
  Report r = t.Go();
  ASSERT_EQ(t.tap_calls.size(), 1u);
  EXPECT_NE(t.tap_calls[0].find("--ntasks-per-node=1"), std::string::npos) << t.tap_calls[0];
  EXPECT_NE(t.tap_calls[0].find("--train python train.py --steps 100000 --train-seconds 30"), std::string::npos)
      << "quick: 30 s; " << t.tap_calls[0];
  ASSERT_EQ(r.train.nodes.size(), 4u);
  for (const char* n : {"n1", "n2", "n3"}) {
    const Figure* f = TrainFigure(r, n);
    ASSERT_TRUE(f) << n;
    EXPECT_EQ(f->verdict, Verdict::kPass) << f->reason;
    EXPECT_NEAR(f->value, 10, 0.5);
  }
  const Figure* slow = TrainFigure(r, "n4");
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->verdict, Verdict::kFail);
  EXPECT_NE(slow->reason.find("below 0.80 of the allocation's median"), std::string::npos) << slow->reason;
  EXPECT_EQ(r.verdict, Verdict::kFail);
  bool named = false;
  for (const auto& line : r.reasons) named = named || line.find("n4") != std::string::npos;
  EXPECT_TRUE(named) << SummaryText(r);
  EXPECT_NE(ReportHtml(r).find("data-plot=\"train-rate\" data-points=\"76\""), std::string::npos)
      << "19 samples a node, four nodes";
}

TEST(AcceptTrain, EveryWayOfGoingWrongIsALineOfItsOwn) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3", "n4", "n5", "n6"};
  t.o.train = "./smoke.sh";
  t.tap_output = TapOf(0, "n1", 0, "exit 1 2 ImportError: No module named deepspeed") +
                 TapOf(1, "n2", 0, "bound 5000 loading shard 4999") +
                 TapOf(2, "n3", 10, "bound 300 step 300", "#accept-train 30.5 301 nan") +
                 TapOf(3, "n5", 10, "bound 300 step 300",
                       "#accept-train-error 12.000 [Rank 3] Watchdog caught collective operation timeout") +
                 TapOf(5, "n6", 10, "bound 300 step 300");
  // n4 says nothing: lost (slurmctld: DOWN+NOT_RESPONDING).
  t.down = "n4";
  Report r = t.Go();
  auto reason = [&](const char* n) { const Figure* f = TrainFigure(r, n); return f ? f->reason : std::string("none"); };
  EXPECT_NE(reason("n1").find("ended with exit 1 after 2 lines (last line: ImportError: No module named deepspeed)"),
            std::string::npos) << reason("n1");
  EXPECT_NE(reason("n2").find("no progress line in 5000 lines"), std::string::npos) << reason("n2");
  EXPECT_NE(reason("n3").find("NaN"), std::string::npos) << reason("n3");
  EXPECT_NE(reason("n5").find("Watchdog caught collective operation timeout"), std::string::npos) << reason("n5");
  EXPECT_NE(reason("n4").find("never ended"), std::string::npos) << reason("n4");
  EXPECT_EQ(r.lost_nodes.count("n4"), 1u) << "slurmctld says down: lost";
  const Figure* ok = TrainFigure(r, "n6");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->verdict, Verdict::kPass) << ok->reason;
}

TEST(AcceptTrain, ADipIsAWarningAndASkippedStageIsNoFinding) {
  TrainCase t;
  t.o.nodes = {"n1", "n2"};
  t.o.train = "x";
  std::string dip = "0: #accept-train-node n1\n";
  long step = 0;
  for (int i = 1; i <= 20; ++i) {
    step += i == 10 ? 3 : 15;  // 10 steps/s, one sample at 2
    dip += "0: #accept-train " + std::to_string(1.5 * i) + " " + std::to_string(step) + " 0.1\n";
  }
  t.tap_output = dip + "0: #accept-train-end bound 300 x\n" + TapOf(1, "n2", 10, "bound 300 x");
  Report r = t.Go();
  const Figure* f = TrainFigure(r, "n1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->verdict, Verdict::kWarn) << f->reason;
  EXPECT_NE(f->reason.find("not steady"), std::string::npos) << f->reason;

  TrainCase none;
  none.o.nodes = {"n1", "n2"};
  none.o.train_skip = "--train none";
  Report s = none.Go();
  EXPECT_TRUE(none.tap_calls.empty());
  EXPECT_EQ(s.train.error, "--train none");
  for (const auto& st : s.stages)
    if (st.name == "train") {
      EXPECT_EQ(st.verdict, Verdict::kSkip);
    }
}

TEST(AcceptTrain, ANodeWhoseProgressStoppedIsAStall) {
  TrainCase t;
  t.o.nodes = {"n1", "n2"};
  t.o.train = "x";
  std::string hung = "0: #accept-train-node n1\n";
  for (int i = 1; i <= 8; ++i)  // 10 steps/s until 12 s of the 30 s run, then nothing
    hung += "0: #accept-train " + std::to_string(1.5 * i) + " " + std::to_string(15 * i) + " 0.1\n";
  t.tap_output = hung + "0: #accept-train-end bound 120 step 120\n" + TapOf(1, "n2", 10, "bound 300 x");
  Report r = t.Go();
  const Figure* f = TrainFigure(r, "n1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->verdict, Verdict::kFail);
  EXPECT_EQ(f->reason, "n1: stalled: no progress line in the last 18 s of the run (the last: step 120 at 12 s)");
  const Figure* ok = TrainFigure(r, "n2");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->verdict, Verdict::kPass) << ok->reason << ": its last sample at 30 s";
}

TEST(AcceptTrain, GpuUtilisationAndPowerAreRecordedAndStarvedGpusWarn) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3"};
  t.o.train = "x";
  auto gpu = [](int task, double util) {
    std::string k = std::to_string(task) + ": ";
    return k + "#accept-train-gpu 1.000 8 " + std::to_string(util) + " 5600.0\n" + k + "#accept-train-gpu 2.000 8 " +
           std::to_string(util) + " 5000.0\n";
  };
  t.tap_output = TapOf(0, "n1", 10, "bound 300 x", gpu(0, 96).substr(3)) + gpu(0, 96) +
                 TapOf(1, "n2", 10, "bound 300 x") + gpu(1, 21) +
                 TapOf(2, "n3", 10, "bound 300 x", "#accept-train-gpu-off libnvidia-ml.so.1: cannot open shared object file");
  Report r = t.Go();
  ASSERT_EQ(r.train.nodes.size(), 3u);
  const TrainNode& n1 = r.train.nodes[0];
  EXPECT_EQ(n1.gpus, 8);
  EXPECT_NEAR(n1.gpu_util, 96, 0.01);
  EXPECT_NEAR(n1.gpu_power_w, (5600 + 5000 + 5600 + 5000) / 4.0, 0.01);
  EXPECT_EQ(TrainFigure(r, "n1")->verdict, Verdict::kPass);
  const Figure* starved = TrainFigure(r, "n2");
  ASSERT_TRUE(starved);
  EXPECT_EQ(starved->verdict, Verdict::kWarn);
  EXPECT_NE(starved->reason.find("GPUs underused: mean utilisation 21% of 8 GPU(s), below 50%"), std::string::npos)
      << starved->reason;
  EXPECT_EQ(r.train.nodes[2].gpus, 0);
  EXPECT_EQ(r.train.nodes[2].gpu_note, "libnvidia-ml.so.1: cannot open shared object file");
  EXPECT_EQ(TrainFigure(r, "n3")->verdict, Verdict::kPass) << "no GPUs to judge: the step rate decides";
  std::string html = ReportHtml(r);
  EXPECT_NE(html.find("96% of 8"), std::string::npos);
  EXPECT_NE(html.find("5300 W"), std::string::npos);
}

TEST(AcceptTrain, NodesThatFailTheSameWayAreOneFinding) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3"};
  t.o.train = "./smoke.sh";
  t.tap_output = TapOf(0, "n1", 0, "exit 3 1 no such model: gpt-7") + TapOf(1, "n2", 0, "exit 3 1 no such model: gpt-7") +
                 TapOf(2, "n3", 10, "bound 300 x");
  Report r = t.Go();
  size_t lines = 0;
  for (const auto& why : r.reasons)
    if (why.find("training") != std::string::npos) {
      ++lines;
      EXPECT_EQ(why, "fail: training: the training command ended with exit 3 (last line: no such model: gpt-7) on n[1-2]");
    }
  EXPECT_EQ(lines, 1u) << SummaryText(r);
}

const Figure* TripFigure(const Report& r, const std::string& node) {
  for (const auto& f : r.figures)
    if (f.stage == "train" && f.node == node && f.name == "checkpoint resume") return &f;
  return nullptr;
}

// Task K's resume run: where it resumed from and its first lines.
std::string ResumeOf(int task, const std::string& node, const std::string& from, const std::string& lines,
                     const std::string& end = "bound 3 x") {
  std::string k = std::to_string(task) + ": ";
  std::string o = k + "#accept-train-node " + node + "\n" + k + "#accept-train-ckpt from " + from + "\n";
  std::istringstream in(lines);
  for (std::string l; std::getline(in, l);) o += k + l + "\n";
  return o + k + "#accept-train-end " + end + "\n";
}

TEST(AcceptTrain, TheCheckpointRoundTripResumesOnTheSameNodesAndJudgesWhereItWentOn) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3", "n4", "n5"};
  t.o.train = "./smoke.sh";
  t.o.storage_paths = {"/scratch/%n"};
  t.o.tag = "77-1";
  const std::string saved = "#accept-train-ckpt saved step-40";
  t.tap_output = TapOf(0, "n1", 10, "bound 300 x", saved) + TapOf(1, "n2", 10, "bound 300 x", saved) +
                 TapOf(2, "n3", 10, "bound 300 x", "#accept-train-ckpt saved -") +
                 TapOf(3, "n4", 10, "bound 300 x", saved) + TapOf(4, "n5", 10, "bound 300 x", saved);
  // n1 goes on at step 41 (after a line that names step 40 without a
  // loss); n2 starts over; n4 prints nothing it could read; n5 is lost.
  t.resume_output = ResumeOf(0, "n1", "step-40", "#accept-train 0.100 40 -\n#accept-train 0.200 41 0.5") +
                    ResumeOf(1, "n2", "step-40", "#accept-train 0.100 1 9.5") + ResumeOf(2, "n3", "-", "") +
                    ResumeOf(3, "n4", "step-40", "", "exit 1 1 FileNotFoundError: step-40/model.pt");
  Report r = t.Go();
  ASSERT_EQ(t.tap_calls.size(), 1u);
  EXPECT_NE(t.tap_calls[0].find("--train-dir /scratch/%n --tag 77-1"), std::string::npos) << t.tap_calls[0];
  ASSERT_EQ(t.resume_calls.size(), 1u) << "one resume step for the whole allocation";
  EXPECT_NE(t.resume_calls[0].find("--nodelist=n1,n2,n3,n4,n5 --ntasks-per-node=1"), std::string::npos) << "the same nodes, the same ranks: "
                                                                           << t.resume_calls[0];
  EXPECT_NE(t.resume_calls[0].find("--train-seconds 15 --train-resume --train-dir /scratch/%n --tag 77-1"), std::string::npos)
      << t.resume_calls[0];
  EXPECT_EQ(r.train.resume_seconds, 15);
  const Figure* ok = TripFigure(r, "n1");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->verdict, Verdict::kPass) << ok->reason;
  EXPECT_EQ(ok->value, 41);
  EXPECT_EQ(ok->reference, 40);
  auto reason = [&](const char* n) { const Figure* f = TripFigure(r, n); return f ? f->reason : std::string("none"); };
  EXPECT_EQ(reason("n2"), "n2: the resumed run went back before its checkpoint: step 1 after step-40");
  EXPECT_EQ(TripFigure(r, "n3")->verdict, Verdict::kWarn);
  EXPECT_NE(reason("n3").find("wrote no complete checkpoint"), std::string::npos) << reason("n3");
  EXPECT_NE(reason("n4").find("printed no progress line in 15 s (ended: exit 1) (last line: FileNotFoundError"),
            std::string::npos) << reason("n4");
  EXPECT_NE(reason("n5").find("never ended there"), std::string::npos) << reason("n5");
  std::string json = ReportJson(r);
  EXPECT_NE(json.find("\"saved_step\": 40,\n          \"resumed\": true,\n          \"from\": \"step-40\",\n          "
                      "\"first_step\": 15,\n          \"resume_step\": 41,"),
            std::string::npos) << json.substr(json.find("\"checkpoint\""), 300);
  EXPECT_NE(ReportHtml(r).find("step-40 &rarr; step 41"), std::string::npos);
}

TEST(AcceptTrain, ANodeLostInTheRunMeansNoResumeTheOthersFoldersRemovedAndSaid) {
  TrainCase t;
  t.o.nodes = {"n1", "n2", "n3"};
  t.o.train = "./smoke.sh";
  t.o.storage_paths = {"/scratch"};
  const std::string saved = "#accept-train-ckpt saved step-40";
  t.tap_output = TapOf(0, "n1", 10, "bound 300 x", saved) + TapOf(2, "n3", 10, "bound 300 x", saved);
  t.down = "n2";
  Report r = t.Go();
  EXPECT_TRUE(t.resume_calls.empty()) << "n3 would resume as rank 1";
  ASSERT_EQ(t.clean_calls.size(), 1u);
  EXPECT_NE(t.clean_calls[0].find("--nodelist=n1,n3 "), std::string::npos) << t.clean_calls[0];
  for (const char* n : {"n1", "n3"}) {
    const Figure* f = TripFigure(r, n);
    ASSERT_TRUE(f) << n;
    EXPECT_EQ(f->verdict, Verdict::kWarn);
    EXPECT_NE(f->reason.find("not resumed: n2 lost in the training run"), std::string::npos) << f->reason;
  }
  bool said = false;
  for (const auto& st : r.stages)
    for (const auto& note : st.notes) said = said || note.find("their folders stay in /scratch") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(AcceptTrain, NoResumeRunWhenNoNodeSavedOrNoFolderWasGiven) {
  TrainCase t;
  t.o.nodes = {"n1", "n2"};
  t.o.train = "./smoke.sh";
  t.o.storage_paths = {"/scratch"};
  t.tap_output = TapOf(0, "n1", 10, "bound 300 x", "#accept-train-ckpt saved -") +
                 TapOf(1, "n2", 10, "bound 300 x", "#accept-train-ckpt off cannot make the checkpoint directory: EROFS");
  Report r = t.Go();
  EXPECT_TRUE(t.resume_calls.empty());
  EXPECT_EQ(r.train.resume_seconds, 0);
  EXPECT_NE(TripFigure(r, "n2")->reason.find("no checkpoint round trip: cannot make"), std::string::npos);
  for (const auto& st : r.stages)
    if (st.name == "train") {
      EXPECT_EQ(st.verdict, Verdict::kWarn) << SummaryText(r);
    }

  TrainCase plain;  // no storage path: no folder, no round trip, no figure
  plain.o.nodes = {"n1"};
  plain.o.train = "./smoke.sh";
  plain.tap_output = TapOf(0, "n1", 10, "bound 300 x");
  Report p = plain.Go();
  EXPECT_EQ(plain.tap_calls[0].find("--train-dir"), std::string::npos);
  EXPECT_EQ(TripFigure(p, "n1"), nullptr);
}

// Through a shared tier: the tier's folder, made by the run in a temporary
// directory; every node's folder made by the tap step (`off`: that node's
// answer instead); n1 had a newer checkpoint on its own disk than the
// durable one.
struct TierCase : TrainCase {
  preflight_test::TempDir tmp{"tier"};
  std::string dir, durable = "step-40", asked;
  explicit TierCase(const std::string& off_n2 = "") {
    o.nodes = {"n1", "n2", "n3"};
    o.train = "./smoke.sh";
    o.storage_paths = {"/scratch/%n"};
    o.tag = "77-1";
    o.train_tier = tmp.path() + "/tier";
    o.preflight_run = "/usr/bin/preflight-run";
    dir = o.train_tier + "/.preflight-accept-77-1-tier";
    o.newest_durable = [this](const std::string& d) -> Expected<std::string> {
      asked = d;
      return durable;
    };
    for (int k = 0; k < 3; ++k) {
      std::string n = "n" + std::to_string(k + 1), p = std::to_string(k) + ": ";
      make_output += p + "#accept-train-node " + n + "\n" + p + "#accept-train-ckpt " +
                     (n == "n2" && !off_n2.empty() ? "off " + off_n2 : "made /scratch/" + n) + "\n";
      tap_output += TapOf(k, n, 10, "bound 300 x", n == "n1" ? "#accept-train-ckpt saved step-60"
                                                             : "#accept-train-ckpt saved step-40");
    }
  }
};

TEST(AcceptTrain, ThroughASharedTierOnePreflightRunHoldsTheRunAndTheResumeMustComeFromTheTier) {
  TierCase t;
  const std::string on_tier = t.dir + "/step-40";
  t.resume_output = ResumeOf(0, "n1", on_tier, "#accept-train 0.100 40 -\n#accept-train 0.200 41 0.5") +
                    ResumeOf(1, "n2", on_tier, "#accept-train 0.200 41 0.5") +
                    ResumeOf(2, "n3", "/scratch/n3/.preflight-accept-n3-77-1-train/step-40", "#accept-train 0.200 41 0.5");
  Report r = t.Go();
  ASSERT_EQ(t.make_calls.size(), 1u);
  ASSERT_EQ(t.tap_calls.size(), 1u);
  EXPECT_EQ(t.tap_calls[0].rfind("timeout --foreground --kill-after=90 30 /usr/bin/preflight-run --requeue no --persist-to " +
                                     t.dir + " ",
                                 0),
            0u)
      << t.tap_calls[0];
  EXPECT_NE(t.tap_calls[0].find("--checkpoint-dir /scratch/%n/.preflight-accept-%n-77-1-train -- srun "),
            std::string::npos) << t.tap_calls[0];
  EXPECT_NE(t.tap_calls[0].find("--train-relay"), std::string::npos);
  ASSERT_EQ(t.resume_calls.size(), 1u);
  EXPECT_EQ(t.resume_calls[0].rfind("timeout --foreground --kill-after=90 15 /usr/bin/preflight-run ", 0), 0u)
      << t.resume_calls[0];
  EXPECT_NE(t.resume_calls[0].find("--train-resume --train-relay"), std::string::npos) << t.resume_calls[0];
  EXPECT_EQ(t.asked, t.dir);
  EXPECT_EQ(t.clean_calls.size(), 1u) << "every node's folder removed at the end";
  EXPECT_NE(::access(t.dir.c_str(), F_OK), 0) << "the tier's folder removed";
  EXPECT_EQ(r.train.tier, t.dir);
  for (const auto& n : r.train.nodes) EXPECT_EQ(n.ckpt.saved, "step-40") << "the durable one, every node's part";
  EXPECT_EQ(r.train.nodes[0].ckpt.saved_local, "step-60");
  const Figure* n1 = TripFigure(r, "n1");
  ASSERT_TRUE(n1);
  EXPECT_EQ(n1->verdict, Verdict::kPass) << n1->reason;
  EXPECT_NE(n1->reason.find("saved step-40 (durable on the shared tier), resumed at step 41"), std::string::npos)
      << n1->reason;
  EXPECT_EQ(TripFigure(r, "n2")->verdict, Verdict::kPass);
  const Figure* n3 = TripFigure(r, "n3");
  EXPECT_EQ(n3->verdict, Verdict::kFail);
  EXPECT_NE(n3->reason.find("did not resume from the shared tier: /scratch/n3/"), std::string::npos) << n3->reason;
  EXPECT_EQ(n3->rule, "training: the resume run did not resume from the shared tier") << "one finding, whatever the path";
  EXPECT_NE(ReportJson(r).find("\"tier\": \"" + t.dir + "\""), std::string::npos);
}

TEST(AcceptTrain, ThroughASharedTierNothingDurableFailsAndAFolderTakenKeepsTheRoundTripOnEachNode) {
  TierCase none;
  none.durable = "";
  Report r = none.Go();
  EXPECT_TRUE(none.resume_calls.empty()) << "nothing to resume from";
  const Figure* f = TripFigure(r, "n2");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->verdict, Verdict::kFail);
  EXPECT_NE(f->reason.find("no checkpoint became durable on the shared tier " + none.dir +
                           " (complete on this node's disk: step-40)"),
            std::string::npos) << f->reason;
  EXPECT_EQ(f->rule, "training: no checkpoint became durable on the shared tier " + none.dir);
  bool one = false;
  for (const auto& line : r.reasons) one = one || line.find("durable on the shared tier " + none.dir + " on n[1-3]") != std::string::npos;
  EXPECT_TRUE(one) << "one finding for the three nodes: " << SummaryText(r);
  EXPECT_EQ(none.clean_calls.size(), 1u);
  EXPECT_NE(::access(none.dir.c_str(), F_OK), 0);

  TierCase taken("cannot make the checkpoint directory /scratch/n2/x: File exists (not made by this run: left alone)");
  Report t = taken.Go();
  ASSERT_EQ(taken.clean_calls.size(), 1u) << "the folders this run made, and only those";
  EXPECT_NE(taken.clean_calls[0].find("--nodelist=n1,n3 "), std::string::npos) << taken.clean_calls[0];
  ASSERT_EQ(taken.tap_calls.size(), 1u);
  EXPECT_EQ(taken.tap_calls[0].find("preflight-run"), std::string::npos) << "each node's own round trip";
  EXPECT_EQ(taken.tap_calls[0].find("--train-relay"), std::string::npos);
  EXPECT_TRUE(t.train.tier.empty());
  EXPECT_NE(::access(taken.dir.c_str(), F_OK), 0);
  bool said = false;
  for (const auto& st : t.stages)
    for (const auto& note : st.notes)
      said = said || note.find("stays on each node's disk: n2: cannot make") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(AcceptTrain, AFrameworksCheckpointConventionGoesToPreflightRunThroughTheTierOnly) {
  TierCase t;
  t.o.train_convention = "dcp";
  t.resume_output = ResumeOf(0, "n1", t.dir + "/step-40", "#accept-train 0.200 41 0.5");
  Report r = t.Go();
  ASSERT_EQ(t.tap_calls.size(), 1u);
  EXPECT_NE(t.tap_calls[0].find("--checkpoint-convention dcp -- srun "), std::string::npos) << t.tap_calls[0];
  ASSERT_EQ(t.resume_calls.size(), 1u);
  EXPECT_NE(t.resume_calls[0].find("--checkpoint-convention dcp -- srun "), std::string::npos) << t.resume_calls[0];
  EXPECT_EQ(r.train.convention, "dcp");
  EXPECT_NE(ReportJson(r).find("\"convention\": \"dcp\""), std::string::npos);
  EXPECT_NE(TripFigure(r, "n1")->reproduce.find("--persist-to TIER --checkpoint-convention dcp -- srun"),
            std::string::npos) << TripFigure(r, "n1")->reproduce;

  // Without a shared tier one node's disk cannot say that rank 0's metadata
  // and every part are there: no round trip, said.
  TrainCase plain;
  plain.o.nodes = {"n1", "n2"};
  plain.o.train = "./smoke.sh";
  plain.o.storage_paths = {"/scratch"};
  plain.o.train_convention = "dcp";
  plain.tap_output = TapOf(0, "n1", 10, "bound 300 x") + TapOf(1, "n2", 10, "bound 300 x");
  Report p = plain.Go();
  ASSERT_EQ(plain.tap_calls.size(), 1u);
  EXPECT_EQ(plain.tap_calls[0].find("--train-dir"), std::string::npos) << plain.tap_calls[0];
  EXPECT_EQ(TripFigure(p, "n1"), nullptr);
  bool said = false;
  for (const auto& st : p.stages)
    for (const auto& note : st.notes) said = said || note.find("--train-convention dcp needs the shared tier") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace preflight::accept
