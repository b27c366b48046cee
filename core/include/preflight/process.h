// Child processes: bounded in time, stdin on /dev/null, output captured.
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

struct ProcessResult {
  int exit_code = -1;     // exit status, or 128+signal when killed by a signal
  bool timed_out = false;
  std::string output;     // stdout and stderr together, capped at 64 KiB
};

// Run argv[0] (PATH searched) with `extra_env` ("K=V") added to this
// process's environment. On timeout the child's whole process group gets
// SIGKILL and timed_out is set. Fails only when the child can't be started.
Expected<ProcessResult> RunCommand(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& extra_env, unsigned timeout_ms);

// Start argv detached from this process (double fork, new session, stdio on
// /dev/null) and return at once; the caller never waits for it. Used where
// Slurm forbids a prolog to block on Slurm commands.
Status SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);

// This process's environment with `extra` ("K=V") replacing or adding
// entries; built before fork so a child only has to exec.
std::vector<std::string> MergedEnv(const std::vector<std::string>& extra);
// argv/envp view of `v` (NULL-terminated); valid while `v` lives.
std::vector<char*> CStrings(const std::vector<std::string>& v);

// Path of the running executable (/proc/self/exe).
std::string SelfExe();

}  // namespace preflight
