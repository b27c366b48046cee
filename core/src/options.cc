#include "preflight/options.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace preflight {

const char* LevelName(Level l) {
  switch (l) {
    case Level::kOff: return "off";
    case Level::kQuick: return "quick";
    case Level::kFull: return "full";
  }
  return "off";
}

Expected<Level> ParseLevel(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "(null)") == 0) return Level::kQuick;
  if (std::strcmp(text, "quick") == 0) return Level::kQuick;
  if (std::strcmp(text, "full") == 0) return Level::kFull;
  if (std::strcmp(text, "off") == 0) return Level::kOff;
  return Status::InvalidArgument(std::string("invalid level '") + text +
                                 "' (expected quick, full or off)");
}

const char* EnvModeName(EnvMode m) {
  switch (m) {
    case EnvMode::kOn: return "on";
    case EnvMode::kShow: return "show";
    case EnvMode::kOff: return "off";
  }
  return "on";
}

Expected<EnvMode> ParseEnvMode(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "(null)") == 0) return EnvMode::kOn;
  if (std::strcmp(text, "on") == 0) return EnvMode::kOn;
  if (std::strcmp(text, "show") == 0) return EnvMode::kShow;
  if (std::strcmp(text, "off") == 0) return EnvMode::kOff;
  return Status::InvalidArgument(std::string("invalid value '") + text +
                                 "' (expected on, show or off)");
}

namespace {

Status ApplyNcclCheck(const char* arg, JobOptions& o) {
  auto l = ParseLevel(arg);
  if (!l) return l.status();
  o.nccl_check = *l;
  o.nccl_check_given = true;
  return Status::Ok();
}

Status ApplyEnv(const char* arg, JobOptions& o) {
  auto m = ParseEnvMode(arg);
  if (!m) return m.status();
  o.env = *m;
  o.env_given = true;
  return Status::Ok();
}

bool NcclCheckGiven(const JobOptions& o) { return o.nccl_check_given; }
std::string NcclCheckText(const JobOptions& o) { return LevelName(o.nccl_check); }
bool EnvGiven(const JobOptions& o) { return o.env_given; }
std::string EnvText(const JobOptions& o) { return EnvModeName(o.env); }

Status ApplyStage(const char* arg, JobOptions& o) {
  auto v = ParseStageSpec(arg ? arg : "");
  if (!v) return v.status();
  o.stage = *v;
  o.stage_given = true;
  return Status::Ok();
}
bool StageGiven(const JobOptions& o) { return o.stage_given; }
std::string StageText(const JobOptions& o) { return StageSpecText(o.stage); }
// sbatch runs as the submitting user, so access() here is that user's.
Status ResolveStage(JobOptions& o) {
  if (!o.stage_given) return Status::Ok();
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return Status::FromErrno(errno, "getcwd");
  return ResolveStageSources(o.stage, cwd);
}

}  // namespace

const std::vector<UserOption>& UserOptions() {
  static const std::vector<UserOption> kOptions = {
      {"nccl-check", "LEVEL",
       "Verify GPUs, interconnect and collective bandwidth before the job starts; "
       "LEVEL is quick (default), full or off",
       2, 0, ApplyNcclCheck, "PREFLIGHT_NCCL_CHECK", NcclCheckGiven, NcclCheckText, nullptr, 16},
      {"preflight-env", "MODE",
       "Topology-aware NCCL/RDMA environment per task: on (default), show (also print it) or off",
       2, 1, ApplyEnv, "PREFLIGHT_ENV", EnvGiven, EnvText, nullptr, 16},
      {"stage", "SRC[:NAME][,SRC...]",
       "Copy datasets (directories, files, or @LISTFILE) to node-local storage before the job "
       "starts; the job finds them under $PREFLIGHT_STAGE_DIR",
       1, 2, ApplyStage, "PREFLIGHT_STAGE", StageGiven, StageText, ResolveStage, 4096},
  };
  return kOptions;
}

Status CheckSubmittedValue(const UserOption& o, const char* arg) {
  if (arg == nullptr) return Status::Ok();
  size_t n = std::strlen(arg);
  if (n == 0) {
    std::string bare = o.has_arg == 2 ? " (give --" + std::string(o.name) + " alone for its default)" : "";
    return Status::InvalidArgument("empty value after '--" + std::string(o.name) + "='" + bare);
  }
  if (n > o.max_value_bytes)
    return Status::InvalidArgument("value of " + std::to_string(n) + " bytes: longer than the limit of " +
                                   std::to_string(o.max_value_bytes) + " bytes");
  return Status::Ok();
}

SubmissionCheck CheckSubmission(const JobOptions& opts, const std::string& program, int component) {
  // Slurm calls init_post_opt once per component, and the options of the
  // first stay set for the others: any component after the first refuses
  // what the job as a whole cannot honour.
  if (opts.stage_given && component > 0)
    return {"stage", Status::InvalidArgument(
                         "a heterogeneous job cannot be staged (the prolog would stage the datasets on one "
                         "component's nodes only, and the steps on the other components' nodes would fail); "
                         "submit the components without --stage, or stage them as separate jobs")};
  if (!opts.nccl_check_given || opts.nccl_check == Level::kOff) return {};
  if (component > 0)
    return {"nccl-check", Status::InvalidArgument(
                              "a heterogeneous job cannot be checked (the check runs over one allocation of like "
                              "nodes); submit its components without --nccl-check, or check them as separate jobs")};
  if (program != "sbatch")
    return {"nccl-check",
            Status::InvalidArgument(
                "--nccl-check runs only for a batch job, before its script (sbatch --nccl-check); " + program +
                " would run no check. In an allocation, run 'srun --mpi=pmix preflight-nccl' for a check now")};
  return {};
}

namespace {
// How a job-control variable comes back: SPANK_<name> in the prolog and
// epilog, SLURM_SPANK_<name> in the job's environment.
constexpr const char* kEnvPrefixes[] = {"SPANK_", "SLURM_SPANK_"};
}  // namespace

OptionsFromEnv JobOptionsFromEnv(const std::map<std::string, std::string>& env) {
  OptionsFromEnv r;
  for (const auto& o : UserOptions()) {
    for (const char* prefix : kEnvPrefixes) {
      std::string var = std::string(prefix) + o.env_name;
      auto it = env.find(var);
      if (it == env.end()) continue;
      // An option that requires a value never travels empty (the submit
      // side refuses '--stage='): an empty variable is no request.
      if (o.has_arg == 1 && it->second.empty()) break;
      Status s = o.apply(it->second.c_str(), r.opts);
      if (!s.ok()) r.errors.push_back({&o, s.Context(var + "='" + it->second + "'")});
      break;
    }
  }
  return r;
}

bool JobOptionInEnv(const std::map<std::string, std::string>& env, const char* env_name) {
  for (const char* prefix : kEnvPrefixes)
    if (env.count(std::string(prefix) + env_name)) return true;
  return false;
}

Status OptionsFromEnv::ErrorFor(const char* env_name) const {
  for (const auto& e : errors)
    if (std::strcmp(e.first->env_name, env_name) == 0) return e.second;
  return Status::Ok();
}

}  // namespace preflight
