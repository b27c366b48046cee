// Run one command as a child in its own process group and relay signals to
// it, as preflight-run does inside a job. The caller's signal dispositions
// for the relayed signals are replaced while Run() is active.
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

struct ChildExit {
  int exit_code = 0;    // exit status, or 128+signal when killed by a signal
  int signal = 0;       // the terminating signal, 0 if it exited
  std::vector<int> relayed;  // signals forwarded to the child, in order
};

// Fork/exec argv (PATH searched), forward SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2, SIGCONT and SIGTSTP to the child's process group, wait.
// Fails only if the child cannot be started (exit 127 semantics left to caller).
Expected<ChildExit> RunSupervised(const std::vector<std::string>& argv);

}  // namespace preflight
