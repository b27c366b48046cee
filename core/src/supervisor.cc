#include "preflight/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace preflight {
namespace {

constexpr int kRelayed[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP};
int g_signal_pipe[2] = {-1, -1};

// Self-pipe: the handler only writes the signal number.
void OnSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t r = ::write(g_signal_pipe[1], &b, 1);
  (void)r;
  errno = saved;
}

}  // namespace

Expected<ChildExit> RunSupervised(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("no command given");
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno(errno, "pipe");
  struct sigaction sa, old[sizeof kRelayed / sizeof kRelayed[0]];
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof kRelayed / sizeof kRelayed[0]; ++i) ::sigaction(kRelayed[i], &sa, &old[i]);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int exec_err[2];
  if (::pipe2(exec_err, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s : kRelayed) ::sigaction(s, &dfl, nullptr);
    ::execvp(cargv[0], cargv.data());
    int e = errno;
    ssize_t r = ::write(exec_err[1], &e, sizeof e);
    (void)r;
    _exit(127);
  }
  ::setpgid(pid, pid);
  ::close(exec_err[1]);
  int child_errno = 0;
  ssize_t got = ::read(exec_err[0], &child_errno, sizeof child_errno);
  ::close(exec_err[0]);

  ChildExit out;
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    struct pollfd p = {g_signal_pipe[0], POLLIN, 0};
    ::poll(&p, 1, 50);
    unsigned char b;
    while (::read(g_signal_pipe[0], &b, 1) == 1) {
      ::kill(-pid, b);
      out.relayed.push_back(b);
    }
  }
  for (size_t i = 0; i < sizeof kRelayed / sizeof kRelayed[0]; ++i) ::sigaction(kRelayed[i], &old[i], nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  if (got == static_cast<ssize_t>(sizeof child_errno))
    return Status::FromErrno(child_errno, "cannot run " + argv[0]);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) { out.signal = WTERMSIG(status); out.exit_code = 128 + out.signal; }
  return out;
}

}  // namespace preflight
