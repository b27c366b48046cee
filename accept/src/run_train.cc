// The training stage of the acceptance run (run_stages.h, accept_train.h):
// the command on every live node at once under the tap, one task per node,
// read back per node into the report's TrainRun, then the checkpoint round
// trip's resume run.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "preflight/accept_train.h"
#include "preflight/fileutil.h"
#include "preflight/strings.h"
#include "preflight/stats.h"
#include "run_stages.h"

namespace preflight::accept::run_internal {

// One job step of taps, a task per live node, bounded to `seconds`, the
// tap's grace and srun's start-up, within the budget: each node's record.
std::map<std::string, TapRecord> Stages::TapStep(const std::vector<std::string>& extra, double seconds,
                                                 ProcessResult* out, const std::vector<std::string>& runner,
                                                 const std::vector<std::string>* nodes) {
  std::vector<std::string> a = runner;
  for (const auto& w : Srun(nodes ? *nodes : live_, false, 1, true)) a.push_back(w);
  // The tap reads the site config as the run does (pass_args): nvml_library.
  a.push_back(o_.preflight);
  a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
  a.insert(a.end(), {"accept", "--train-tap", "--train", o_.train, "--train-seconds", F("%.0f", seconds)});
  a.insert(a.end(), extra.begin(), extra.end());
  const double last = runner.empty() ? 0 : kTierLastRound;
  unsigned ms = std::min(Left(), static_cast<unsigned>((seconds + RunnerGrace(seconds) + last + 60) * 1000));
  ProcessResult p = run_(a, ms);
  std::map<std::string, TapRecord> seen;
  for (const auto& [task, text] : SplitLabelled(p.output)) {
    TapRecord rec = ReadTap(text);
    if (!rec.node.empty()) seen[rec.node] = std::move(rec);
  }
  if (out) *out = std::move(p);
  return seen;
}

// The tap's arguments for the checkpoint round trip, after `mode`: its
// folders are in the first storage path (the storage stage's, %n each
// node's own).
std::vector<std::string> Stages::TripArgs(std::vector<std::string> mode) const {
  mode.insert(mode.end(), {"--train-dir", o_.storage_paths[0], "--tag", o_.tag});
  return mode;
}

void Stages::Train() {
  TrainRun& t = r_->train;
  if (o_.train.empty()) {
    // Not a finding: the stage stays "skip", the report says why.
    t.error = o_.train_skip.empty() ? "no training command" : o_.train_skip;
    Say("train: " + t.error + ": not run");
    return;
  }
  if (live_.empty()) {
    t.error = "no node left to train on";
    Note(t.error);
    return;
  }
  if (!Budget("the training run")) return;
  t.command = o_.train;
  t.seconds = o_.train_seconds;
  std::vector<std::string> trip, runner;
  if (!o_.storage_paths.empty()) trip = TripArgs({});
  if (!trip.empty() && MakeTier()) {
    trip = TripArgs({"--train-relay"});
    runner = TierRunner(o_.train_seconds);
    t.convention = o_.train_convention;
  } else if (!trip.empty() && !o_.train_convention.empty() && o_.train_convention != "marker") {
    // A framework's convention knows a checkpoint complete from every
    // node's part (rank 0's metadata, say): one node's disk cannot say.
    Note("no checkpoint round trip: --train-convention " + o_.train_convention +
         " needs the shared tier (--train-tier), and it is not used here");
    trip.clear();
  }
  Say("train: " + o_.train + " on " + std::to_string(live_.size()) + " nodes for " + F("%.0f", o_.train_seconds) +
      " s" + (t.tier.empty() ? "" : ", its checkpoints made durable on " + t.tier));
  ProcessResult p;
  std::map<std::string, TapRecord> seen = TapStep(trip, o_.train_seconds, &p, runner);
  std::vector<std::string> missing;
  for (const auto& node : live_) {
    TrainNode n;
    n.node = node;
    auto it = seen.find(node);
    if (it == seen.end()) {
      missing.push_back(node);
      t.nodes.push_back(n);
      continue;
    }
    const TapRecord& rec = it->second;
    n.rate = StepRate(rec.steps);
    std::vector<double> v;
    for (const auto& [when, rate] : n.rate) v.push_back(rate);
    n.median_rate = Median(v);
    n.last_step = rec.steps.empty() ? -1 : rec.steps.back().second;
    n.last_time = rec.steps.empty() ? 0 : rec.steps.back().first;
    n.has_loss = rec.has_loss;
    n.last_loss = rec.last_loss;
    n.loss_finite = !rec.loss_nonfinite;
    n.errors = rec.errors;
    n.end = rec.end;
    n.lines = rec.lines;
    n.last = rec.last;
    for (const GpuLook& g : rec.gpu) {
      n.gpus = std::max(n.gpus, g.gpus);
      n.gpu_util += g.util_mean / static_cast<double>(rec.gpu.size());
      n.gpu_power_w += g.power_w / static_cast<double>(rec.gpu.size());
    }
    n.gpu_note = rec.gpu.empty() ? (rec.gpu_off.empty() ? "not sampled" : rec.gpu_off) : "";
    n.ckpt.tried = rec.ckpt_tried && rec.ckpt_off.empty();
    n.ckpt.off = rec.ckpt_off;
    n.ckpt.saved = rec.ckpt_saved;
    n.ckpt.saved_step = rec.ckpt_saved.empty() ? -1 : CheckpointStep(rec.ckpt_saved);
    n.ckpt.first_step = rec.steps.empty() ? -1 : rec.steps.front().second;
    n.ckpt.left = rec.ckpt_left;
    t.nodes.push_back(n);
    Say("train: " + node + ": " + (n.last_step < 0 ? std::string("no progress line") : F("%.2f steps/s", n.median_rate)) +
        ", " + (n.end.empty() ? std::string("no end") : n.end));
  }
  if (!missing.empty()) {
    if (p.timed_out) Note("the training step outlived its bound: stopped");
    FindLost(missing, "the training run");
  }
  if (!t.tier.empty()) Durable();
  Resume();
  if (!t.tier.empty()) EndTier();
}

// The round trip through the shared tier, when there is one and every node
// of the allocation is still here (preflight-run's agent takes its parts
// from every node of the job; on one node it resumes from local disk):
// the tier's folder made here, every node's folder by a step of its own,
// each only when it did not exist. False, said: each node's round trip
// stays on its own disk (what was made is removed).
bool Stages::MakeTier() {
  TrainRun& t = r_->train;
  if (o_.train_tier.empty()) return false;
  const std::string stays = "the checkpoint round trip stays on each node's disk: ";
  if (live_.size() < 2 || live_.size() != o_.nodes.size()) {
    Note(stays + (live_.size() < 2 ? "one node (preflight-run resumes it from local disk)"
                                   : "a node of the allocation is lost (the shared tier waits for every node's part)"));
    return false;
  }
  const std::string dir = RoundTripTier(o_.train_tier, o_.tag);
  Status s = MakeDirs(o_.train_tier, 0700);
  if (s.ok() && ::mkdir(dir.c_str(), 0700) != 0)
    s = Status::FromErrno(errno, "cannot make " + dir + (errno == EEXIST ? " (not made by this run: left alone)" : ""));
  if (!s.ok()) {
    Note(stays + "the shared tier: " + s.message());
    return false;
  }
  std::map<std::string, TapRecord> seen = TapStep(TripArgs({"--train-make"}), 5, nullptr);
  std::vector<std::string> made, off;
  for (const auto& node : live_) {
    auto it = seen.find(node);
    if (it != seen.end() && it->second.ckpt_made) made.push_back(node);
    else off.push_back(node + ": " + (it == seen.end() ? std::string("no answer") : it->second.ckpt_off));
  }
  if (off.empty()) {
    t.tier = dir;
    return true;
  }
  Note(stays + Join(off, "; "));
  if (!made.empty()) TapStep(TripArgs({"--train-clean"}), 5, nullptr, {}, &made);
  if (Status r = RemoveTree(dir); !r.ok()) Note("cannot remove " + dir + ": " + r.message());
  return false;
}

// preflight-run around the srun of the taps, with the shared tier's folder
// and every node's own checkpoint folder (%n), for a run of `seconds`.
std::vector<std::string> Stages::TierRunner(double seconds) const {
  return accept::TierRunner(o_.preflight_run, o_.pass_args, seconds, r_->train.tier,
                            RoundTripDirPattern(o_.storage_paths[0], o_.tag), o_.train_convention);
}

// After the training run through the tier: the checkpoint durable there is
// each node's saved one (every node's part of it); what each node had on
// its own disk stays as saved_local.
void Stages::Durable() {
  TrainRun& t = r_->train;
  auto newest = o_.newest_durable ? o_.newest_durable(t.tier) : Expected<std::string>(std::string());
  if (!newest) Note("the shared tier " + t.tier + ": " + newest.status().message());
  const std::string durable = newest ? *newest : "";
  for (auto& n : t.nodes) {
    n.ckpt.saved_local = n.ckpt.saved;
    n.ckpt.saved = durable;
    n.ckpt.saved_step = durable.empty() ? -1 : CheckpointStep(durable);
  }
  Say("train: durable on the shared tier: " + (durable.empty() ? std::string("none") : durable));
}

// Every node's folder and the tier's removed, whatever happened before.
void Stages::EndTier() {
  TrainRun& t = r_->train;
  std::map<std::string, TapRecord> seen = TapStep(TripArgs({"--train-clean"}), 5, nullptr);
  for (auto& n : t.nodes) {
    auto it = seen.find(n.node);
    if (it != seen.end() && !it->second.ckpt_left.empty()) n.ckpt.left = it->second.ckpt_left;
  }
  if (Status s = RemoveTree(t.tier); !s.ok()) Note("cannot remove the round trip's folder on the shared tier: " + s.message());
}

// The round trip's second run: on the same nodes, so each task has the rank
// it had, resuming from each node's newest complete checkpoint; it stops at
// its first progress line with a loss and removes the folder.
void Stages::Resume() {
  TrainRun& t = r_->train;
  bool any = false;
  for (const auto& n : t.nodes) any = any || !n.ckpt.saved.empty();
  if (!any || live_.empty()) return;
  if (!Budget("the checkpoint resume run")) {
    for (const auto& n : t.nodes)
      if (!n.ckpt.saved.empty()) Note(n.node + ": its round-trip checkpoints stay in " + o_.storage_paths[0]);
    return;
  }
  // A node lost in the training run: the others would resume with other
  // ranks (srun numbers the tasks of the nodes it gets), which is not a
  // resume. Their folders are removed; the lost nodes' stay, said.
  std::string lost;
  for (const auto& n : t.nodes)
    if (std::find(live_.begin(), live_.end(), n.node) == live_.end()) lost += (lost.empty() ? "" : ",") + n.node;
  if (!lost.empty()) {
    for (auto& n : t.nodes)
      if (!n.ckpt.saved.empty()) n.ckpt.off = "not resumed: " + lost + " lost in the training run (the ranks would change)";
    Note("the checkpoint round trip's resume is not run: " + lost + " lost; their folders stay in " + o_.storage_paths[0]);
    if (t.tier.empty()) TapStep(TripArgs({"--train-clean"}), 5, nullptr);
    return;
  }
  t.resume_seconds = ResumeSeconds(o_.train_seconds);
  Say("train: the checkpoint round trip: resuming on " + std::to_string(live_.size()) + " nodes" +
      (t.tier.empty() ? "" : " from the shared tier"));
  std::map<std::string, TapRecord> seen =
      t.tier.empty() ? TapStep(TripArgs({"--train-resume"}), t.resume_seconds, nullptr)
                     : TapStep(TripArgs({"--train-resume", "--train-relay"}), t.resume_seconds, nullptr,
                               TierRunner(t.resume_seconds));
  for (auto& n : t.nodes) {
    if (n.ckpt.saved.empty()) continue;
    auto it = seen.find(n.node);
    if (it == seen.end()) continue;
    const TapRecord& rec = it->second;
    n.ckpt.resumed = !rec.end.empty();
    n.ckpt.from = rec.ckpt_from;
    if (!t.tier.empty() && !n.ckpt.from.empty()) {
      // The relayed tap names the whole path ($PREFLIGHT_RESUME_FROM).
      n.ckpt.from_tier = n.ckpt.from.rfind(t.tier + "/", 0) == 0;
      n.ckpt.from_path = n.ckpt.from;
      n.ckpt.from = n.ckpt.from.substr(n.ckpt.from.rfind('/') + 1);
    }
    // Its first trained step: the first line with a loss where there is
    // one ("resumed from step-60 at step 60" is not one).
    for (const auto& [when, step] : rec.steps)
      if (n.ckpt.resume_step < 0 && (rec.first_loss_step < 0 || step == rec.first_loss_step)) {
        n.ckpt.resume_step = step;
        n.ckpt.resume_time = when;
      }
    n.ckpt.resume_end = rec.end;
    n.ckpt.resume_last = rec.last;
    if (!rec.ckpt_left.empty()) n.ckpt.left = rec.ckpt_left;
    Say("train: " + n.node + ": saved " + n.ckpt.saved + ", resumed " +
        (n.ckpt.resume_step < 0 ? std::string("without a progress line") : "at step " + std::to_string(n.ckpt.resume_step)));
  }
  for (const auto& n : t.nodes)
    if (!n.ckpt.left.empty()) Note(n.node + ": cannot remove the round trip's checkpoints: " + n.ckpt.left);
}

}  // namespace preflight::accept::run_internal
