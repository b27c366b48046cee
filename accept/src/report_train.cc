// The training run's verdicts (JudgeTrain, report_judge.h): each node's
// end, progress, stall, loss and errors, its step rate against the
// allocation's and its own, and its checkpoint round trip.
#include <algorithm>
#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/accept_train.h"
#include "preflight/stats.h"
#include "report_fmt.h"
#include "report_judge.h"

namespace preflight::accept::judge_internal {

namespace {

// A node still running at the bound whose progress lines stopped: quiet for
// more than three of the tap's sampling windows and five of its own steps
// (half the run when it printed one progress line only).
bool Stalled(const TrainNode& n, double seconds) {
  if (n.end != "bound" || n.last_step < 0 || seconds <= 0) return false;
  double quiet = seconds - n.last_time;
  if (n.median_rate <= 0) return quiet > seconds / 2;
  return quiet > std::max(3 * RateWindow(seconds), 5 / n.median_rate);
}

// The checkpoint round trip of a node whose run went well (a failed run is
// its own finding): a checkpoint saved, the resume run went on from it.
void JudgeCheckpoint(Report* r, const TrainRun& t, const TrainNode& n) {
  const TrainNode::Checkpoint& c = n.ckpt;
  Figure f;
  f.stage = "train";
  f.name = "checkpoint resume";
  f.node = n.node;
  f.unit = "step";
  f.value = c.resume_step;
  f.reference = c.saved_step >= 0 ? c.saved_step : c.first_step;
  f.threshold_source = c.saved_step >= 0 ? "the saved checkpoint's step (its name)" : "the training run's first step";
  f.reproduce = t.tier.empty() ? "srun -N1 -w " + n.node + " preflight-run --checkpoint-dir DIR -- sh -c '" + t.command +
                                     "' (twice: stopped with SIGTERM, then resumed)"
                               : "preflight-run --checkpoint-dir DIR/%n --persist-to TIER" +
                                     (t.convention.empty() ? "" : " --checkpoint-convention " + t.convention) +
                                     " -- srun --ntasks-per-node=1 sh -c '" + t.command +
                                     "' (twice: stopped with SIGTERM, then resumed)";
  f.verdict = Verdict::kFail;
  // `rule`: the words every node that broke it shares, for one finding
  // with the node list (default: `why` up to its ": step N ...").
  std::string why, rule, last = c.resume_last.empty() ? "" : " (last line: " + c.resume_last + ")";
  if (!c.off.empty()) {
    f.verdict = Verdict::kWarn;
    why = "no checkpoint round trip: " + c.off;
  } else if (c.saved.empty() && !t.tier.empty() && !c.saved_local.empty()) {
    rule = "no checkpoint became durable on the shared tier " + t.tier;
    why = rule + " (complete on this node's disk: " + c.saved_local + ")";
  } else if (c.saved.empty()) {
    f.verdict = Verdict::kWarn;
    why = "no checkpoint round trip: the command wrote no complete checkpoint (" +
          (t.convention.empty() ? std::string("a folder in $PREFLIGHT_CHECKPOINT_DIR with its marker written last")
                                : "complete by the " + t.convention + " convention") +
          ") by the end of its grace";
  } else if (!c.resumed) {
    why = "the checkpoint resume run never ended there (node lost or step killed)";
  } else if (c.from.empty()) {
    why = "the resume run found no complete checkpoint (saved: " + c.saved + ")";
  } else if (!t.tier.empty() && !c.from_tier) {
    rule = "the resume run did not resume from the shared tier";
    why = rule + ": " + c.from_path;
  } else if (c.resume_step < 0) {
    why = "the resumed command printed no progress line in " + Fmt("%.0f s", t.resume_seconds) + " (ended: " +
          c.resume_end + ")" + last;
  } else if (c.saved_step >= 0 && c.resume_step < c.saved_step) {
    why = "the resumed run went back before its checkpoint: step " + std::to_string(c.resume_step) + " after " +
          c.from;
  } else if (c.saved_step >= 0 && c.resume_step > c.saved_step + 1) {
    why = "the resumed run did not go on from its checkpoint: step " + std::to_string(c.resume_step) + " after " +
          c.from;
  } else if (c.saved_step < 0 && c.resume_step <= c.first_step) {
    why = "the resumed run started over: step " + std::to_string(c.resume_step) + " after " + c.from;
  }
  if (why.empty()) {
    f.verdict = Verdict::kPass;
    f.reason = n.node + ": saved " + c.saved + (t.tier.empty() ? "" : " (durable on the shared tier)") +
               ", resumed at step " + std::to_string(c.resume_step);
  } else {
    f.rule = "training: " + (rule.empty() ? why.substr(0, why.find(": step ")) : rule);
    f.reason = n.node + ": " + why;
    Blame(r, n.node, f.verdict, "training: " + why);
  }
  StageVerdict(r, "train", f.verdict);
  r->figures.push_back(f);
}

}  // namespace

// Training (accept_train.h): each node's end, progress, stall, loss and
// errors, its median step rate against the allocation's (train_fraction:
// fail), and its samples against its own median (train_dip: warn, not steady).
void JudgeTrain(Report* r) {
  const TrainRun& t = r->train;
  if (t.command.empty()) return;
  std::vector<double> medians;
  for (const auto& n : t.nodes)
    if (n.median_rate > 0) medians.push_back(n.median_rate);
  const double all = Median(medians), frac = r->thresholds.train_fraction, dip = r->thresholds.train_dip;
  for (const auto& n : t.nodes) {
    Figure f;
    f.stage = "train";
    f.name = "step rate";
    f.node = n.node;
    f.unit = "steps/s";
    f.value = n.median_rate;
    f.reference = all;
    f.threshold = all * frac;
    f.threshold_source = "the allocation's median x train_fraction " + Fmt("%.2f", frac);
    f.reproduce = "srun -N1 -w " + n.node + " sh -c '" + t.command + "'";
    f.verdict = Verdict::kFail;
    // A failure's words without the node are its rule: nodes that fail the
    // same way are one finding ("... on n[1-8]").
    std::string last = n.last.empty() ? "" : " (last line: " + n.last + ")";
    std::string why;
    if (n.end.empty()) {
      why = "the training run never ended there (node lost or step killed)";
    } else if (n.end != "bound" && n.end != "exit 0") {
      why = "the training command ended with " + n.end + last;
      f.reason = n.node + ": the training command ended with " + n.end + " after " + std::to_string(n.lines) +
                 " lines" + last;
    } else if (n.last_step < 0) {
      why = "no progress line (the stage reads 'step N [loss X]')" + last;
      f.reason = n.node + ": no progress line in " + std::to_string(n.lines) +
                 " lines of output (the stage reads 'step N [loss X]')" + last;
    } else if (!n.loss_finite) {
      why = "the loss went NaN or infinite";
    } else if (Stalled(n, t.seconds)) {
      why = "stalled: no progress line in the last part of the run (a hang)";
      f.reason = n.node + ": stalled: no progress line in the last " + Fmt("%.0f s", t.seconds - n.last_time) +
                 " of the run (the last: step " + std::to_string(n.last_step) + " at " + Fmt("%.0f s", n.last_time) + ")";
    } else if (!n.errors.empty()) {
      std::string first = n.errors[0].substr(std::min(n.errors[0].size(), n.errors[0].find(' ') + 1));
      why = "collective or GPU error lines, the first: " + first;
      f.reason = n.node + ": " + std::to_string(n.errors.size()) + " error line(s), first at " + n.errors[0];
    }
    if (!why.empty()) {
      f.rule = "training: " + why;
      if (f.reason.empty()) f.reason = n.node + ": " + why;
    } else if (all > 0 && n.median_rate < f.threshold) {
      f.rule = "training: step rate below " + Fmt("%.2f", frac) + " of the allocation's median " + Fmt("%.2f steps/s", all);
      f.ranged = true;
      f.reason = n.node + ": step rate " + Fmt("%.2f steps/s", n.median_rate) + " below " + Fmt("%.2f", frac) +
                 " of the allocation's median " + Fmt("%.2f steps/s", all);
    } else {
      f.verdict = Verdict::kPass;
      f.reason = n.node + ": " + Fmt("%.2f steps/s", n.median_rate) + (n.end == "exit 0" ? ", ended by itself" : "");
      if (n.gpus > 0 && n.gpu_util < 100 * r->thresholds.train_gpu_util) {
        f.verdict = Verdict::kWarn;
        f.rule = "training: GPUs underused (mean utilisation below " + Fmt("%.0f%%", 100 * r->thresholds.train_gpu_util) +
                 ": a starved data loader?)";
        f.reason = n.node + ": GPUs underused: mean utilisation " + Fmt("%.0f%%", n.gpu_util) + " of " +
                   std::to_string(n.gpus) + " GPU(s), below " + Fmt("%.0f%%", 100 * r->thresholds.train_gpu_util) +
                   " (a starved data loader?)";
      }
      for (size_t i = 1; i < n.rate.size() && n.median_rate > 0 && f.verdict == Verdict::kPass; ++i)
        if (n.rate[i].second < dip * n.median_rate) {
          f.verdict = Verdict::kWarn;
          f.rule = "training: not steady (a sample below " + Fmt("%.2f", dip) + " of the node's median)";
          f.reason = n.node + ": not steady: " + Fmt("%.2f steps/s", n.rate[i].second) + " at " +
                     Fmt("%.0f s", n.rate[i].first) + ", below " + Fmt("%.2f", dip) + " of its median " +
                     Fmt("%.2f steps/s", n.median_rate);
          break;
        }
    }
    if (f.verdict != Verdict::kPass) Blame(r, n.node, f.verdict, "training: " + f.reason.substr(n.node.size() + 2));
    StageVerdict(r, "train", f.verdict);
    r->figures.push_back(f);
    if (why.empty() && (n.ckpt.tried || !n.ckpt.off.empty())) JudgeCheckpoint(r, t, n);
  }
}

}  // namespace preflight::accept::judge_internal
