// A stand-in training program for preflight-run's tests. It follows the
// signal contract of preflight-run(1) and can misbehave on request:
//
//   pf_test_app [--steps N] [--step-ms MS] [--checkpoint-every K]
//               [--hang-at S] [--nan-at S] [--fail-at S --code C --message TEXT]
//               [--ignore-term] [--checkpoint-ms MS] [--checkpoint-exit C] [--no-heartbeat]
//               [--done-file PATH]
//
// Each step prints "step S loss L" and touches $PREFLIGHT_HEARTBEAT_FILE.
// On $PREFLIGHT_CHECKPOINT_SIGNAL or when $PREFLIGHT_CHECKPOINT_REQUEST
// appears it writes $PREFLIGHT_CHECKPOINT_DIR/ckpt-S/{state,COMPLETE} and
// exits (--checkpoint-exit, default 0). It starts from the step stored in
// $PREFLIGHT_RESUME_FROM/state. At the end it prints
// "done steps=N restart=R resumed_from=PATH".
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

volatile sig_atomic_t g_checkpoint = 0;
void OnCheckpoint(int) { g_checkpoint = 1; }

std::string Env(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}

void Touch(const std::string& p) {
  if (p.empty()) return;
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) { ::futimens(fd, nullptr); ::close(fd); }
}

bool WriteFile(const std::string& p, const std::string& data) {
  FILE* f = std::fopen(p.c_str(), "w");
  if (!f) return false;
  std::fputs(data.c_str(), f);
  return std::fclose(f) == 0;
}

void Checkpoint(long step, long checkpoint_ms) {
  std::string dir = Env("PREFLIGHT_CHECKPOINT_DIR");
  if (dir.empty()) { std::printf("no checkpoint dir\n"); return; }
  std::string marker = Env("PREFLIGHT_CHECKPOINT_MARKER");
  if (marker.empty()) marker = "COMPLETE";
  std::string ck = dir + "/ckpt-" + std::to_string(step);
  ::mkdir(ck.c_str(), 0755);
  WriteFile(ck + "/state", std::to_string(step) + "\n");
  if (checkpoint_ms > 0) ::usleep(static_cast<useconds_t>(checkpoint_ms) * 1000);
  WriteFile(ck + "/" + marker, "");  // last: the checkpoint is complete
  std::printf("checkpointed at step %ld to %s\n", step, ck.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  long steps = 10, step_ms = 50, every = 0, hang_at = -1, nan_at = -1, fail_at = -1, code = 1;
  long checkpoint_ms = 0, checkpoint_exit = 0;
  bool ignore_term = false, heartbeat = true;
  std::string message = "failed", done_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--steps") steps = std::atol(next().c_str());
    else if (a == "--step-ms") step_ms = std::atol(next().c_str());
    else if (a == "--checkpoint-every") every = std::atol(next().c_str());
    else if (a == "--hang-at") hang_at = std::atol(next().c_str());
    else if (a == "--nan-at") nan_at = std::atol(next().c_str());
    else if (a == "--fail-at") fail_at = std::atol(next().c_str());
    else if (a == "--code") code = std::atol(next().c_str());
    else if (a == "--message") message = next();
    else if (a == "--ignore-term") ignore_term = true;
    else if (a == "--checkpoint-ms") checkpoint_ms = std::atol(next().c_str());
    else if (a == "--checkpoint-exit") checkpoint_exit = std::atol(next().c_str());
    else if (a == "--no-heartbeat") heartbeat = false;
    else if (a == "--done-file") done_file = next();
    else { std::fprintf(stderr, "pf_test_app: unknown argument %s\n", a.c_str()); return 64; }
  }
  std::string sig = Env("PREFLIGHT_CHECKPOINT_SIGNAL");
  int signo = sig == "USR2" ? SIGUSR2 : sig == "TERM" ? SIGTERM : sig == "INT" ? SIGINT : sig == "HUP" ? SIGHUP : 0;
  if (signo != 0) ::signal(signo, OnCheckpoint);
  if (ignore_term) ::signal(SIGTERM, SIG_IGN);
  std::string request = Env("PREFLIGHT_CHECKPOINT_REQUEST");
  std::string resume = Env("PREFLIGHT_RESUME_FROM");
  long step = 0;
  if (!resume.empty()) {
    FILE* f = std::fopen((resume + "/state").c_str(), "r");
    if (f) { if (std::fscanf(f, "%ld", &step) != 1) step = 0; std::fclose(f); }
    std::printf("resumed from %s at step %ld\n", resume.c_str(), step);
  }
  std::printf("start restart=%s\n", Env("PREFLIGHT_RESTART_COUNT").c_str());
  std::fflush(stdout);
  while (step < steps) {
    if (g_checkpoint || (!request.empty() && ::access(request.c_str(), F_OK) == 0)) {
      Checkpoint(step, checkpoint_ms);
      return static_cast<int>(checkpoint_exit);
    }
    ++step;
    if (step == hang_at) {
      std::printf("hanging at step %ld\n", step);
      std::fflush(stdout);
      for (;;) ::pause();
    }
    if (step == fail_at) {
      std::fprintf(stderr, "%s\n", message.c_str());
      return static_cast<int>(code);
    }
    if (step == nan_at) std::printf("step %ld loss nan\n", step);
    else std::printf("step %ld loss %.3f\n", step, 10.0 / static_cast<double>(step));
    std::fflush(stdout);
    if (heartbeat) Touch(Env("PREFLIGHT_HEARTBEAT_FILE"));
    if (every > 0 && step % every == 0) Checkpoint(step, checkpoint_ms);
    ::usleep(static_cast<useconds_t>(step_ms) * 1000);
  }
  std::string done = "done steps=" + std::to_string(step) + " restart=" + Env("PREFLIGHT_RESTART_COUNT") +
                     " resumed_from=" + resume + "\n";
  std::fputs(done.c_str(), stdout);
  if (!done_file.empty()) WriteFile(done_file, done);
  return 0;
}
