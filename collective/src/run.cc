#include "preflight/collective_run.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"

namespace preflight::collective {

// --- profiles ------------------------------------------------------------------
// Figures are ~80% of what nccl-tests all_reduce_perf reaches at 1-8 GiB on
// healthy machines of each kind (NVLink/NVSwitch inside, one NIC per GPU
// across nodes), so a healthy node passes and a 1.5x-instead-of-4x node fails.
const std::vector<NodeProfile>& NodeProfiles() {
  static const std::vector<NodeProfile> kProfiles = {
      {"8xH100-nvlink", "H100", 8, 360e9, 300e9},   // NVSwitch, 8x400G NDR
      {"8xH200-nvlink", "H200", 8, 360e9, 300e9},
      {"8xA100-nvlink", "A100", 8, 180e9, 150e9},   // NVSwitch, 8x200G HDR
      {"4xA100-nvlink", "A100", 4, 150e9, 75e9},
      {"4xGH200", "GH200", 4, 120e9, 75e9},
      {"host-tcp", "", 0, 0, 0},                    // no built-in figure: set the keys
  };
  return kProfiles;
}

const NodeProfile* PickProfile(const Config& cfg, const std::string& backend, const GpuInventory& gpus) {
  for (const auto& p : NodeProfiles())
    if (cfg.nccl_profile == p.name) return &p;
  if (cfg.nccl_profile != "auto") return nullptr;
  if (backend == "host") {
    for (const auto& p : NodeProfiles())
      if (p.gpu_match[0] == '\0') return &p;
  }
  for (const auto& p : NodeProfiles())
    if (p.gpu_match[0] != '\0' && p.gpus == gpus.count && gpus.name.find(p.gpu_match) != std::string::npos) return &p;
  return nullptr;
}

double Threshold(const Config& cfg, const NodeProfile* p, bool intra, std::string* source) {
  double v = intra ? cfg.nccl_min_intra_busbw : cfg.nccl_min_busbw;
  if (v > 0) {
    *source = std::string("config ") + (intra ? "nccl_min_intra_busbw" : "nccl_min_busbw");
    return v;
  }
  if (p && (intra ? p->intra_busbw : p->inter_busbw) > 0) {
    *source = std::string("profile ") + p->name;
    return intra ? p->intra_busbw : p->inter_busbw;
  }
  *source = p ? std::string("profile ") + p->name + " has no figure" : "no profile matches this node";
  return 0;
}

// --- backends ---------------------------------------------------------------------
bool GpusRequested(const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& kv : env) {
    if (kv.first != "CUDA_VISIBLE_DEVICES" && kv.first != "SLURM_STEP_GPUS" && kv.first != "SLURM_JOB_GPUS") continue;
    if (!kv.second.empty() && kv.second != "NoDevFiles") return true;
  }
  return false;
}

std::string ResolveBackend(const std::string& choice, bool gpus_requested) {
  if (choice == "auto") return gpus_requested ? "nccl" : "host";
  return choice;
}

Expected<double> HostRateCap(const Config& cfg) {
  if (cfg.nccl_host_rate_file.empty()) return 0.0;
  auto text = ReadWholeFile(cfg.nccl_host_rate_file);
  if (!text) return text.status().code() == Status::Code::kNotFound ? Expected<double>(0.0) : text.status();
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto r = ParseRate(t);
  if (!r) return r.status().Context(cfg.nccl_host_rate_file);
  return r;
}

Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& backend, Bootstrap& boot, const Config& cfg,
                                               double user_rate_cap) {
  if (backend == "host") {
    HostOptions ho;
    auto cap = HostRateCap(cfg);
    if (!cap) return FailBackendGather(boot, cap.status());
    ho.send_rate_cap = *cap;
    if (user_rate_cap > 0 && (ho.send_rate_cap == 0 || user_rate_cap < ho.send_rate_cap)) ho.send_rate_cap = user_rate_cap;
    ho.timeout_ms = cfg.nccl_timeout_ms;
    return MakeHostBackend(boot, ho);
  }
  if (backend == "nccl") {
    auto b = MakeNcclBackend(boot, NcclOptions{});
    if (!b) return Status::Failed("GPU check asked for, but the NCCL backend cannot run on " + boot.Node() + ": " +
                                  b.status().message());
    return b;
  }
  return FailBackendGather(boot, Status::InvalidArgument("unknown backend '" + backend + "' (expected auto, nccl or host)"));
}

// --- intra-node ---------------------------------------------------------------------
CheckRun RunIntraNode(const Config& cfg, const std::string& node, Level level, const std::string& backend, int ranks) {
  CheckRun run;
  run.info.scope = "intra-node";
  run.info.level = LevelName(level);
  run.info.nodes = {node};
  run.info.bootstrap = "local";
  run.result.backend = backend == "nccl" ? "nccl" : "host-tcp";
  GpuInventory inv;
  if (backend == "nccl") {
    auto p = ProbeGpus(NcclOptions{});
    if (!p) {
      run.error = "GPU check asked for, but the NCCL backend cannot run on " + node + ": " + p.status().message();
      run.judgement.message = run.error;
      return run;
    }
    inv = *p;
    if (ranks <= 0) ranks = inv.count;
    if (ranks <= 0) {
      run.error = "GPU check asked for, but no CUDA device is visible on " + node;
      run.judgement.message = run.error;
      return run;
    }
  } else if (ranks <= 0) {
    ranks = 2;
  }
  const NodeProfile* prof = PickProfile(cfg, backend, inv);
  run.info.profile = prof ? prof->name : "";
  double threshold = Threshold(cfg, prof, true, &run.info.threshold_source);

  auto group = MakeLocalGroup(ranks, node, cfg.nccl_timeout_ms);
  std::vector<Expected<SweepResult>> results(ranks, Status::Unavailable("not run"));
  SweepOptions sweep = SweepForLevel(level, cfg.nccl_max_bytes);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto boot = MakeLocalBootstrap(group, r);
      auto b = MakeBackend(backend, *boot, cfg);
      if (!b) { results[r] = b.status(); return; }
      results[r] = RunAllReduceSweep(**b, sweep);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!results[r]) {
      run.error = results[r].status().message();
      run.judgement.message = run.error;
      return run;
    }
  }
  run.result = *results[0];
  run.judgement = Judge(run.result, threshold);
  return run;
}

std::string IntraDrainReason(const CheckRun& r, const std::string& node) {
  std::string s = std::string(kNcclDrainPrefix) + " intra-node " + node + " (" + r.result.backend + ", " +
                  std::to_string(r.result.nranks) + " ranks): " + r.judgement.message;
  if (s.size() > 200) s.resize(200);
  return s;
}

// --- running steps as the user ----------------------------------------------------------
namespace {

std::string FindInPath(const std::string& prog, const std::vector<std::string>& env) {
  if (prog.find('/') != std::string::npos) return prog;
  std::string path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find(':', b);
    if (e == std::string::npos) e = path.size();
    std::string cand = path.substr(b, e - b) + "/" + prog;
    if (e > b && ::access(cand.c_str(), X_OK) == 0) return cand;
    b = e + 1;
  }
  return prog;
}

double NowS() { return MonotonicSeconds(); }

}  // namespace

Expected<std::pair<int, std::string>> RunAs(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                            uid_t uid, gid_t gid, const std::vector<gid_t>& groups, unsigned timeout_ms) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  std::string exe = FindInPath(argv[0], env);
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  bool drop = ::geteuid() == 0 && uid != 0;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for " + argv[0]);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return Status::FromErrno(e, "fork for " + argv[0]);
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only until exec.
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    if (drop) {
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setregid(gid, gid) != 0 || ::setreuid(uid, uid) != 0) {
        static const char msg[] = "preflight: cannot drop privileges\n";
        (void)!::write(2, msg, sizeof msg - 1);
        ::_exit(126);
      }
    }
    ::execve(exe.c_str(), av.data(), ev.data());
    static const char msg[] = "preflight: exec failed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  double deadline = NowS() + timeout_ms / 1000.0;
  bool timed_out = false;
  char buf[8192];
  for (;;) {
    double left = deadline - NowS();
    if (left <= 0) { timed_out = true; break; }
    struct pollfd pf = {p[0], POLLIN, 0};
    int n = ::poll(&pf, 1, static_cast<int>(std::min(left * 1000 + 1, double(INT_MAX))));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t k = ::read(p[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (out.size() < (256u << 10)) out.append(buf, static_cast<size_t>(k));
  }
  if (timed_out) ::kill(-pid, SIGKILL);
  ::close(p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (timed_out) {
    out += "preflight: " + argv[0] + ": killed after " + std::to_string(timeout_ms / 1000) + " s\n";
    code = 124;
  }
  return std::make_pair(code, out);
}

// --- allocation orchestration ------------------------------------------------------------
namespace {

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The job's environment for a user-run step: the batch environment minus
// what would steer srun away from the layout given on its command line.
std::vector<std::string> NcclArgs(const Config& cfg, const Allocation& a, Level level, const char* scope) {
  std::vector<std::string> v = {cfg.nccl_binary, "--level", LevelName(level), "--scope", scope};
  if (!a.config_path.empty()) { v.push_back("--config"); v.push_back(a.config_path); }
  for (const auto& kv : a.sets) { v.push_back("--set"); v.push_back(kv); }
  return v;
}

std::vector<std::string> Srun(const Config& cfg, const std::vector<std::string>& nodes, int per_node, bool pmix) {
  std::vector<std::string> v = {cfg.nccl_srun};
  if (pmix) v.push_back("--mpi=pmix");
  // --overcommit: one rank per GPU even when the job holds fewer CPUs than
  // GPUs on a node (sbatch -N4 --gres=gpu:8 allocates 1 CPU per node).
  v.insert(v.end(), {"--overlap", "--overcommit", "--kill-on-bad-exit=1", "--job-name=preflight-nccl", "-N",
                     std::to_string(nodes.size()), "-n", std::to_string(nodes.size() * per_node),
                     "--ntasks-per-node=" + std::to_string(per_node), "-w", Join(nodes, ",")});
  return v;
}

std::string Indent(const std::string& text) {
  std::string out, line;
  for (char c : text) {
    line += c;
    if (c == '\n') { out += "  " + line; line.clear(); }
  }
  if (!line.empty()) out += "  " + line + "\n";
  return out;
}

}  // namespace

// What the check's srun steps may inherit from the batch job: an allow-list.
// Every other SLURM_*/SBATCH_*/SRUN_* variable is a step option srun reads
// from the environment (SLURM_TRES_PER_TASK, SLURM_TRES_BIND,
// SLURM_GPUS_PER_TASK, SLURM_NTASKS_PER_CORE, SLURM_CPUS_PER_GPU, ...): with
// the job's --gpus-per-task=2 the check's ranks got overlapping GPUs
// ("Not enough gres to bind 2 per task" on 24.11), so none of them passes,
// nor does the batch step's own CUDA_VISIBLE_DEVICES/GPU binding.
std::vector<std::string> LaunchEnv(const std::vector<std::string>& job_env, bool intra) {
  static const char* kExact[] = {
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "LD_LIBRARY_PATH",
      // srun finds the allocation (and the cluster, with federation or
      // multiple clusters) by these; -N, -n, -w and the rest are explicit.
      "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CONF", "SLURM_CLUSTER_NAME", "SLURM_WORKING_CLUSTER"};
  static const char* kPrefix[] = {
      "LC_",
      // The job's communication settings are what the check must measure.
      "NCCL_", "UCX_", "FI_", "RCCL_",
      // The job's own --nccl-check/--preflight-env choices for the plugin
      // in the check's steps (spank_job_control_setenv, option env).
      "SLURM_SPANK_", "_SLURM_SPANK_OPTION_", "SPANK_",
      "PREFLIGHT_"};
  std::vector<std::string> env;
  for (const auto& kv : job_env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (name == kIntraStepEnv) continue;  // set below, for the intra-node step only
    bool keep = false;
    for (const char* e : kExact) keep = keep || name == e;
    for (const char* p : kPrefix) keep = keep || name.rfind(p, 0) == 0;
    if (keep) env.push_back(kv);
  }
  if (intra) env.push_back(std::string(kIntraStepEnv) + "=intra");
  return env;
}

std::vector<size_t> InterNodeSuspects(size_t n, const std::vector<bool>& pair_failed) {
  std::vector<size_t> out;
  if (n < 3 || pair_failed.size() != n) return out;
  bool all = true;
  for (bool f : pair_failed) all &= f;
  if (all) return out;  // every link slow: no single node to blame
  for (size_t i = 0; i < n; ++i)
    if (pair_failed[i] && pair_failed[(i + n - 1) % n]) out.push_back(i);  // pairs (i-1,i) and (i,i+1)
  return out;
}

std::string RequeueNote(const AllocationOutcome& o, const std::vector<std::string>& nodes, const std::string& restarts) {
  std::string s = "preflight: nccl check failed at start " + restarts + " on " + Join(nodes, ",") + ": ";
  s += o.drained.empty() ? std::string("no single node at fault") : "drained " + Join(o.drained, ",");
  s += o.requeue ? "; requeued without " + Join(o.drained, ",") : "; job failed";
  return s;
}

RailsOutcome RailsAcross(const Config& cfg, const Allocation& a) {
  RailsOutcome o;
  const std::string head = "preflight: rails: ";
  // One task per node prints the record its prolog wrote (node-local
  // state_dir): a user step, so what it says decides nothing about a node.
  auto argv = Srun(cfg, a.nodes, 1, false);
  argv.insert(argv.end(), {"/bin/sh", "-c", "cat \"$0/nodes/$SLURMD_NODENAME.rails.json\" 2>/dev/null || echo \"no-record $SLURMD_NODENAME\"",
                           cfg.state_dir});
  auto r = RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.probe_timeout_ms);
  if (!r) {
    o.text = head + "cannot read the nodes' rails: " + r.status().message() + "\n";
    return o;
  }
  std::vector<NodeRails> nodes;
  std::string missing;
  size_t b = 0;
  const std::string& out = r->second;
  while (b < out.size()) {
    size_t e = out.find('\n', b);
    if (e == std::string::npos) e = out.size();
    std::string line = out.substr(b, e - b);
    b = e + 1;
    if (line.rfind("no-record ", 0) == 0) missing += (missing.empty() ? "" : ",") + line.substr(10);
    if (line.empty() || line[0] != '{') continue;
    auto n = ParseRailsJson(line);
    if (n) nodes.push_back(*n);
  }
  std::sort(nodes.begin(), nodes.end(), [](const NodeRails& x, const NodeRails& y) { return x.node < y.node; });
  if (!missing.empty()) o.text += head + "no rails record on " + missing + " (its prolog has not recorded one)\n";
  if (nodes.size() < 2) return o;
  o.comparison = CompareRails(nodes);
  size_t p = 0;
  while (p < o.comparison.text.size()) {
    size_t e = o.comparison.text.find('\n', p);
    o.text += head + o.comparison.text.substr(p, e - p) + "\n";
    p = e == std::string::npos ? o.comparison.text.size() : e + 1;
  }
  return o;
}

VersionsOutcome VersionsAcross(const Config& cfg, const Allocation& a) {
  VersionsOutcome o;
  const std::string head = "preflight: versions: ";
  // As RailsAcross: one task per node prints the record its own checks wrote.
  auto argv = Srun(cfg, a.nodes, 1, false);
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           "cat \"$0/nodes/$SLURMD_NODENAME.versions.json\" 2>/dev/null || echo \"no-record $SLURMD_NODENAME\"",
                           cfg.state_dir});
  auto r = RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.probe_timeout_ms);
  if (!r) {
    o.text = head + "cannot read the nodes' versions: " + r.status().message() + "\n";
    return o;
  }
  std::vector<NodeVersions> nodes;
  std::string missing;
  size_t b = 0;
  const std::string& out = r->second;
  while (b < out.size()) {
    size_t e = out.find('\n', b);
    if (e == std::string::npos) e = out.size();
    std::string line = out.substr(b, e - b);
    b = e + 1;
    if (line.rfind("no-record ", 0) == 0) missing += (missing.empty() ? "" : ",") + line.substr(10);
    if (line.empty() || line[0] != '{') continue;
    auto n = ParseVersionsJson(line);
    if (n) nodes.push_back(*n);
  }
  std::sort(nodes.begin(), nodes.end(), [](const NodeVersions& x, const NodeVersions& y) { return x.node < y.node; });
  if (!missing.empty()) o.text += head + "no versions record on " + missing + " (its node checks have not run)\n";
  if (nodes.size() < 2) return o;
  o.comparison = CompareVersions(nodes);
  size_t p = 0;
  while (p < o.comparison.text.size()) {
    size_t e = o.comparison.text.find('\n', p);
    o.text += head + o.comparison.text.substr(p, e - p) + "\n";
    p = e == std::string::npos ? o.comparison.text.size() : e + 1;
  }
  return o;
}

AllocationOutcome RunAllocationCheck(const Config& cfg, const Allocation& a, Level level) {
  AllocationOutcome o;
  const int k = std::max(1, a.ranks_per_node);
  std::string head = "preflight: nccl: ";
  auto user_step = [&](const std::vector<std::string>& nodes, const char* scope) {
    auto argv = Srun(cfg, nodes, k, true);
    auto tool = NcclArgs(cfg, a, level, scope);
    argv.insert(argv.end(), tool.begin(), tool.end());
    return RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.nccl_timeout_ms);
  };

  if (a.nodes.size() >= 2) o.text += RailsAcross(cfg, a).text;
  if (a.nodes.size() >= 2) o.text += VersionsAcross(cfg, a).text;
  double t0 = MonotonicSeconds();
  auto all = user_step(a.nodes, "allocation");
  if (!all) {
    o.text += head + "cannot start the check: " + all.status().message() + "\n";
    return o;
  }
  char took[64];
  std::snprintf(took, sizeof took, "%.1f s", MonotonicSeconds() - t0);
  o.text += head + "all_reduce across " + std::to_string(a.nodes.size()) + " nodes x " + std::to_string(k) +
           " ranks (" + took + ")\n" + Indent(all->second);
  if (all->first == 0) {
    o.passed = true;
    return o;
  }

  // Localize, step 1: every node alone, in parallel, measured by root.
  o.text += head + "the allocation failed the check (exit " + std::to_string(all->first) +
            "); testing each node alone\n";
  {
    auto argv = Srun(cfg, a.nodes, 1, false);
    auto tool = NcclArgs(cfg, a, level, "intra-node");
    tool.push_back("--intra-node");
    argv.insert(argv.end(), tool.begin(), tool.end());
    auto intra = RunAs(argv, LaunchEnv(a.env, true), a.uid, a.gid, a.groups, cfg.nccl_timeout_ms);
    if (intra) o.text += Indent(intra->second);
    else o.text += head + "intra-node step: " + intra.status().message() + "\n";
  }
  // What the root-run checks decided is in slurmctld, where the user can't write.
  for (const auto& n : a.nodes) {
    auto st = QueryNode(cfg, n);
    if (st && st->drained() && st->reason.rfind(kNcclDrainPrefix, 0) == 0) {
      o.drained.push_back(n);
      o.text += head + "drained " + n + ": " + st->reason + "\n";
    }
  }

  // Step 2: no node failed alone: ring pairs between nodes, all in one
  // user-run step (pairs are sub-groups of one launch: one start-up cost,
  // and no step on a subset of the allocation).
  if (o.drained.empty() && a.nodes.size() >= 2) {
    const size_t n = a.nodes.size();
    auto r = user_step(a.nodes, "pairs");
    std::vector<bool> failed(n == 2 ? 1 : n, true);
    if (r) {
      o.text += Indent(r->second);
      for (size_t i = 0; i < failed.size(); ++i) {
        std::string tag = "# pair " + a.nodes[i] + "-" + a.nodes[(i + 1) % n] + ": OK";
        failed[i] = r->second.find(tag) == std::string::npos;
      }
    } else {
      o.text += head + "pair step: " + r.status().message() + "\n";
    }
    for (size_t i : InterNodeSuspects(n, failed)) o.suspects.push_back(a.nodes[i]);
    if (!o.suspects.empty()) {
      o.text += head + "inter-node suspect(s): " + Join(o.suspects, ",") + "\n";
      if (cfg.nccl_drain_internode) {
        for (const auto& s : o.suspects) {
          std::string reason = std::string(kNcclDrainPrefix) + " inter-node " + s + ": both ring pairs below threshold";
          Status d = DrainNode(cfg, s, reason);
          if (d.ok()) {
            o.drained.push_back(s);
            o.text += head + "drained " + s + ": " + reason + "\n";
          } else {
            o.text += head + "cannot drain " + s + ": " + d.message() + "\n";
          }
        }
      } else {
        o.text += head + "not drained: pairwise figures come from the job's own processes "
                         "(nccl_drain_internode=no); an admin should test " + Join(o.suspects, ",") + "\n";
      }
    }
  }

  if (!o.drained.empty() && cfg.nccl_on_failure == "requeue") {
    o.requeue = true;
    o.text += head + "the job script did not run; the job is requeued without " + Join(o.drained, ",") + "\n";
  } else {
    o.text += head + "the job script did not run; the job fails" +
              (o.drained.empty() ? std::string(" (no single node found at fault)") : " (nccl_on_failure=fail)") + "\n";
  }
  return o;
}

}  // namespace preflight::collective
