// The one way stage/ runs code as the job user, the child's side
// (stage_user_child.h): BecomeStageUser, StageChildEnd, KillChild.
#include "stage_user_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace preflight {
namespace {

// The signals that end a reader, by name (sigabbrev_np is glibc 2.32+;
// RHEL 8 has 2.28).
const char* SignalName(int sig) {
  switch (sig) {
    case SIGKILL: return "KILL";
    case SIGTERM: return "TERM";
    case SIGINT: return "INT";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    case SIGSEGV: return "SEGV";
    case SIGBUS: return "BUS";
    case SIGABRT: return "ABRT";
    case SIGXCPU: return "XCPU";
    case SIGXFSZ: return "XFSZ";
    case SIGPIPE: return "PIPE";
    default: return nullptr;
  }
}

}  // namespace

namespace stage_internal {

std::string BecomeStageUser(int fd, const StageIdentity& who, int* err) {
  if (fd != 3) ::dup2(fd, 3);
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  // stdio on /dev/null: the prolog's stdout and stderr are slurmd's pipes,
  // and a child left stuck in a dead server (KillChild) must not hold them
  // open, or slurmd waits for the prolog's output as long as the server.
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int i = 0; i < 3; ++i) ::dup2(null, i);
    if (null > 3) ::close(null);
  }
  std::string error;
  if (who.drop && !ReadAsStageUser(who, &error)) {
    if (err) *err = errno;
    return "cannot read as user " + std::to_string(who.uid) + ": " + error;
  }
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  return "";
}

bool KillChild(pid_t pid, double bound_s) {
  if (pid <= 0) return true;
  ::kill(pid, SIGKILL);
  int st;
  for (double waited = 0; waited < bound_s; waited += 0.01) {
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    struct timespec ts = {0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  return false;
}

Status StageChildEnd(pid_t* pid, const char* what, const std::string& src, FaultSide* side) {
  int st = 0;
  pid_t r = 0;
  if (*pid > 0) {
    // The child closed its end: it is exiting. Bounded all the same.
    for (int i = 0; i < 1000 && (r = ::waitpid(*pid, &st, WNOHANG)) == 0; ++i) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      ::nanosleep(&ts, nullptr);
    }
    if (r == 0) {
      ::kill(*pid, SIGKILL);
      while ((r = ::waitpid(*pid, &st, 0)) < 0 && errno == EINTR) {}
    }
    *pid = -1;
  }
  std::string head = "staging " + src + ": the " + what;
  if (r > 0 && WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    const char* name = SignalName(sig);
    *side = FaultSide::kSource;
    return Status::IOError(head + " (reading as the job's user) was killed by signal " + std::to_string(sig) +
                           (name ? std::string(" (SIG") + name + ")" : std::string()) +
                           ": by the job's own processes, root or the out-of-memory killer; the node is not at fault");
  }
  *side = FaultSide::kNode;
  std::string how = r > 0 && WIFEXITED(st) ? " (exit " + std::to_string(WEXITSTATUS(st)) + ")" : "";
  return Status::IOError(head + " ended without a result" + how);
}

}  // namespace stage_internal
}  // namespace preflight
