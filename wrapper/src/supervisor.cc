#include "preflight/supervisor.h"

#include "preflight/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"

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

// Installs the handlers (relayed signals and SIGCHLD to the self-pipe,
// SIGPIPE ignored so a closed job output cannot kill the supervisor) and
// puts the caller's back when it goes out of scope.
class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      status_ = Status::FromErrno(errno, "signal pipe");
      return;
    }
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (int s : kRelayed) Install(s, sa);
    Install(SIGCHLD, sa);
    struct sigaction ign;
    std::memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    Install(SIGPIPE, ign);
  }
  ~SignalScope() {
    for (auto& o : old_) ::sigaction(o.first, &o.second, nullptr);
    if (g_signal_pipe[0] >= 0) ::close(g_signal_pipe[0]);
    if (g_signal_pipe[1] >= 0) ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  const Status& status() const { return status_; }

 private:
  void Install(int sig, const struct sigaction& sa) {
    struct sigaction old;
    ::sigaction(sig, &sa, &old);
    old_.push_back({sig, old});
  }
  Status status_;
  std::vector<std::pair<int, struct sigaction>> old_;
};

Status Touch(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "checkpoint request file " + path);
  ::futimens(fd, nullptr);
  ::close(fd);
  return Status::Ok();
}

// mtime in ns, 0 when the file is absent.
long long MtimeNs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

// One output stream of the child: bytes are copied through at once, lines
// are cut for the watch. A line longer than 64 KiB is cut there.
struct Stream {
  int fd = -1;
  int to = -1;
  std::string partial;
};

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

Expected<int> ParseSignal(const std::string& s) {
  if (s.empty() || s == "none" || s == "0") return 0;
  bool digits = std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits && s.size() < 3) {
    int n = std::stoi(s);
    if (n > 0 && n < NSIG) return n;
  }
  std::string name = s.rfind("SIG", 0) == 0 ? s.substr(3) : s;
  for (int i = 1; i < NSIG; ++i) {
    const char* a = sigabbrev_np(i);
    if (a != nullptr && name == a) return i;
  }
  return Status::InvalidArgument("unknown signal '" + s + "' (e.g. USR2, TERM, none)");
}

Expected<std::vector<int>> ParseSignalList(const std::string& s) {
  std::vector<int> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    std::string item = s.substr(b, e - b);
    if (!item.empty() && item != "none") {
      auto sig = ParseSignal(item);
      if (!sig) return sig.status();
      if (std::find(std::begin(kRelayed), std::end(kRelayed), *sig) == std::end(kRelayed))
        return Status::InvalidArgument("signal '" + item + "' cannot be a preemption signal (use USR2, TERM, ...)");
      out.push_back(*sig);
    }
    b = e + 1;
  }
  return out;
}

Expected<SuperviseResult> RunSupervised(const SuperviseOptions& o) {
  if (o.argv.empty()) return Status::InvalidArgument("no command given");
  double start = MonotonicSeconds();
  auto watch_or = StallWatch::Create(o.stall, start);
  if (!watch_or) return watch_or.status();
  StallWatch& watch = **watch_or;
  SignalScope signals;
  if (!signals.status().ok()) return signals.status();

  SpawnSpec spec;
  spec.argv = o.argv;
  spec.env = MergedEnv(o.env);
  spec.output = SpawnSpec::Output::kSplit;
  spec.stdin_null = false;  // an interactive srun --pty keeps its terminal
  spec.reset_signals.assign(std::begin(kRelayed), std::end(kRelayed));
  spec.reset_signals.push_back(SIGCHLD);
  spec.reset_signals.push_back(SIGPIPE);
  spec.exec_error_as_status = true;
  auto child = Start(spec);
  if (!child) return child.status();
  const pid_t pid = child->pid;

  SuperviseResult res;
  Stream streams[2];
  streams[0].fd = child->out;
  streams[0].to = o.out_fd;
  streams[1].fd = child->err;
  streams[1].to = o.err_fd;
  for (auto& s : streams) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
  std::deque<std::string> tail;

  bool exited = false, stopping = false, killed = false, pending_kill = false;
  double pending_since = 0;
  int status = 0;
  double exit_at = 0, term_at = 0, preempt_deadline = 0, next_tick = start + 1, next_gpu = start;
  long long heartbeat_mtime = o.heartbeat_file.empty() ? 0 : MtimeNs(o.heartbeat_file);

  auto stop = [&](double now) {
    if (stopping) return;
    stopping = true;
    term_at = now;
    ::kill(-pid, SIGTERM);
    ::kill(-pid, SIGCONT);  // a stopped group never sees SIGTERM
  };
  auto alert = [&](const Alert& a, double now) {
    res.alerts.push_back(a);
    if (o.on_alert) o.on_alert(a);
    if (o.kill_on_stall && !exited && !stopping) {
      res.killed_for_alert = true;
      if (o.kill_held && a.kind != AlertKind::kNan) {
        if (!pending_kill) pending_since = now;
        pending_kill = true;
      } else {
        stop(now);
      }
    }
  };
  auto line = [&](std::string l, double now) {
    if (tail.size() >= o.tail_lines && !tail.empty()) tail.pop_front();
    auto a = watch.OnLine(l, now);
    tail.push_back(std::move(l));
    if (a) alert(*a, now);
  };

  for (;;) {
    struct pollfd fds[3] = {{g_signal_pipe[0], POLLIN, 0}, {streams[0].fd, POLLIN, 0}, {streams[1].fd, POLLIN, 0}};
    ::poll(fds, 3, exited ? 50 : 200);
    double now = MonotonicSeconds();

    unsigned char sig;
    while (::read(g_signal_pipe[0], &sig, 1) == 1) {
      if (sig == SIGCHLD) continue;
      if (std::find(o.preempt_signals.begin(), o.preempt_signals.end(), sig) != o.preempt_signals.end()) {
        if (res.preempted) continue;
        if (exited) {
          // Slurm signals every process of the step (scancel, preemption
          // without B:), so the command may die of the same signal just
          // before ours is read. A non-zero end plus the preemption signal is
          // still a preemption; a clean exit 0 is not.
          bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
          if (!clean) {
            res.preempted = true;
            res.preempt_signal = sig;
            Log(LogLevel::kInfo, "run", "preemption signal " + SignalName(sig), "arrived as the command ended");
          }
          continue;
        }
        res.preempted = true;
        res.preempt_signal = sig;
        preempt_deadline = now + o.grace_s;
        std::string how;
        if (o.checkpoint_signal != 0) {
          ::kill(-pid, o.checkpoint_signal);
          how = SignalName(o.checkpoint_signal);
        }
        if (!o.checkpoint_request_file.empty()) {
          Status t = Touch(o.checkpoint_request_file);
          if (!t.ok()) Log(LogLevel::kError, "run", "preemption", t.message());
          how += (how.empty() ? "" : " and ") + o.checkpoint_request_file;
        }
        char g[32];
        std::snprintf(g, sizeof g, "%.0fs", o.grace_s);
        Log(LogLevel::kInfo, "run", "preemption signal " + SignalName(sig),
            "asked the command to checkpoint (" + (how.empty() ? std::string("nothing to send") : how) +
                "), grace " + g);
        continue;
      }
      ::kill(-pid, sig);
      res.exit.relayed.push_back(sig);
    }

    for (auto& s : streams) {
      if (s.fd < 0) continue;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;  // EAGAIN: nothing more now
        if (n == 0) {
          ::close(s.fd);
          s.fd = -1;
          if (!s.partial.empty()) line(std::move(s.partial), now), s.partial.clear();
          break;
        }
        WriteAll(s.to, buf, static_cast<size_t>(n));  // job output gone: keep supervising, drop the bytes
        size_t b = 0;
        for (ssize_t i = 0; i < n; ++i) {
          if (buf[i] != '\n') continue;
          s.partial.append(buf + b, static_cast<size_t>(i) - b);
          line(std::move(s.partial), now);
          s.partial.clear();
          b = static_cast<size_t>(i) + 1;
        }
        s.partial.append(buf + b, static_cast<size_t>(n) - b);
        if (s.partial.size() > 65536) { line(std::move(s.partial), now); s.partial.clear(); }
      }
    }

    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exit_at = now;
    }
    if (exited) {
      // A grandchild may hold the pipes open; a second after the child
      // ended its output is no longer the child's. After an unclean end,
      // wait a moment for a preemption signal still on its way: Slurm
      // signals every process of the step, and ours may land just after
      // the command died of the same signal (scancel).
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      bool settled = clean || res.preempted || now - exit_at > 0.25;
      if ((streams[0].fd < 0 && streams[1].fd < 0 && settled) || now - exit_at > 1.0) break;
      continue;
    }

    if (!o.heartbeat_file.empty()) {
      long long m = MtimeNs(o.heartbeat_file);
      if (m != heartbeat_mtime) {
        heartbeat_mtime = m;
        watch.OnHeartbeat(now);
      }
    }
    if (o.gpu != nullptr && o.stall.gpu_s > 0 && now >= next_gpu) {
      next_gpu = now + o.gpu_sample_s;
      auto u = o.gpu->Utilization();
      if (u) watch.OnGpuSample(*u, now);
    }
    for (const auto& a : watch.Check(now)) alert(a, now);
    if (pending_kill && !stopping && (!o.kill_held() || now - pending_since > o.kill_hold_max_s)) stop(now);
    if (res.preempted && !stopping && now >= preempt_deadline) {
      res.grace_expired = true;
      Log(LogLevel::kInfo, "run", "preemption", "grace period over: stopping the command (SIGTERM)");
      stop(now);
    }
    if (stopping && !killed && now >= term_at + o.kill_wait_s) {
      killed = true;
      ::kill(-pid, SIGKILL);
    }
    if (o.on_tick && now >= next_tick) {
      next_tick = now + 1;
      o.on_tick();
    }
  }
  for (auto& s : streams) {
    if (s.fd >= 0) ::close(s.fd);
    if (!s.partial.empty()) line(std::move(s.partial), MonotonicSeconds());
  }
  if (WIFEXITED(status)) res.exit.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    res.exit.signal = WTERMSIG(status);
    res.exit.exit_code = 128 + res.exit.signal;
  }
  res.tail.assign(tail.begin(), tail.end());
  res.seconds = MonotonicSeconds() - start;
  return res;
}

Expected<ChildExit> RunSupervised(const std::vector<std::string>& argv) {
  SuperviseOptions o;
  o.argv = argv;
  auto r = RunSupervised(o);
  if (!r) return r.status();
  return r->exit;
}

}  // namespace preflight
