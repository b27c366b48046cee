// The training stage's checkpoint round trip (accept_train.h): its timing,
// preflight-run's options for it and where its checkpoints go. The run
// itself is the tap's (train_tap.cc); its verdict is JudgeTrain's.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "preflight/accept_storage.h"
#include "preflight/accept_train.h"

namespace preflight::accept {

long CheckpointStep(const std::string& name) {
  size_t end = name.find_last_of("0123456789");
  if (end == std::string::npos) return -1;
  size_t begin = name.find_last_not_of("0123456789", end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  std::string digits = name.substr(begin, end + 1 - begin);
  size_t nz = digits.find_first_not_of('0');
  digits = nz == std::string::npos ? "0" : digits.substr(nz);
  if (digits.size() > 15) return -1;  // not a step count
  return std::atol(digits.c_str());
}

std::vector<std::string> RoundTripShell(const std::string& cmd, const std::string& checkpoint_signal) {
  bool name = !checkpoint_signal.empty() && checkpoint_signal.size() <= 16 && checkpoint_signal != "none";
  for (char c : checkpoint_signal) name = name && ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
  return {"/bin/sh", "-c", name ? "trap : " + checkpoint_signal + "; " + cmd : cmd};
}

double CheckpointGrace(double seconds) { return std::clamp(seconds / 10, 10.0, 60.0); }

double RunnerGrace(double seconds) { return CheckpointGrace(seconds) + 5 + 5; }

double ResumeSeconds(double seconds) { return std::clamp(seconds / 5, 15.0, 60.0); }

std::vector<std::string> RoundTripRunner(const std::string& preflight_run, const std::vector<std::string>& pass_args,
                                         double seconds, const std::string& tier, const std::string& local) {
  std::vector<std::string> a = {preflight_run};
  a.insert(a.end(), pass_args.begin(), pass_args.end());
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.0fs", CheckpointGrace(seconds));
  a.insert(a.end(), {"--requeue", "no", "--persist-to", tier, "--stall-restart", "no", "--watch-gpus", "0", "--grace",
                     grace, "--kill-wait", "5s", "--checkpoint-dir"});
  if (!local.empty()) a.push_back(local);
  return a;
}

std::vector<std::string> TierRunner(const std::string& preflight_run, const std::vector<std::string>& pass_args,
                                    double seconds, const std::string& tier, const std::string& local,
                                    const std::string& convention) {
  char at[32], kill[32];
  std::snprintf(at, sizeof at, "%.0f", seconds);
  std::snprintf(kill, sizeof kill, "%.0f", RunnerGrace(seconds) + kTierLastRound);
  std::vector<std::string> a = {"timeout", "--foreground", "--kill-after=" + std::string(kill), at};
  for (const auto& w : RoundTripRunner(preflight_run, pass_args, seconds, tier, local)) a.push_back(w);
  if (!convention.empty()) a.insert(a.end(), {"--checkpoint-convention", convention});
  a.push_back("--");
  return a;
}

std::string RoundTripTier(const std::string& tier, const std::string& tag) {
  std::string n = ".preflight-accept-" + tag + "-tier";
  for (char& c : n)
    if (c == '/' || c == '\0') c = '_';
  return tier + "/" + n;
}

std::string RoundTripDirPattern(const std::string& storage_path, const std::string& tag) {
  StorageOptions o;
  o.node = "%n";
  o.tag = tag;
  return storage_path + "/" + PrivateDirName(o) + "-train";
}

Expected<std::string> RoundTripDir(const std::string& storage_path, const std::string& node, const std::string& tag) {
  StorageOptions o;
  o.path = storage_path;
  o.node = node;
  o.tag = tag;
  auto path = NodePath(o);
  if (!path) return path.status();
  return *path + "/" + PrivateDirName(o) + "-train";
}

}  // namespace preflight::accept
