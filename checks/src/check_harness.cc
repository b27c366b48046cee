// The check harness: each check in its own child under a time budget,
// results back over a pipe as they are found, the site's switches applied.
#include "preflight/checks.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "preflight/fileutil.h"
#include "preflight/severity.h"

namespace preflight {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kProlog: return "prolog";
    case Phase::kEpilog: return "epilog";
    case Phase::kHealth: return "health";
  }
  return "prolog";
}

namespace {

unsigned Budget(const CheckDescriptor& d, const Config& cfg) {
  if (d.budget != nullptr) return d.budget(cfg);
  return d.timeout_ms != 0 ? d.timeout_ms : cfg.probe_timeout_ms;
}

// The write end of the pipe in a check's child; -1 in the parent.
int g_probe_fd = -1;

std::string Escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '\t') o += "\\t";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

std::string Unescape(const std::string& v) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      char n = v[++i];
      o += n == 't' ? '\t' : n == 'n' ? '\n' : n;
    } else {
      o += v[i];
    }
  }
  return o;
}

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> f;
  size_t b = 0;
  for (;;) {
    size_t t = line.find('\t', b);
    f.push_back(Unescape(line.substr(b, t == std::string::npos ? std::string::npos : t - b)));
    if (t == std::string::npos) break;
    b = t + 1;
  }
  return f;
}

std::string Serialize(const CheckResult& r) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.9g", r.seconds);
  return "R\t" + Escape(r.check) + "\t" + Escape(r.device) + "\t" + Escape(r.value) + "\t" +
         Escape(r.threshold) + "\t" + VerdictName(r.verdict) + "\t" + Escape(r.message) + "\t" + secs + "\t" + FaultOwnerName(r.owner) + "\n";
}

Verdict VerdictFromName(const std::string& s) {
  if (s == "pass") return Verdict::kPass;
  if (s == "warn") return Verdict::kWarn;
  if (s == "skipped") return Verdict::kSkip;
  return Verdict::kFail;
}

struct Child {
  const CheckDescriptor* d = nullptr;
  pid_t pid = -1;
  int fd = -1;
  double started = 0;
  double deadline = 0;
  std::string buf;
  std::vector<CheckResult> results;
  std::string step_check, step_device, step_what;  // last ProbeStep
  bool timed_out = false;
  int status = 0;
};

void ParseLines(Child& c, bool final) {
  size_t nl;
  while ((nl = c.buf.find('\n')) != std::string::npos || (final && !c.buf.empty())) {
    std::string line = nl == std::string::npos ? c.buf : c.buf.substr(0, nl);
    c.buf.erase(0, nl == std::string::npos ? c.buf.size() : nl + 1);
    auto f = SplitTabs(line);
    if (f[0] == "R" && f.size() == 9) {
      CheckResult r;
      r.check = f[1];
      r.device = f[2];
      r.value = f[3];
      r.threshold = f[4];
      r.verdict = VerdictFromName(f[5]);
      r.message = f[6];
      r.seconds = std::atof(f[7].c_str());
      r.owner = FaultOwnerFromName(f[8]).value_or(FaultOwner::kNode);
      c.results.push_back(std::move(r));
    } else if (f[0] == "P" && f.size() == 4) {
      c.step_check = f[1];
      c.step_device = f[2];
      c.step_what = f[3];
    }
  }
}

// The child: run the check, stream its results, leave without running
// atexit handlers or flushing the parent's stdio buffers (_exit).
[[noreturn]] void RunChild(const CheckDescriptor& d, const CheckEnv& env, int fd) {
  g_probe_fd = fd;
  double t0 = MonotonicSeconds();
  std::vector<CheckResult> rs;
  try {
    rs = d.run(env);
  } catch (const std::exception& e) {
    CheckResult r;
    r.check = d.name;
    r.verdict = Verdict::kFail;
    r.message = std::string("check raised: ") + e.what();
    rs.push_back(r);
  } catch (...) {
    CheckResult r;
    r.check = d.name;
    r.verdict = Verdict::kFail;
    r.message = "check raised an unknown exception";
    rs.push_back(r);
  }
  double dt = MonotonicSeconds() - t0;
  std::string out;
  for (auto& r : rs) {
    if (r.seconds == 0) r.seconds = rs.size() == 1 ? dt : dt / rs.size();
    out += Serialize(r);
  }
  WriteAll(fd, out);
  _exit(0);
}

CheckResult HarnessFailure(const Child& c, unsigned timeout_ms) {
  CheckResult r;
  r.check = c.step_check.empty() ? c.d->name : c.step_check;
  r.device = c.step_device;
  r.verdict = Verdict::kFail;
  std::string where = c.step_what.empty() ? "" : " in " + c.step_what;
  if (c.timed_out) {
    r.value = "no answer";
    r.threshold = "< " + std::to_string(timeout_ms) + " ms";
    r.message = "probe hung" + where + ": no answer within " + std::to_string(timeout_ms) + " ms";
  } else if (WIFSIGNALED(c.status)) {
    r.value = "crashed";
    r.message = "probe crashed" + where + ": signal " + std::to_string(WTERMSIG(c.status));
  } else {
    r.value = "exit " + std::to_string(WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1);
    r.message = "probe ended without a result" + where;
  }
  r.seconds = MonotonicSeconds() - c.started;
  return r;
}

}  // namespace

void ProbeStep(const std::string& check, const std::string& device, const std::string& what) {
  if (g_probe_fd < 0) return;
  WriteAll(g_probe_fd, "P\t" + Escape(check) + "\t" + Escape(device) + "\t" + Escape(what) + "\n");
}

bool ProbeEmit(const CheckResult& r) {
  if (g_probe_fd < 0) return false;
  WriteAll(g_probe_fd, Serialize(r));
  return true;
}

std::vector<CheckResult> RunChecks(const CheckEnv& env) { return RunChecks(env, AllChecks()); }

namespace {

// Starts a child per check the level and the switches let run; a check
// switched off, or whose child cannot start, goes to `all` as its result.
std::vector<Child> StartChildren(const CheckEnv& env, const std::vector<CheckDescriptor>& checks,
                                 std::vector<CheckResult>* all) {
  std::vector<Child> kids;
  for (const auto& d : checks) {
    if (env.level < d.min_level) continue;
    std::string by;
    if (ModeFor(env.cfg.check_modes, d.name, &by) == CheckMode::kOff) {
      CheckResult r;
      r.check = d.name;
      r.verdict = Verdict::kSkip;
      r.message = "skipped: off by " + by;
      all->push_back(r);
      continue;
    }
    Child c;
    c.d = &d;
    unsigned budget = Budget(d, env.cfg);
    c.started = MonotonicSeconds();
    c.deadline = c.started + budget / 1000.0;
    // A probe that cannot even start fails its check, naming the call.
    auto cannot_start = [&](const char* call) {
      CheckResult r;
      r.check = d.name;
      r.verdict = Verdict::kFail;
      r.message = Status::FromErrno(errno, std::string("cannot start probe: ") + call).message();
      all->push_back(r);
    };
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      cannot_start("pipe");
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      for (const auto& k : kids) ::close(k.fd);
      RunChild(d, env, p[1]);
    }
    ::close(p[1]);
    if (pid < 0) {
      cannot_start("fork");
      ::close(p[0]);
      continue;
    }
    c.pid = pid;
    c.fd = p[0];
    kids.push_back(std::move(c));
  }
  return kids;
}

// Reads every child until its pipe closes or its deadline passes (then
// the child is killed and marked timed out).
void ReadChildren(std::vector<Child>& kids) {
  for (;;) {
    std::vector<struct pollfd> pfds;
    std::vector<Child*> who;
    double now = MonotonicSeconds(), next = 1e18;
    for (auto& c : kids) {
      if (c.fd < 0) continue;
      if (now >= c.deadline) {
        c.timed_out = true;
        ::kill(c.pid, SIGKILL);
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      next = std::min(next, c.deadline);
      pfds.push_back({c.fd, POLLIN, 0});
      who.push_back(&c);
    }
    if (pfds.empty()) break;
    int wait_ms = static_cast<int>((next - now) * 1000) + 1;
    int n = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (n < 0 && errno != EINTR) break;
    for (size_t i = 0; n > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      Child& c = *who[i];
      char buf[8192];
      ssize_t k = ::read(c.fd, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        ::close(c.fd);
        c.fd = -1;
      } else {
        c.buf.append(buf, static_cast<size_t>(k));
        ParseLines(c, false);
      }
    }
  }
}

// The pipe closed: the child has exited or is about to. Reaping is
// bounded too: a child stuck in an uninterruptible driver call (D state,
// as an NVML ioctl on a GPU that fell off the bus can be) survives
// SIGKILL until the call returns, and waiting for it would hang the
// prolog. Such a child is left behind; init reaps it after we exit.
void ReapChild(Child& c) {
  if (c.fd >= 0) ::close(c.fd);
  int st = 0;
  auto reap = [&](double seconds) {
    double until = MonotonicSeconds() + seconds;
    for (;;) {
      pid_t w = ::waitpid(c.pid, &st, WNOHANG);
      if (w == c.pid || (w < 0 && errno != EINTR)) return true;
      if (MonotonicSeconds() >= until) return false;
      ::usleep(1000);
    }
  };
  if (!reap(c.timed_out ? 0.2 : 1.0)) {
    ::kill(c.pid, SIGKILL);
    if (!reap(0.2)) {
      c.timed_out = true;
      st = 0;
    }
  }
  c.status = st;
}

}  // namespace

std::vector<CheckResult> RunChecks(const CheckEnv& env, const std::vector<CheckDescriptor>& checks) {
  std::vector<CheckResult> all;
  std::fflush(nullptr);  // nothing buffered may be written twice
  std::vector<Child> kids = StartChildren(env, checks, &all);
  ReadChildren(kids);
  for (auto& c : kids) {
    ReapChild(c);
    ParseLines(c, true);
    const int st = c.status;
    bool clean = !c.timed_out && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    for (auto& r : c.results) all.push_back(std::move(r));
    if (!clean) all.push_back(HarnessFailure(c, Budget(*c.d, env.cfg)));
  }
  // The site's check_<name> switches, and "the job's own fault never drains".
  ApplySeverityPolicy(env.cfg.check_modes, all);
  return all;
}

}  // namespace preflight
