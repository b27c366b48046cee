// Child processes: bounded in time, stdin on /dev/null, output captured.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

struct ProcessResult {
  int exit_code = -1;     // exit status, or 128+signal when killed by a signal
  bool timed_out = false;
  std::string output;     // stdout and stderr together, capped (64 KiB by default)
};

// How to start a child: the one fork+exec of the code base (RunCommand,
// RunAs, SpawnDetached and the wrapper's supervisor are all built on it).
// In the child, before exec: stdin on /dev/null (unless kept), the signal mask cleared,
// `reset_signals` back to SIG_DFL, its own process group, then the
// identity dropped (setgroups, setregid, setreuid, in that order; a failed
// drop never execs). argv[0] is searched in the PATH of `env`.
struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // the child's whole environment ("K=V")
  struct Identity {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  bool drop = false;  // switch to `as` (only when running as root)
  Identity as;
  enum class Output { kMerged, kSplit, kDevNull };
  Output output = Output::kMerged;  // kMerged: stdout+stderr on one pipe; kSplit: one each
  bool own_process_group = true;
  bool stdin_null = true;           // false: the child inherits stdin (the wrapper's training command)
  bool detach = false;              // new session, double fork: nobody waits (output kDevNull)
  std::vector<int> reset_signals;
  // When exec fails: false, the child writes "preflight: cannot run ARGV0"
  // to its output and exits 127 (a command's own exit code); true, Start
  // returns the errno as an error (the child is reaped).
  bool exec_error_as_status = false;
};

struct Child {
  pid_t pid = -1;
  int out = -1;  // read ends (kMerged: out only; kSplit: out and err)
  int err = -1;
};

Expected<Child> Start(const SpawnSpec& spec);

// Read `c`'s merged output (up to `cap` bytes kept) until it closes, then
// reap it; past `timeout_ms` its whole process group gets SIGKILL and
// timed_out is set. Closes c.out.
ProcessResult Collect(Child& c, unsigned timeout_ms, size_t cap = 64 << 10);

// Run argv[0] (PATH searched) with `extra_env` ("K=V") added to this
// process's environment, output merged and capped at 64 KiB. On timeout the
// child's whole process group gets SIGKILL and timed_out is set. Fails only
// when the child can't be started.
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
