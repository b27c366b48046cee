// The SPANK shell: turns Slurm callbacks into calls on preflight's core.
// Nothing here decides anything the core could decide; every callback
// catches everything (no exception may cross into slurmstepd/sbatch).
//
// Contexts (spank(8)): allocator = sbatch/salloc, local = srun, remote =
// slurmstepd, job_script = prolog/epilog run by slurmd. Options are
// registered with spank_option_register() in slurm_spank_init so sbatch and
// salloc see them (a spank_options[] table is not read in allocator mode).
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <errno.h>  // program_invocation_short_name (GNU)
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "plugin_args.h"
#include "preflight/config.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"
#include "preflight/options.h"
#include "slurm_compat.h"
#include "spank_nccl.h"
#include "spank_task.h"

#define PF_EXPORT extern "C" __attribute__((visibility("default")))

#if PREFLIGHT_HAVE_SPANK_INIT_FAILURE_MODE
// Slurm 25.05+: a failing slurm_spank_init (a bad plugstack argument, an
// unreadable site config) fails the job that met it instead of draining the
// node: the node is not at fault, and a drain of every node a broken config
// touches would take the cluster down job by job.
extern "C" {
__attribute__((visibility("default"))) int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
}
#endif

namespace {

using namespace preflight;

struct PluginState {
  PluginArgs args;
  JobOptions opts;
  std::vector<spank_option> table;  // storage handed to spank_option_register
  bool initialized = false;
  int post_opt_calls = 0;  // locally: one per heterogeneous job component
  bool nccl_check_inherited = false;  // srun in a batch job: --nccl-check came from sbatch
};

PluginState& State() {
  static PluginState s;
  return s;
}

void SlurmSink(LogLevel level, const std::string& line) {
  switch (level) {
    case LogLevel::kError: slurm_error("%s", line.c_str()); break;
    case LogLevel::kInfo: slurm_info("%s", line.c_str()); break;
    case LogLevel::kDebug: slurm_debug("%s", line.c_str()); break;
  }
}

// Slurm hands a batch job's options on to every srun inside it through the
// job's environment (SLURM_SPANK__SLURM_SPANK_OPTION_<plugin>_<option>,
// read by spank_process_env_options and passed to the callback with
// remote=0): such a value was checked when sbatch took it, and is not the
// srun user's typing.
bool InheritedFromJob(const char* option) {
  // Only srun inside a job; sbatch sets the same variable in its own
  // environment after a heterogeneous job's first component.
  if (std::strcmp(program_invocation_short_name, "srun") != 0 || std::getenv("SLURM_JOB_ID") == nullptr) return false;
  std::string var = "SLURM_SPANK__SLURM_SPANK_OPTION_preflight_";
  for (const char* p = option; *p; ++p) var += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return std::getenv(var.c_str()) != nullptr;
}

// Called by Slurm for each user option, locally (remote=0: sbatch, srun) and
// again in slurmstepd (remote=1), there twice for an optional argument
// (NULL, then ""). Idempotent by construction. A non-zero return makes
// sbatch/srun refuse the submission, printing our error first.
int OptionCallback(int val, const char* optarg, int remote) {
  try {
    for (const auto& o : UserOptions()) {
      if (o.val != val) continue;
      // Remotely Slurm passes "" for a bare optional argument; locally
      // it is NULL, so "" is what the user typed ('--nccl-check=').
      bool inherited = !remote && InheritedFromJob(o.name);
      if (inherited && std::strcmp(o.name, "nccl-check") == 0) State().nccl_check_inherited = true;
      Status s = remote || inherited ? Status::Ok() : CheckSubmittedValue(o, optarg);
      if (s.ok()) s = o.apply(optarg, State().opts);
      if (s.ok() && !remote && o.resolve_local != nullptr) s = o.resolve_local(State().opts);
      if (!s.ok()) {
        Log(LogLevel::kError, remote ? "remote" : "submit", "refusing --" + std::string(o.name), s.message());
        return -1;
      }
      return 0;
    }
    return -1;
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "option", "unexpected error", e.what());
  } catch (...) {
    Log(LogLevel::kError, "option", "unexpected error", "unknown exception");
  }
  return -1;
}

template <class F>
int Guard(const char* phase, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    Log(LogLevel::kError, phase, "unexpected error", e.what());
  } catch (...) {
    Log(LogLevel::kError, phase, "unexpected error", "unknown exception");
  }
  return -1;
}

}  // namespace

PF_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return Guard("init", [&] {
    SetLogSink(SlurmSink);
    PluginState& st = State();
    auto args = ParsePluginArgs(ac, av);
    if (!args) {
      Log(LogLevel::kError, "init", "bad plugstack.conf arguments", args.status().message());
      return -1;
    }
    st.args = *args;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE) return 0;
    if (st.initialized) return 0;
    st.table.clear();
    for (const auto& o : UserOptions()) {
      st.table.push_back({const_cast<char*>(o.name), const_cast<char*>(o.arginfo), const_cast<char*>(o.usage),
                          o.has_arg, o.val, OptionCallback});
    }
    for (auto& opt : st.table) {
      spank_err_t rc = spank_option_register(sp, &opt);
      if (rc != ESPANK_SUCCESS) {
        Log(LogLevel::kError, "init", std::string("cannot register --") + opt.name, spank_strerror(rc));
        return -1;
      }
    }
    st.initialized = true;
    return 0;
  });
}

// After option processing, locally: hand the job's choices to the prolog and
// epilog (they see SPANK_<NAME>) and to the batch job (SLURM_SPANK_<NAME>).
// Remotely (slurmstepd, root, once per step): the topology for the tasks.
PF_EXPORT int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  return Guard("init_post_opt", [&] {
    spank_context_t ctx = spank_context();
    if (ctx == S_CTX_REMOTE) return preflight::spank::StepInit(sp, State().args, State().opts);
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
    const JobOptions& opts = State().opts;
    // A site config that does not parse would fail every node's prolog
    // (each drained with the config error): refused here, at submission,
    // with the file, line and key, while it stays broken. One this user
    // cannot read (root-only, or absent on a login node) is the prolog's
    // (root's) to read, and does not refuse the job.
    auto cfg = LoadPluginConfig(State().args, "");
    if (!cfg && cfg.status().code() == Status::Code::kInvalidArgument) {
      Log(LogLevel::kError, "submit", "refused: the site's preflight config is broken (tell the cluster admins)",
          cfg.status().message());
      return -1;
    }
    JobOptions asked = opts;
    if (State().nccl_check_inherited) asked.nccl_check_given = false;  // sbatch's, it runs in the batch step
    SubmissionCheck sub = CheckSubmission(asked, program_invocation_short_name, State().post_opt_calls++);
    if (!sub.ok()) {
      Log(LogLevel::kError, "submit", std::string("refusing --") + sub.option, sub.why.message());
      return -1;
    }
    for (const auto& o : UserOptions()) {
      if (!o.given(opts)) continue;
      spank_err_t rc = spank_job_control_setenv(sp, o.env_name, o.value_text(opts).c_str(), 1);
      if (rc != ESPANK_SUCCESS) {
        Log(LogLevel::kError, "init_post_opt", std::string("cannot pass --") + o.name + " to the job",
            spank_strerror(rc));
        return -1;
      }
    }
    return 0;
  });
}

// In each task, as the user, before exec: the environment (see spank_task.cc).
PF_EXPORT int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  return Guard("task_init", [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    int rc = preflight::spank::TaskInit(sp, State().args, State().opts);
    if (preflight::spank::NcclTaskInit(sp) != 0) return -1;
    return rc;
  });
}

// In each task's child, as root, before privileges drop and exec: the
// collective check of --nccl-check (batch step) and its root-run
// localization (see spank_nccl.h for who decides what).
PF_EXPORT int slurm_spank_task_init_privileged(spank_t sp, int ac, char** av) {
  return Guard("task_init_privileged", [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    return preflight::spank::NcclTaskPrivileged(sp, State().args, State().opts);
  });
}

PF_EXPORT int slurm_spank_exit(spank_t sp, int ac, char** av) {
  return Guard("exit", [&] {
    State().table.clear();
    State().initialized = false;
    State().post_opt_calls = 0;
    State().nccl_check_inherited = false;
    if (spank_context() == S_CTX_REMOTE) preflight::spank::StepExit();
    return 0;
  });
}
