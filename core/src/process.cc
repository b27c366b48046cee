#include "preflight/process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "preflight/clock.h"

namespace preflight {
namespace {

long NowMs() { return static_cast<long>(MonotonicSeconds() * 1000); }

// argv[0] as execve needs it: a name without '/' searched in the PATH of
// the child's environment (execvpe would search this process's PATH).
std::string FindInPath(const std::string& prog, const std::vector<std::string>& env) {
  if (prog.find('/') != std::string::npos) return prog;
  std::string path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find(':', b);
    if (e == std::string::npos) e = path.size();
    std::string dir = path.substr(b, e - b);
    std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    b = e + 1;
  }
  return prog;
}

void CloseAll(std::initializer_list<int*> fds) {
  for (int* fd : fds)
    if (*fd >= 0) { ::close(*fd); *fd = -1; }
}

}  // namespace

Expected<Child> Start(const SpawnSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("empty command");
  // Everything the child needs is built here: after fork it only makes
  // async-signal-safe calls.
  const std::string exe = FindInPath(spec.argv[0], spec.env);
  auto cargv = CStrings(spec.argv);
  auto cenv = CStrings(spec.env);
  const std::string exec_msg = "preflight: cannot run " + spec.argv[0] + "\n";
  const bool drop = spec.drop && ::geteuid() == 0 && spec.as.uid != 0;
  const bool capture = !spec.detach && spec.output != SpawnSpec::Output::kDevNull;
  const bool split = capture && spec.output == SpawnSpec::Output::kSplit;
  int out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
  auto fail = [&](const std::string& what) {
    int e = errno;
    CloseAll({&out[0], &out[1], &err[0], &err[1], &ex[0], &ex[1]});
    return Status::FromErrno(e, what + " for " + spec.argv[0]);
  };
  if (capture && ::pipe2(out, O_CLOEXEC) != 0) return fail("pipe");
  if (split && ::pipe2(err, O_CLOEXEC) != 0) return fail("pipe");
  if (spec.exec_error_as_status && ::pipe2(ex, O_CLOEXEC) != 0) return fail("pipe");
  pid_t pid = ::fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) {
    if (spec.detach) {
      ::setsid();
      pid_t grandchild = ::fork();
      if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    } else if (spec.own_process_group) {
      ::setpgid(0, 0);
    }
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0 && (spec.stdin_null || spec.detach)) ::dup2(devnull, 0);
    int o = capture ? out[1] : devnull;
    int e = split ? err[1] : o;
    if (o >= 0) ::dup2(o, 1);
    if (e >= 0) ::dup2(e, 2);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig : spec.reset_signals) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (drop && (::setgroups(spec.as.groups.size(), spec.as.groups.data()) != 0 ||
                 ::setregid(spec.as.gid, spec.as.gid) != 0 || ::setreuid(spec.as.uid, spec.as.uid) != 0)) {
      static const char msg[] = "preflight: cannot drop privileges\n";
      (void)!::write(2, msg, sizeof msg - 1);
      _exit(126);
    }
    ::execve(exe.c_str(), cargv.data(), cenv.data());
    int errnum = errno;
    if (ex[1] >= 0) (void)!::write(ex[1], &errnum, sizeof errnum);
    else (void)!::write(2, exec_msg.data(), exec_msg.size());
    _exit(127);
  }
  if (spec.own_process_group && !spec.detach) ::setpgid(pid, pid);  // whichever runs first wins the race
  CloseAll({&out[1], &err[1], &ex[1]});
  Child c;
  c.pid = pid;
  c.out = out[0];
  c.err = err[0];
  if (spec.detach) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    CloseAll({&ex[0]});
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Status::IOError("could not detach " + spec.argv[0]);
    c.pid = -1;
    return c;
  }
  if (ex[0] >= 0) {
    int child_errno = 0;
    ssize_t got;
    do got = ::read(ex[0], &child_errno, sizeof child_errno); while (got < 0 && errno == EINTR);
    CloseAll({&ex[0]});
    if (got == static_cast<ssize_t>(sizeof child_errno)) {
      int st;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
      CloseAll({&c.out, &c.err});
      return Status::FromErrno(child_errno, "cannot run " + spec.argv[0]);
    }
  }
  return c;
}

ProcessResult Collect(Child& c, unsigned timeout_ms, size_t cap) {
  ProcessResult r;
  long deadline = NowMs() + timeout_ms;
  bool open = c.out >= 0;
  while (open) {
    long left = deadline - NowMs();
    if (left <= 0) {
      r.timed_out = true;
      ::kill(-c.pid, SIGKILL);
      break;
    }
    struct pollfd p = {c.out, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left > INT_MAX ? INT_MAX : left));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[8192];
    ssize_t k = ::read(c.out, buf, sizeof buf);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      open = false;
    } else if (r.output.size() < cap) {
      r.output.append(buf, static_cast<size_t>(k));
    }
  }
  CloseAll({&c.out});
  // The output closed (or we killed it): reap, bounded in time, then force.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(c.pid, &status, WNOHANG);
    if (w == c.pid) break;
    if (w < 0 && errno != EINTR) break;
    if (NowMs() > deadline) {
      r.timed_out = true;
      ::kill(-c.pid, SIGKILL);
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
      break;
    }
    ::usleep(2000);
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

Expected<ProcessResult> RunCommand(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& extra_env, unsigned timeout_ms) {
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = MergedEnv(extra_env);
  auto c = Start(spec);
  if (!c) return c.status();
  return Collect(*c, timeout_ms);
}

Status SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = MergedEnv(extra_env);
  spec.detach = true;
  spec.output = SpawnSpec::Output::kDevNull;
  return Start(spec).status();
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
