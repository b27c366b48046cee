// The training stage's tap (accept_train.h): the progress-line grammar, the
// tap process each node runs around the training command, and the reader of
// what the taps printed.
#include "preflight/accept_train.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/job.h"
#include "preflight/process.h"
#include "preflight/text.h"

namespace preflight::accept {
namespace {

constexpr size_t kMaxLine = 4096;
constexpr size_t kMaxErrors = 20;
constexpr size_t kMaxText = 200;

bool WordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Where `word` (lower case) stands as a word of its own in `low`, from `from`.
size_t FindWord(const std::string& low, const char* word, size_t from) {
  size_t n = std::strlen(word);
  for (size_t p = low.find(word, from); p != std::string::npos; p = low.find(word, p + 1)) {
    bool before = p == 0 || !WordChar(low[p - 1]);
    bool after = p + n >= low.size() || !WordChar(low[p + n]);
    if (before && after) return p;
  }
  return std::string::npos;
}

// After a key word: blanks, an optional ':' or '=', blanks.
size_t SkipSeparator(const std::string& s, size_t p) {
  while (p < s.size() && (s[p] == ' ' || s[p] == '\t')) ++p;
  if (p < s.size() && (s[p] == ':' || s[p] == '=')) ++p;
  while (p < s.size() && (s[p] == ' ' || s[p] == '\t')) ++p;
  return p;
}

// A line of the command's output (or a name, a message) as one printable
// line of at most kMaxText bytes: core's text rules (text.h), which keep it
// valid UTF-8 for report.json and show a control byte as "\xNN". A CRLF
// line's '\r' is the line's end, not its text.
std::string Cut(std::string_view s, size_t max = kMaxText) {
  while (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return Utf8Cut(PrintableText(Utf8Prefix(s, max)), max);
}

// The tap's state while the command runs.
struct Tap {
  double t0 = 0, window = 1, next_print = 0;
  long lines = 0;
  size_t errors = 0;
  bool first_printed = false, loss_printed = false, nonfinite_printed = false, unprinted = false;
  double last_t = 0;
  ProgressLine last;
  std::string last_text;

  void Print(double t, const ProgressLine& p) {
    std::string loss = !p.has_loss ? "-" : !p.loss_finite ? "nan" : "";
    if (loss.empty()) {
      char b[64];
      std::snprintf(b, sizeof b, "%.6g", p.loss);
      loss = b;
    }
    std::printf("%s%.3f %ld %s\n", kTapStep, t, p.step, loss.c_str());
    std::fflush(stdout);
    unprinted = false;
  }
  bool runner_lines = false;  // preflight-run's own lines ("preflight: run: ...") are not the command's
  void Line(std::string_view line) {
    if (runner_lines && line.substr(0, 16) == "preflight: run: ") return;
    ++lines;
    double t = MonotonicSeconds() - t0;
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) last_text = Cut(line);
    if (IsTrainErrorLine(line) && errors < kMaxErrors) {
      ++errors;
      std::printf("%s%.3f %s\n", kTapError, t, Cut(line).c_str());
      std::fflush(stdout);
    }
    auto p = ParseProgressLine(line);
    if (!p) return;
    last = *p;
    last_t = t;
    unprinted = true;
    bool first_nonfinite = p->has_loss && !p->loss_finite && !nonfinite_printed;
    bool first_loss = p->has_loss && !loss_printed;
    if (!first_printed || first_loss || first_nonfinite || t >= next_print) {
      Print(t, *p);
      first_printed = true;
      loss_printed = loss_printed || p->has_loss;
      nonfinite_printed = nonfinite_printed || first_nonfinite;
      next_print = t + window;
    }
  }
  void Flush() {
    if (unprinted) Print(last_t, last);
  }
  // Once per window: the GPUs, or once why not.
  GpuProbe gpus;
  double next_gpu = 0;
  bool gpu_off = false;
  void LookAtGpus(double t) {
    if (!gpus || gpu_off || t < next_gpu) return;
    next_gpu = t + window;
    auto g = gpus();
    if (!g) {
      std::printf("%s%s\n", kTapGpuOff, Cut(g.status().message()).c_str());
      gpu_off = true;
    } else {
      std::printf("%s%.3f %d %.1f %.1f\n", kTapGpu, t, g->gpus, g->util_mean, g->power_w);
    }
    std::fflush(stdout);
  }
};

}  // namespace

std::optional<ProgressLine> ParseProgressLine(std::string_view line) {
  std::string low(line.substr(0, kMaxLine));
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
  ProgressLine out;
  bool found = false;
  for (const char* w : {"step", "iter"}) {
    for (size_t p = FindWord(low, w, 0); p != std::string::npos && !found; p = FindWord(low, w, p + 1)) {
      size_t d = SkipSeparator(low, p + 4);
      if (d >= low.size() || !std::isdigit(static_cast<unsigned char>(low[d]))) continue;
      errno = 0;
      char* end = nullptr;
      long v = std::strtol(low.c_str() + d, &end, 10);
      if (errno != 0 || v < 0) continue;
      out.step = v;
      found = true;
    }
    if (found) break;
  }
  if (!found) return std::nullopt;
  size_t l = FindWord(low, "loss", 0);
  if (l != std::string::npos) {
    size_t d = SkipSeparator(low, l + 4);
    const char* start = low.c_str() + d;
    char* end = nullptr;
    double v = d < low.size() ? std::strtod(start, &end) : 0;
    if (end && end != start) {
      out.has_loss = true;
      out.loss = v;
      out.loss_finite = std::isfinite(v);
    }
  }
  return out;
}

bool IsTrainErrorLine(std::string_view line) {
  static const char* const kSigns[] = {"NCCL WARN", "NCCL error", "ncclInternalError", "ncclSystemError",
                                       "ncclUnhandledCudaError", "ncclRemoteError", "ncclInvalidUsage",
                                       "CUDA error", "Watchdog caught collective operation timeout",
                                       "Traceback (most recent call last)"};
  for (const char* s : kSigns)
    if (line.find(s) != std::string_view::npos) return true;
  return false;
}

double RateWindow(double seconds) { return std::max(1.0, seconds / 20); }

namespace {

// `max`: a whole path (a resume's, which accept compares with the tier's)
// is not cut at kMaxText.
void Ckpt(const std::string& what, const std::string& text, size_t max = kMaxText) {
  std::printf("%s%s %s\n", kTapCkpt, what.c_str(), text.empty() ? "-" : Cut(text, max).c_str());
  std::fflush(stdout);
}

// The command's run: `argv` started, its output read through the tap, the
// bound kept; prints everything but the node and the checkpoint lines.
// `stop_first`: stop it at its first progress line with a loss (a line
// such as "resumed from step-60 at step 60" is not yet a step trained).
// `leader_only`: the child is preflight-run, which gets the bound's SIGTERM
// alone (it asks its command to checkpoint) and whose own lines are not
// the command's; else the SIGTERM goes to the child's whole process group.
// `env`: added to the child's environment. `relay` (a signal number, 0
// none): that signal, and SIGTERM, sent to the tap go on to the child's
// process group; a SIGTERM is the bound (TrainRoundTrip::relay_signal),
// whose own bound is then RunnerGrace later, as a safety net.
volatile sig_atomic_t g_relay_ckpt = 0, g_relay_term = 0;
void OnRelay(int sig) { (sig == SIGTERM ? g_relay_term : g_relay_ckpt) = 1; }

// The relay's handlers while it runs (no SA_RESTART: poll wakes), back to
// the default after; a handled signal is the default again in the child.
struct Relay {
  int sig = 0;
  explicit Relay(int s) : sig(s) {
    if (sig <= 0) return;
    g_relay_ckpt = g_relay_term = 0;
    struct sigaction sa = {};
    sa.sa_handler = OnRelay;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  }
  ~Relay() {
    if (sig <= 0) return;
    ::signal(sig, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
  }
  // Passes what came on to `pid`'s group; true once a SIGTERM came.
  bool Pass(pid_t pid) {
    if (sig <= 0) return false;
    if (g_relay_ckpt) {
      g_relay_ckpt = 0;
      ::kill(-pid, sig);
    }
    return g_relay_term != 0;
  }
};

int RunCommand(const TrainTapArgs& a, const std::vector<std::string>& argv, bool stop_first, bool leader_only,
               const std::vector<std::string>& env = {}, int relay_signal = 0) {
  Relay relay(relay_signal);
  Tap tap;
  tap.window = RateWindow(a.seconds);
  tap.gpus = a.gpus;
  tap.runner_lines = leader_only;
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = MergedEnv(env);
  spec.exec_error_as_status = true;
  tap.t0 = MonotonicSeconds();
  auto child = argv.empty() ? Expected<Child>(Status::InvalidArgument("no command")) : Start(spec);
  if (!child) {
    std::printf("%sexit 127 0 cannot run %s: %s\n", kTapEnd, argv.empty() ? "" : Cut(argv[0]).c_str(),
                Cut(child.status().message()).c_str());
    return 2;
  }
  const double bound = tap.t0 + a.seconds + (relay.sig > 0 ? RunnerGrace(a.seconds) : 0);
  double kill_at = 0;  // set once SIGTERM went out at the bound
  double give_up = 0;  // after SIGKILL: a grandchild of its own may hold the pipe
  std::string buf;
  bool dropping = false, open = true;
  char chunk[65536];
  while (open) {
    double now = MonotonicSeconds();
    const bool relayed_term = relay.Pass(child->pid);
    if (kill_at == 0 && (now >= bound || relayed_term || (stop_first && tap.loss_printed))) {
      ::kill(leader_only ? child->pid : -child->pid, SIGTERM);
      kill_at = now + a.grace;
    } else if (kill_at > 0 && give_up == 0 && now >= kill_at) {
      ::kill(-child->pid, SIGKILL);
      give_up = now + 5;
    } else if (give_up > 0 && now >= give_up) {
      break;
    }
    if (kill_at == 0) tap.LookAtGpus(now - tap.t0);
    double until = kill_at == 0 ? std::min(bound, tap.t0 + tap.next_gpu) : give_up == 0 ? kill_at : give_up;
    if (!tap.gpus || tap.gpu_off) until = kill_at == 0 ? bound : until;
    struct pollfd pfd = {child->out, POLLIN, 0};
    int ms = static_cast<int>(std::max(0.0, std::min(until - now, 1.0)) * 1000) + 1;
    int r = ::poll(&pfd, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(child->out, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) { open = false; n = 0; }
    for (ssize_t i = 0; i < n; ++i) {
      char c = chunk[i];
      if (c == '\n') {
        if (!dropping) tap.Line(buf);
        buf.clear();
        dropping = false;
      } else if (!dropping) {
        buf.push_back(c);
        if (buf.size() >= kMaxLine) { tap.Line(buf); buf.clear(); dropping = true; }
      }
    }
  }
  if (!buf.empty() && !dropping) tap.Line(buf);
  ::close(child->out);
  // Its output closed, the command may still run (it redirected or closed
  // it): the same bound, SIGTERM and SIGKILL apply until it is reaped.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(child->pid, &status, WNOHANG);
    if (w == child->pid || (w < 0 && errno != EINTR)) break;
    double now = MonotonicSeconds();
    const bool relayed_term = relay.Pass(child->pid);
    if (kill_at == 0 && (now >= bound || relayed_term)) {
      ::kill(leader_only ? child->pid : -child->pid, SIGTERM);
      kill_at = now + a.grace;
    } else if (kill_at > 0 && now >= kill_at) {
      ::kill(-child->pid, SIGKILL);
      kill_at = now + 3600;  // once; the reap follows
    }
    if (kill_at == 0) tap.LookAtGpus(now - tap.t0);
    ::usleep(50 * 1000);
  }
  tap.Flush();
  std::string how = kill_at > 0 ? "bound"
                    : WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status));
  std::printf("%s%s %ld %s\n", kTapEnd, how.c_str(), tap.lines, tap.last_text.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunTrainTap(const TrainTapArgs& a) {
  const char* node = std::getenv("SLURMD_NODENAME");
  std::printf("%s%s\n", kTapNode, node && *node ? Cut(node).c_str() : Cut(ShortHostname()).c_str());
  const TrainRoundTrip& trip = a.trip;
  // rm -r of the folder; one that stays is said ("left").
  auto remove = [&trip] {
    if (Status s = RemoveTree(trip.dir); !s.ok()) Ckpt("left", trip.dir + " " + s.message());
  };
  if ((trip.clean || trip.make) && !trip.off.empty()) {
    Ckpt("off", trip.off);  // no folder to make or remove here: nothing run
    return 0;
  }
  if (trip.clean) {
    remove();
    return 0;
  }
  // The folder made here, by this run alone (as the storage worker's
  // folder): one that exists already, whoever made it, is not used ("off").
  auto make = [&trip]() -> bool {
    if (::mkdir(trip.dir.c_str(), 0700) == 0) return true;
    int e = errno;
    Ckpt("off", "cannot make the checkpoint directory " + trip.dir + ": " + std::strerror(e) +
                    (e == EEXIST ? " (not made by this run: left alone)" : ""));
    return false;
  };
  if (trip.make) {
    if (make()) Ckpt("made", trip.dir);
    return 0;
  }
  if (!trip.off.empty()) Ckpt("off", trip.off);
  auto newest = [&]() -> std::string {
    auto n = trip.newest ? trip.newest(trip.dir) : Expected<std::string>(std::string());
    return n ? *n : "";
  };
  if (trip.relay_signal > 0 && trip.off.empty()) {
    // Through the shared tier: preflight-run is around the srun of this
    // tap; the folder is made and removed by steps of their own. The
    // node's own folder, not the batch node's, is the command's.
    const std::vector<std::string> local = {"PREFLIGHT_CKPT_LOCAL=" + trip.dir, "PREFLIGHT_CHECKPOINT_DIR=" + trip.dir};
    if (trip.resume) {
      const char* from = std::getenv("PREFLIGHT_RESUME_FROM");
      Ckpt("from", from ? from : "", kMaxLine);
      return RunCommand(a, a.cmd, true, false, local, trip.relay_signal);
    }
    int rc = RunCommand(a, a.cmd, false, false, local, trip.relay_signal);
    Ckpt("saved", newest());
    return rc;
  }
  if (trip.runner.empty() || !trip.off.empty()) return RunCommand(a, a.cmd, false, false);
  // The round trip: the command under preflight-run with its own checkpoint
  // directory, made here so that one that cannot be is said, and the
  // training runs on without the round trip.
  std::vector<std::string> argv = trip.runner;
  argv.insert(argv.end(), {trip.dir, "--"});
  argv.insert(argv.end(), a.cmd.begin(), a.cmd.end());
  // The site's node-local checkpoint folder (its prolog's) is this one
  // too: a command that writes there (the example does on several nodes)
  // writes where preflight-run looks.
  const std::vector<std::string> env = {"PREFLIGHT_CKPT_LOCAL=" + trip.dir};
  if (!trip.resume) {
    if (!make()) return RunCommand(a, a.cmd, false, false);
    int rc = RunCommand(a, argv, false, true, env);
    std::string saved = newest();
    Ckpt("saved", saved);
    // Nothing to resume from: the second run does not come here.
    if (saved.empty()) remove();
    return rc;
  }
  Ckpt("from", newest());
  int rc = RunCommand(a, argv, true, true, env);
  remove();
  return rc;
}

TapRecord ReadTap(const std::string& text) {
  TapRecord r;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t at;
    if ((at = line.find(kTapCkpt)) != std::string::npos) {
      std::string rest = line.substr(at + std::strlen(kTapCkpt));
      size_t sp = rest.find(' ');
      std::string what = rest.substr(0, sp), text = sp == std::string::npos ? "" : rest.substr(sp + 1);
      if (text == "-") text.clear();
      r.ckpt_tried = true;
      if (what == "saved") r.ckpt_saved = text;
      else if (what == "from") r.ckpt_from = text;
      else if (what == "off") r.ckpt_off = text;
      else if (what == "left") r.ckpt_left = text;
      else if (what == "made") r.ckpt_made = true;
    } else if ((at = line.find(kTapGpuOff)) != std::string::npos) {
      r.gpu_off = line.substr(at + std::strlen(kTapGpuOff));
    } else if ((at = line.find(kTapGpu)) != std::string::npos) {
      std::istringstream f(line.substr(at + std::strlen(kTapGpu)));
      double t = 0;
      GpuLook g;
      if (f >> t >> g.gpus >> g.util_mean >> g.power_w) r.gpu.push_back(g);
    } else if ((at = line.find(kTapNode)) != std::string::npos) {
      r.node = line.substr(at + std::strlen(kTapNode));
    } else if ((at = line.find(kTapError)) != std::string::npos) {
      if (r.errors.size() < kMaxErrors) r.errors.push_back(line.substr(at + std::strlen(kTapError)));
    } else if ((at = line.find(kTapEnd)) != std::string::npos) {
      std::istringstream f(line.substr(at + std::strlen(kTapEnd)));
      std::string how, code;
      f >> how;
      r.end = how;
      if (how != "bound" && f >> code) r.end += " " + code;
      if (f >> r.lines) std::getline(f >> std::ws, r.last);
    } else if ((at = line.find(kTapStep)) != std::string::npos) {
      std::istringstream f(line.substr(at + std::strlen(kTapStep)));
      double t = 0;
      long step = 0;
      std::string loss;
      if (!(f >> t >> step >> loss)) continue;
      r.steps.emplace_back(t, step);
      if (loss != "-" && r.first_loss_step < 0) r.first_loss_step = step;
      if (loss == "nan") r.loss_nonfinite = true;
      else if (loss != "-") { r.has_loss = true; r.last_loss = std::atof(loss.c_str()); }
    }
  }
  return r;
}

std::vector<std::pair<double, double>> StepRate(const std::vector<std::pair<double, long>>& steps) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 1; i < steps.size(); ++i) {
    double dt = steps[i].first - steps[i - 1].first;
    long ds = steps[i].second - steps[i - 1].second;
    if (dt > 0 && ds >= 0) out.emplace_back(steps[i].first, ds / dt);
  }
  return out;
}

}  // namespace preflight::accept
