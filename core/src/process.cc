#include "preflight/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "preflight/clock.h"

namespace preflight {
namespace {

// In the child after fork: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, const std::vector<char*>& env, int out_fd) {
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) ::dup2(devnull, 0);
  int o = out_fd >= 0 ? out_fd : devnull;
  if (o >= 0) { ::dup2(o, 1); ::dup2(o, 2); }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(argv[0], argv.data(), env.data());
  _exit(127);
}

long NowMs() { return static_cast<long>(MonotonicSeconds() * 1000); }

}  // namespace

Expected<ProcessResult> RunCommand(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& extra_env, unsigned timeout_ms) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  auto cargv = CStrings(argv);
  auto env = MergedEnv(extra_env);
  auto cenv = CStrings(env);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Status::FromErrno(e, "fork for " + argv[0]);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ExecChild(cargv, cenv, pipefd[1]);
  }
  ::setpgid(pid, pid);
  ::close(pipefd[1]);
  ProcessResult r;
  long deadline = NowMs() + timeout_ms;
  bool open = true;
  while (open) {
    long left = deadline - NowMs();
    if (left <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    struct pollfd p = {pipefd[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left > INT_MAX ? INT_MAX : left));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t k = ::read(pipefd[0], buf, sizeof buf);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      open = false;
    } else if (r.output.size() < 65536) {
      r.output.append(buf, static_cast<size_t>(k));
    }
  }
  ::close(pipefd[0]);
  // The output closed (or we killed it): reap, bounded in time, then force.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (NowMs() > deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(2000);
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

Status SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  auto cargv = CStrings(argv);
  auto env = MergedEnv(extra_env);
  auto cenv = CStrings(env);
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork for " + argv[0]);
  if (pid == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    ExecChild(cargv, cenv, -1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::IOError("could not detach " + argv[0]);
  return Status::Ok();
}

std::vector<std::string> MergedEnv(const std::vector<std::string>& extra) {

  std::vector<std::string> env;
  for (char** e = ::environ; e && *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& x : extra)
      if (x.compare(0, key.size() + 1, key + "=") == 0) replaced = true;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace preflight
