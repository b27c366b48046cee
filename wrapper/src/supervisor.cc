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

namespace {

// One supervised run: the child, its two output streams, the stall watch
// and the signals, from start to the child's end. Poll wakes the loop; each
// round reads the signals, then the output, then (while the child lives)
// the watch's clocks.
class Supervision {
 public:
  Supervision(const SuperviseOptions& o, StallWatch& watch, pid_t pid, int out, int err, double start)
      : o_(o), watch_(watch), pid_(pid), start_(start), next_tick_(start + 1), next_gpu_(start) {
    streams_[0].fd = out;
    streams_[0].to = o.out_fd;
    streams_[1].fd = err;
    streams_[1].to = o.err_fd;
    for (auto& s : streams_) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
    heartbeat_mtime_ = o.heartbeat_file.empty() ? 0 : MtimeNs(o.heartbeat_file);
  }

  SuperviseResult Run() {
    for (;;) {
      struct pollfd fds[3] = {{g_signal_pipe[0], POLLIN, 0}, {streams_[0].fd, POLLIN, 0}, {streams_[1].fd, POLLIN, 0}};
      ::poll(fds, 3, exited_ ? 50 : 200);
      double now = MonotonicSeconds();
      ReadSignals(now);
      ReadOutput(now);
      if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) {
        exited_ = true;
        exit_at_ = now;
      }
      if (exited_) {
        // A grandchild may hold the pipes open; a second after the child
        // ended its output is no longer the child's. After an unclean end,
        // wait a moment for a preemption signal still on its way: Slurm
        // signals every process of the step, and ours may land just after
        // the command died of the same signal (scancel).
        bool clean = WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
        bool settled = clean || res_.preempted || now - exit_at_ > 0.25;
        if ((streams_[0].fd < 0 && streams_[1].fd < 0 && settled) || now - exit_at_ > 1.0) break;
        continue;
      }
      WatchRound(now);
    }
    for (auto& s : streams_) {
      if (s.fd >= 0) ::close(s.fd);
      if (!s.partial.empty()) Line(std::move(s.partial), MonotonicSeconds());
    }
    if (WIFEXITED(status_)) res_.exit.exit_code = WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) {
      res_.exit.signal = WTERMSIG(status_);
      res_.exit.exit_code = 128 + res_.exit.signal;
    }
    res_.tail.assign(tail_.begin(), tail_.end());
    res_.seconds = MonotonicSeconds() - start_;
    return res_;
  }

 private:
  void Stop(double now) {
    if (stopping_) return;
    stopping_ = true;
    term_at_ = now;
    ::kill(-pid_, SIGTERM);
    ::kill(-pid_, SIGCONT);  // a stopped group never sees SIGTERM
  }

  void Raise(const Alert& a, double now) {
    res_.alerts.push_back(a);
    if (o_.on_alert) o_.on_alert(a);
    if (o_.kill_on_stall && !exited_ && !stopping_) {
      res_.killed_for_alert = true;
      if (o_.kill_held && a.kind != AlertKind::kNan) {
        if (!pending_kill_) pending_since_ = now;
        pending_kill_ = true;
      } else {
        Stop(now);
      }
    }
  }

  void Line(std::string l, double now) {
    if (tail_.size() >= o_.tail_lines && !tail_.empty()) tail_.pop_front();
    auto a = watch_.OnLine(l, now);
    tail_.push_back(std::move(l));
    if (a) Raise(*a, now);
  }

  // The self-pipe's signals: a preemption signal asks the command to
  // checkpoint (once) and starts the grace time; the rest are relayed.
  void ReadSignals(double now) {
    unsigned char sig;
    while (::read(g_signal_pipe[0], &sig, 1) == 1) {
      if (sig == SIGCHLD) continue;
      if (std::find(o_.preempt_signals.begin(), o_.preempt_signals.end(), sig) != o_.preempt_signals.end()) {
        Preempted(sig, now);
        continue;
      }
      ::kill(-pid_, sig);
      res_.exit.relayed.push_back(sig);
    }
  }

  void Preempted(int sig, double now) {
    if (res_.preempted) return;
    if (exited_) {
      // Slurm signals every process of the step (scancel, preemption
      // without B:), so the command may die of the same signal just
      // before ours is read. A non-zero end plus the preemption signal is
      // still a preemption; a clean exit 0 is not.
      bool clean = WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
      if (!clean) {
        res_.preempted = true;
        res_.preempt_signal = sig;
        Log(LogLevel::kInfo, "run", "preemption signal " + SignalName(sig), "arrived as the command ended");
      }
      return;
    }
    res_.preempted = true;
    res_.preempt_signal = sig;
    preempt_deadline_ = now + o_.grace_s;
    std::string how;
    if (o_.checkpoint_signal != 0) {
      ::kill(-pid_, o_.checkpoint_signal);
      how = SignalName(o_.checkpoint_signal);
    }
    if (!o_.checkpoint_request_file.empty()) {
      Status t = Touch(o_.checkpoint_request_file);
      if (!t.ok()) Log(LogLevel::kError, "run", "preemption", t.message());
      how += (how.empty() ? "" : " and ") + o_.checkpoint_request_file;
    }
    char g[32];
    std::snprintf(g, sizeof g, "%.0fs", o_.grace_s);
    Log(LogLevel::kInfo, "run", "preemption signal " + SignalName(sig),
        "asked the command to checkpoint (" + (how.empty() ? std::string("nothing to send") : how) + "), grace " + g);
  }

  // Bytes are copied through at once; lines are cut for the watch (one
  // longer than 64 KiB is cut there).
  void ReadOutput(double now) {
    for (auto& s : streams_) {
      if (s.fd < 0) continue;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;  // EAGAIN: nothing more now
        if (n == 0) {
          ::close(s.fd);
          s.fd = -1;
          if (!s.partial.empty()) Line(std::move(s.partial), now), s.partial.clear();
          break;
        }
        WriteAll(s.to, buf, static_cast<size_t>(n));  // job output gone: keep supervising, drop the bytes
        size_t b = 0;
        for (ssize_t i = 0; i < n; ++i) {
          if (buf[i] != '\n') continue;
          s.partial.append(buf + b, static_cast<size_t>(i) - b);
          Line(std::move(s.partial), now);
          s.partial.clear();
          b = static_cast<size_t>(i) + 1;
        }
        s.partial.append(buf + b, static_cast<size_t>(n) - b);
        if (s.partial.size() > 65536) { Line(std::move(s.partial), now); s.partial.clear(); }
      }
    }
  }

  // While the child lives: heartbeat and GPU samples into the watch, its
  // alerts, a held stall kill, the grace time's end, SIGKILL after
  // kill_wait, and the caller's tick once a second.
  void WatchRound(double now) {
    if (!o_.heartbeat_file.empty()) {
      long long m = MtimeNs(o_.heartbeat_file);
      if (m != heartbeat_mtime_) {
        heartbeat_mtime_ = m;
        watch_.OnHeartbeat(now);
      }
    }
    if (o_.gpu != nullptr && o_.stall.gpu_s > 0 && now >= next_gpu_) {
      next_gpu_ = now + o_.gpu_sample_s;
      auto u = o_.gpu->Utilization();
      if (u) watch_.OnGpuSample(*u, now);
    }
    for (const auto& a : watch_.Check(now)) Raise(a, now);
    if (pending_kill_ && !stopping_ && (!o_.kill_held() || now - pending_since_ > o_.kill_hold_max_s)) Stop(now);
    if (res_.preempted && !stopping_ && now >= preempt_deadline_) {
      res_.grace_expired = true;
      Log(LogLevel::kInfo, "run", "preemption", "grace period over: stopping the command (SIGTERM)");
      Stop(now);
    }
    if (stopping_ && !killed_ && now >= term_at_ + o_.kill_wait_s) {
      killed_ = true;
      ::kill(-pid_, SIGKILL);
    }
    if (o_.on_tick && now >= next_tick_) {
      next_tick_ = now + 1;
      o_.on_tick();
    }
  }

  const SuperviseOptions& o_;
  StallWatch& watch_;
  const pid_t pid_;
  const double start_;
  SuperviseResult res_;
  Stream streams_[2];
  std::deque<std::string> tail_;
  bool exited_ = false, stopping_ = false, killed_ = false, pending_kill_ = false;
  double pending_since_ = 0;
  int status_ = 0;
  double exit_at_ = 0, term_at_ = 0, preempt_deadline_ = 0, next_tick_, next_gpu_;
  long long heartbeat_mtime_ = 0;
};

}  // namespace

Expected<SuperviseResult> RunSupervised(const SuperviseOptions& o) {
  if (o.argv.empty()) return Status::InvalidArgument("no command given");
  double start = MonotonicSeconds();
  auto watch_or = StallWatch::Create(o.stall, start);
  if (!watch_or) return watch_or.status();
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
  return Supervision(o, **watch_or, child->pid, child->out, child->err, start).Run();
}

Expected<ChildExit> RunSupervised(const std::vector<std::string>& argv) {
  SuperviseOptions o;
  o.argv = argv;
  auto r = RunSupervised(o);
  if (!r) return r.status();
  return r->exit;
}

}  // namespace preflight
