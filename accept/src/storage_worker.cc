// The storage worker of `preflight accept` and its signal handling
// (accept_storage_worker.h).
#include "preflight/accept_storage_worker.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "preflight/process.h"

namespace preflight::accept {

namespace {

// The storage worker's fio child, killed (its process group) on SIGINT or
// SIGTERM so that the worker can remove what it wrote before it exits.
volatile sig_atomic_t g_worker_child = 0;
volatile sig_atomic_t g_worker_signal = 0;
extern "C" void WorkerSignal(int sig) {
  g_worker_signal = sig;
  if (g_worker_child > 0) ::kill(-static_cast<pid_t>(g_worker_child), SIGKILL);
}

}  // namespace

int RunStorageWorker(const StorageWorkerArgs& args) {
  StorageOptions base = args.base;
  struct sigaction sa {};
  sa.sa_handler = WorkerSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  base.run = [](const std::vector<std::string>& argv, unsigned ms) -> Expected<ProcessResult> {
    if (g_worker_signal) return Status::Failed("interrupted");
    SpawnSpec spec;
    spec.argv = argv;
    spec.env = MergedEnv({});
    auto c = Start(spec);
    if (!c) return c.status();
    g_worker_child = c->pid;
    ProcessResult r = Collect(*c, ms);
    g_worker_child = 0;
    if (g_worker_signal) r.output += "\ninterrupted by signal " + std::to_string(g_worker_signal);
    return r;
  };
  for (const auto& path : args.paths) {
    if (g_worker_signal) break;
    StorageOptions o = base;
    o.path = path;
    o.node = args.node;
    o.tag = args.tag.empty() ? std::to_string(::getpid()) : args.tag;
    StorageFigures f = MeasureStorage(o);
    std::fputs(StorageLine(f).c_str(), stdout);
    std::fflush(stdout);
  }
  return g_worker_signal ? 128 + g_worker_signal : 0;
}

}  // namespace preflight::accept
