// The user-facing job options (sbatch/salloc/srun), in one table. The SPANK
// plugin registers exactly these, `--help` prints their usage, and the man
// page's OPTIONS list is checked against this table by a test.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "preflight/stage_spec.h"
#include "preflight/status.h"

namespace preflight {

// How much checking a job asked for with --nccl-check[=LEVEL].
enum class Level { kOff = 0, kQuick = 1, kFull = 2 };

const char* LevelName(Level l);
// Accepts "off", "quick", "full". A bare option (Slurm passes NULL, "" or,
// in the prolog environment, the literal "(null)") means quick.
Expected<Level> ParseLevel(const char* text);

// What the topology environment does for a job (--preflight-env).
enum class EnvMode { kOn = 0, kShow = 1, kOff = 2 };
const char* EnvModeName(EnvMode m);
// Accepts "on", "show", "off". A bare option (NULL, "" or "(null)", as for
// ParseLevel) means on, the default the option's usage names.
Expected<EnvMode> ParseEnvMode(const char* text);

// The job's choices, filled by option callbacks. Callbacks may run twice
// (Slurm's remote context does), so setters are idempotent.
struct JobOptions {
  bool nccl_check_given = false;
  Level nccl_check = Level::kOff;
  bool env_given = false;
  EnvMode env = EnvMode::kOn;
  bool stage_given = false;
  std::vector<StageSource> stage;  // --stage, see stage_spec.h
};

struct UserOption {
  const char* name;     // without leading dashes
  const char* arginfo;  // "LEVEL", or nullptr for none
  const char* usage;    // one line for --help and the man page
  int has_arg;          // 0 none, 1 required, 2 optional (Slurm's convention)
  int val;              // index passed back to the callback
  // Parse `arg` (may be nullptr) into `opts`; an error is the refusal text.
  Status (*apply)(const char* arg, JobOptions& opts);
  // Name of the job-control variable carrying the value to prolog/epilog
  // (seen there as SPANK_<name>) and into the task environment.
  const char* env_name;
  // Whether the user gave it, and its value as the text put into env_name.
  bool (*given)(const JobOptions& opts);
  std::string (*value_text)(const JobOptions& opts);
  // Optional, submit side only (sbatch/salloc/srun, as the user): checks
  // that need the filesystem, may rewrite the value (e.g. absolute paths).
  // An error refuses the submission. nullptr: nothing to check.
  Status (*resolve_local)(JobOptions& opts) = nullptr;
  // The longest value taken on the command line, in bytes (the option text
  // as typed, before resolve_local); longer is refused at submission.
  size_t max_value_bytes = 64;
};

const std::vector<UserOption>& UserOptions();

// What a value typed at submission (sbatch/salloc/srun, not slurmstepd's
// second call) must be before `apply` sees it: not empty when given with
// '=' (`--nccl-check=` is a mistake, not the bare option; Slurm hands
// NULL for the bare one locally), and at most max_value_bytes long.
Status CheckSubmittedValue(const UserOption& o, const char* arg);

// Whether the job's options can be honoured by the submitting command,
// checked once per component after option processing (sbatch, salloc and
// srun call the plugin's init_post_opt once per heterogeneous component;
// `component` counts from 0). --nccl-check (other than off) runs only in a
// batch job's batch step, before its script, on one homogeneous allocation:
// from srun or salloc (`program`, the command's short name) it would run
// nothing, and in a heterogeneous job it could not run. --stage stages one
// component's nodes only, so a heterogeneous job's steps on the others
// would fail. Each is refused with the reason instead: the option refused
// (its name, without dashes) and why; ok() when nothing is refused.
struct SubmissionCheck {
  const char* option = nullptr;
  Status why;
  bool ok() const { return option == nullptr; }
};
SubmissionCheck CheckSubmission(const JobOptions& opts, const std::string& program, int component);

// The job's options as they come back from the job-control variables: in
// the prolog and epilog as SPANK_<env_name>, in the batch environment as
// SLURM_SPANK_<env_name> (the first found wins). One walk of the table;
// a bad value is kept per option (the variable and its text named), so a
// caller decides what it means: a bad level fails the prolog, a bad --stage
// only the job's tasks. An empty variable of an option that requires a
// value (--stage) counts as not given.
struct OptionsFromEnv {
  JobOptions opts;
  std::vector<std::pair<const UserOption*, Status>> errors;
  // The error for the option whose env_name is `env_name`, or Ok.
  Status ErrorFor(const char* env_name) const;
};
OptionsFromEnv JobOptionsFromEnv(const std::map<std::string, std::string>& env);

// Whether `env` carries the job-control variable of the option whose
// env_name is `env_name` (either prefix, any value), without parsing it:
// for a task, where the value is not to be trusted, only its presence.
bool JobOptionInEnv(const std::map<std::string, std::string>& env, const char* env_name);

}  // namespace preflight
