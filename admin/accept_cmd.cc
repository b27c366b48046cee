// The accept subcommand of `preflight` and its options (accept_cmd.h).
#include "accept_cmd.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight/accept_storage.h"
#include "preflight/accept_storage_worker.h"
#include "preflight/accept_train.h"
#include "preflight/checkpoint.h"
#include "preflight/ckpt_convention.h"
#include "preflight/ckpt_resume.h"
#include "preflight/fileutil.h"
#include "preflight/hostlist.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/node_watch.h"
#include "preflight/nvml.h"
#include "preflight/process.h"
#include "preflight/run_policy.h"
#include "preflight/supervisor.h"

namespace preflight {

namespace {

// Options of `preflight accept` (parsed with the common ones).
struct AcceptCli {
  std::string level = "quick";
  std::string out;
  std::vector<std::string> storage;
  std::vector<std::string> thresholds;
  std::vector<std::string> budgets;  // STAGE=SECONDS
  std::string max_bytes, storage_bytes, storage_runtime, prolog, tag;
  int storage_files = 0;
  int ranks_per_node = 0;
  bool storage_worker = false;
  std::string train;           // "" the example; "none" skips the stage
  double train_seconds = 0;    // 0: the level's
  bool train_tap = false;
  std::string train_dir;       // the tap: the storage path for the round trip's checkpoints ("": none)
  bool train_resume = false;   // the tap: the round trip's resume run
  bool train_clean = false;    // the tap: only remove the round trip's folder
  bool train_make = false;     // the tap: only make the round trip's folder (through a shared tier)
  bool train_relay = false;    // the tap: under one preflight-run around srun (through a shared tier)
  std::string train_tier;      // "" the site's ckpt_persist_to; "none": no shared tier
  std::string train_convention;  // "" marker
};
AcceptCli g_accept;

// The working directory ("." when it cannot be had).
std::string CurrentDir() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? buf : ".";
}

// A program beside this one (the install's bin/ and sbin/, or the build
// tree's sibling folders), else its bare name for PATH.
std::string Beside(const std::string& name, const char* build_dir) {
  std::string self = SelfExe();
  std::string dir = self.substr(0, self.rfind('/'));
  for (const std::string& d : {dir, dir + "/../bin", dir + "/../sbin", dir + "/../" + build_dir}) {
    std::string p = d + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

// The training stage's default: the example train.sh (conf/examples),
// stepping every 0.05 s until the bound stops it, a checkpoint every 20
// steps (on several nodes it writes only those); "" when not installed.
std::string ExampleTrain() {
  for (const char* d : {PREFLIGHT_EXAMPLES_INSTALLED, PREFLIGHT_EXAMPLES_SOURCE}) {
    std::string p = std::string(d) + "/train.sh";
    if (::access(p.c_str(), X_OK) == 0 && p.find('\'') == std::string::npos)
      return "CHECKPOINT_EVERY=20 '" + p + "' 1000000 0.05";
  }
  return "";
}

// `preflight accept --train-tap`: this node's part of the training run
// (accept_train.h), its GPUs sampled through NVML (the wrapper's node
// sampler, the site's nvml_library) where it has any.
int TrainTap(const CommonCli& cli) {
  accept::TrainTapArgs t;
  t.cmd = {"/bin/sh", "-c", g_accept.train};
  t.seconds = g_accept.train_seconds > 0 ? g_accept.train_seconds : 30;
  const char* env_node = std::getenv("SLURMD_NODENAME");
  const std::string node = env_node && *env_node ? env_node : ShortHostname();
  auto cfg = LoadCliConfig(cli, node);
  if (cfg && !g_accept.train_dir.empty()) {
    // The checkpoint round trip: under preflight-run, checkpoints in this
    // node's folder of the storage path, chosen as preflight-run chooses.
    auto dir = accept::RoundTripDir(g_accept.train_dir, node, g_accept.tag);
    if (!dir) {
      t.trip.off = dir.status().message();
    } else {
      std::vector<std::string> pass;
      if (cli.config_given()) pass = {"--config", cli.config};
      for (const auto& kv : cli.sets) pass.insert(pass.end(), {"--set", kv});
      t.trip.runner = accept::RoundTripRunner(Beside("preflight-run", "wrapper"), pass, t.seconds);
      t.cmd = accept::RoundTripShell(g_accept.train, cfg->run.checkpoint_signal);
      t.trip.dir = *dir;
      t.trip.resume = g_accept.train_resume;
      t.trip.clean = g_accept.train_clean;
      t.trip.make = g_accept.train_make;
      if (g_accept.train_relay) {
        // The site's checkpoint signal, relayed; with none, SIGTERM alone.
        auto sig = ParseSignal(cfg->run.checkpoint_signal);
        t.trip.relay_signal = sig && *sig > 0 ? *sig : SIGTERM;
      }
      if (t.trip.make) return accept::RunTrainTap(t);
      t.grace = accept::RunnerGrace(t.seconds);
      std::string marker = cfg->run.checkpoint_marker;
      t.trip.newest = [marker](const std::string& d) -> Expected<std::string> {
        auto p = NewestCompleteCheckpoint(d, marker);
        if (!p) return p.status();
        return p->empty() ? *p : p->substr(p->rfind('/') + 1);
      };
      // The resume run stops at its first progress line: no GPU samples.
      if (g_accept.train_resume || g_accept.train_clean) return accept::RunTrainTap(t);
    }
  }
  if (g_accept.train_make || g_accept.train_clean) {
    // A step that only makes or removes the folder never runs the command,
    // even when the folder cannot be had here: it says why ("off").
    t.trip.make = g_accept.train_make;
    t.trip.clean = g_accept.train_clean;
    if (t.trip.off.empty())
      t.trip.off = !cfg ? "site config: " + cfg.status().message() : "no checkpoint folder (--train-dir)";
    return accept::RunTrainTap(t);
  }
  std::shared_ptr<GpuSampler> sampler;
  std::string why;
  if (!cfg) {
    why = "site config: " + cfg.status().message();
  } else {
    ExportNvmlTestFaults(*cfg);
    const char* job_gpus = std::getenv("SLURM_JOB_GPUS");
    auto ids = ParseIdList(job_gpus ? job_gpus : "");
    auto s = OpenNvmlSampler(cfg->nvml_library, ids ? *ids : std::vector<int>{});
    if (s) sampler = std::move(*s);
    else why = s.status().message();
  }
  t.gpus = [sampler, why]() -> Expected<accept::GpuLook> {
    if (!sampler) return Status::Unavailable(why);
    auto v = sampler->Sample();
    if (!v) return v.status();
    accept::GpuLook g;
    g.gpus = static_cast<int>(v->size());
    for (const auto& r : *v) {
      g.util_mean += r.util;
      g.power_w += r.power_w;
    }
    if (g.gpus > 0) g.util_mean /= g.gpus;
    return g;
  };
  return accept::RunTrainTap(t);
}

// The command line's words and paths, before anything else is read: false
// (logged) on a stray argument, a bad --level or a --storage path that is
// not absolute or too long.
bool AcceptArgsOk(const std::vector<std::string>& args) {
  if (!args.empty()) {
    Log(LogLevel::kError, "accept", "unexpected argument '" + args[0] + "'", "storage paths go after --storage");
    return false;
  }
  if (g_accept.level != "quick" && g_accept.level != "full") {
    Log(LogLevel::kError, "accept", "--level " + g_accept.level, "expected quick or full");
    return false;
  }
  if (g_accept.train.size() > 4096) {
    Log(LogLevel::kError, "accept", "--train", "longer than 4096 bytes");
    return false;
  }
  if (!g_accept.train_convention.empty()) {
    auto c = ParseCkptConvention(g_accept.train_convention);
    if (!c) {
      Log(LogLevel::kError, "accept", "--train-convention " + g_accept.train_convention.substr(0, 80),
          c.status().message());
      return false;
    }
  }
  if (g_accept.train_seconds != 0 && !(g_accept.train_seconds >= 5 && g_accept.train_seconds <= 3600)) {
    Log(LogLevel::kError, "accept", "--train-seconds", "expected 5 to 3600 seconds");
    return false;
  }
  for (const auto& p : g_accept.storage)
    if (p.empty() || p.size() > accept::kMaxStoragePath || p[0] != '/') {
      Log(LogLevel::kError, "accept", "--storage " + p.substr(0, 80),
          "expected an absolute path of at most " + std::to_string(accept::kMaxStoragePath) + " bytes");
      return false;
    }
  return true;
}

// `preflight accept --storage-worker`: this node's part of the storage stage
// (accept_storage_worker.h), with the sizes `base` the command line gave.
int StorageWorker(const accept::StorageOptions& base) {
  accept::StorageWorkerArgs w;
  w.base = base;
  w.paths = g_accept.storage;
  w.node = std::getenv("SLURMD_NODENAME") ? std::getenv("SLURMD_NODENAME") : ShortHostname();
  w.tag = g_accept.tag;
  return accept::RunStorageWorker(w);
}

// The --threshold and --budget values into `o`: false (logged) on one that
// is unknown or out of range.
bool SetLimits(accept::RunOptions* o) {
  for (const auto& t : g_accept.thresholds) {
    Status s = accept::SetThreshold(&o->thresholds, t);
    if (!s.ok()) {
      Log(LogLevel::kError, "accept", "--threshold", s.message());
      return false;
    }
  }
  Status tc = accept::CheckThresholds(o->thresholds);
  if (!tc.ok()) {
    Log(LogLevel::kError, "accept", "--threshold", tc.message());
    return false;
  }
  for (const auto& b : g_accept.budgets) {
    size_t eq = b.find('=');
    double secs = eq == std::string::npos ? 0 : std::atof(b.c_str() + eq + 1);
    std::string stage = b.substr(0, eq);
    double* field = stage == "nodes" ? &o->budget_nodes : stage == "collective" ? &o->budget_collective
                    : stage == "storage" ? &o->budget_storage : stage == "train" ? &o->budget_train : nullptr;
    if (!field || secs < 1 || secs > 86400) {
      Log(LogLevel::kError, "accept", "--budget " + b, "expected nodes|collective|storage|train=SECONDS (1..86400)");
      return false;
    }
    *field = secs;
  }
  return true;
}

// What the run measures and with which programs: the storage paths (default
// scratch_dir, else $TMPDIR, else /tmp), the commands, the options passed on
// to the nodes' preflight, the sizes.
void SetRun(const CommonCli& cli, const Config& cfg, const std::string& job, accept::RunOptions* o) {
  o->storage_paths = g_accept.storage;
  if (o->storage_paths.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o->storage_paths.push_back(!cfg.scratch_dir.empty() ? cfg.scratch_dir : tmp && *tmp ? tmp : "/tmp");
  }
  o->tag = job + "-" + std::to_string(::time(nullptr));
  o->srun = cfg.nccl.srun.empty() ? "srun" : cfg.nccl.srun;
  o->nccl = cfg.nccl.binary;
  o->preflight = SelfExe();
  o->prolog = g_accept.prolog.empty() ? Beside("preflight-prolog", "prolog") : g_accept.prolog;
  o->preflight_run = Beside("preflight-run", "wrapper");
  if (cli.config_given()) o->pass_args = {"--config", cli.config};
  for (const auto& kv : cli.sets) o->pass_args.insert(o->pass_args.end(), {"--set", kv});
  o->max_bytes = g_accept.max_bytes;
  o->storage_bytes = g_accept.storage_bytes;
  o->storage_files = g_accept.storage_files;
  o->storage_runtime = g_accept.storage_runtime;
  o->ranks_per_node = g_accept.ranks_per_node;
  o->train_seconds = g_accept.train_seconds;
  if (!g_accept.train_convention.empty())
    o->train_convention = CkptConventionName(*ParseCkptConvention(g_accept.train_convention));
  if (g_accept.train == "none") {
    o->train_skip = "--train none";
  } else {
    o->train = g_accept.train.empty() ? ExampleTrain() : g_accept.train;
    if (o->train.empty()) o->train_skip = "no --train command, and the example train.sh is not installed";
  }
}

// The shared tier of the checkpoint round trip: --train-tier, else the
// site's ckpt_persist_to, read as preflight-run reads them (ExpandTierPath);
// and its reader of the newest durable checkpoint. False (logged) on a
// tier that is not an absolute path of at most kMaxStoragePath bytes.
bool SetTier(const Config& cfg, accept::RunOptions* o) {
  const bool given = !g_accept.train_tier.empty();
  const std::string written = given ? g_accept.train_tier : cfg.ckpt.persist_to;
  const std::string origin = (given ? "--train-tier '" : "ckpt_persist_to '") + written.substr(0, 80) + "'";
  const struct passwd* pw = ::getpwuid(::getuid());
  auto tier = ExpandTierPath(written, pw ? pw->pw_name : "", origin);
  if (tier && tier->size() > accept::kMaxStoragePath)
    tier = Status::InvalidArgument(origin + ": longer than " + std::to_string(accept::kMaxStoragePath) + " bytes");
  if (!tier) {
    Log(LogLevel::kError, "accept", "shared tier", tier.status().message());
    return false;
  }
  o->train_tier = *tier;
  o->newest_durable = [](const std::string& dir) -> Expected<std::string> {
    CkptResumeInputs in;
    in.tier = dir;
    auto c = ChooseCkptResume(in);
    if (!c) return c.status();
    return c->found ? c->chosen.name : "";
  };
  return true;
}

// The Runner the run's steps go through (accept_run.h): core's RunCommand, a
// command that cannot be started exit 127 with the reason as its output.
ProcessResult RunStep(const std::vector<std::string>& argv, unsigned ms) {
  auto r = RunCommand(argv, {}, ms == 0 ? 1 : ms);
  if (r) return *r;
  ProcessResult p;
  p.exit_code = 127;
  p.output = "cannot run " + argv[0] + ": " + r.status().message();
  return p;
}

// A step's progress line, on stdout at once.
void PrintProgress(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// report.json and report.html into `dir` (stamped now), the summary on
// stdout. Exit 2 when a report could not be written, else 1 on a failed
// verdict, 0 otherwise.
int WriteReport(accept::Report& r, const std::string& dir) {
  char created[32];
  std::time_t now = std::time(nullptr);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  r.created = created;
  Status wj = WriteFileAtomic(dir + "/report.json", accept::ReportJson(r), 0644);
  Status wh = WriteFileAtomic(dir + "/report.html", accept::ReportHtml(r), 0644);
  std::fputs(accept::SummaryText(r).c_str(), stdout);
  if (!wj.ok()) Log(LogLevel::kError, "accept", "report.json", wj.message());
  if (!wh.ok()) Log(LogLevel::kError, "accept", "report.html", wh.message());
  if (wj.ok() && wh.ok()) std::printf("report: %s/report.json, %s/report.html\n", dir.c_str(), dir.c_str());
  std::fflush(stdout);
  if (!wj.ok() || !wh.ok()) return 2;
  return r.verdict == Verdict::kFail ? 1 : 0;
}

}  // namespace

void AddAcceptOptions(po::options_description& visible, po::options_description& hidden) {
  visible.add_options()
      ("level", po::value<std::string>(&g_accept.level)->value_name("LEVEL"), "quick (default) or full: sizes, budgets, storage file sizes")
      ("out", po::value<std::string>(&g_accept.out)->value_name("DIR"), "where report.json and report.html go (default ./preflight-accept-JOBID)")
      ("storage", po::value<std::vector<std::string>>(&g_accept.storage)->value_name("PATH")->composing(),
       "a directory to measure (repeatable; default scratch_dir, else $TMPDIR, else /tmp)")
      ("threshold", po::value<std::vector<std::string>>(&g_accept.thresholds)->value_name("KEY=VALUE")->composing(),
       "a verdict threshold (repeatable): scaling_warn, scaling_fail, straggler_fraction, seq_write, seq_read, "
       "rand_read_iops, ckpt_write, create_per_s, storage_fraction, train_fraction, train_dip")
      ("budget", po::value<std::vector<std::string>>(&g_accept.budgets)->value_name("STAGE=SECONDS")->composing(),
       "a stage's time budget: nodes, collective, storage, train (repeatable)")
      ("max-bytes", po::value<std::string>(&g_accept.max_bytes)->value_name("SIZE"), "cap on the collective's message sizes")
      ("ranks-per-node", po::value<int>(&g_accept.ranks_per_node)->value_name("N"), "collective ranks per node (default one; GPUs per node on GPU nodes)")
      ("storage-bytes", po::value<std::string>(&g_accept.storage_bytes)->value_name("SIZE"), "storage file size per node (checkpoint: twice that)")
      ("storage-files", po::value<int>(&g_accept.storage_files)->value_name("N"), "small files per node")
      ("storage-runtime", po::value<std::string>(&g_accept.storage_runtime)->value_name("SECONDS"), "cap per fio job")
      ("prolog", po::value<std::string>(&g_accept.prolog)->value_name("PATH"), "preflight-prolog to run the node checks with")
      ("train", po::value<std::string>(&g_accept.train)->value_name("CMD"),
       "the training run's command, by sh -c on every node at once (default: the example train.sh; none: skip)")
      ("train-seconds", po::value<double>(&g_accept.train_seconds)->value_name("SECONDS"),
       "the training run's bound (default quick 30, full 300; 5 to 3600)")
      ("train-convention", po::value<std::string>(&g_accept.train_convention)->value_name("NAME"),
       "how the training command's checkpoints are known complete: marker (default), dcp, torchtitan, megatron, "
       "deepspeed, nemo (a framework's own needs the shared tier)")
      ("train-tier", po::value<std::string>(&g_accept.train_tier)->value_name("DIR"),
       "the shared tier the checkpoint round trip goes through (%u: your user name; none: each node's own disk) "
       "[site: ckpt_persist_to]");
  hidden.add_options()
      ("storage-worker", po::bool_switch(&g_accept.storage_worker), "internal: measure --storage paths on this node")
      ("tag", po::value<std::string>(&g_accept.tag), "internal: the storage worker's directory suffix")
      ("train-tap", po::bool_switch(&g_accept.train_tap), "internal: run --train on this node under the tap")
      ("train-dir", po::value<std::string>(&g_accept.train_dir), "internal: the tap's storage path for the checkpoint round trip")
      ("train-resume", po::bool_switch(&g_accept.train_resume), "internal: the tap's resume run of the round trip")
      ("train-clean", po::bool_switch(&g_accept.train_clean), "internal: remove this node's round-trip folder")
      ("train-make", po::bool_switch(&g_accept.train_make), "internal: make this node's round-trip folder")
      ("train-relay", po::bool_switch(&g_accept.train_relay), "internal: the tap under one preflight-run (shared tier)");
}

// preflight accept: the acceptance run inside an allocation (accept/accept_run.h
// decides; this reads the allocation, writes the report, prints the summary).
int AcceptCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  if (!AcceptArgsOk(args)) return 2;
  auto so = accept::StorageOptionsFor(g_accept.level, g_accept.storage_bytes, g_accept.storage_files,
                                      g_accept.storage_runtime);
  if (!so) {
    Log(LogLevel::kError, "accept", "storage options", so.status().message());
    return 2;
  }
  if (g_accept.storage_worker) return StorageWorker(*so);
  if (g_accept.train_tap) return TrainTap(cli);
  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!nodelist || !job) {
    Log(LogLevel::kError, "accept", "no allocation", "run inside one: sbatch -N8 --exclusive --wrap 'preflight accept' (or under salloc)");
    return 2;
  }
  auto nodes = ExpandHostlist(nodelist);
  if (!nodes || nodes->empty()) {
    Log(LogLevel::kError, "accept", "SLURM_JOB_NODELIST", nodes ? "empty" : nodes.status().message());
    return 2;
  }
  auto cfg = LoadCliConfig(cli, "");
  if (!cfg) {
    Log(LogLevel::kError, "accept", "site config", cfg.status().message());
    return 2;
  }
  accept::RunOptions o;
  o.level = g_accept.level;
  o.nodes = *nodes;
  o.job_id = job;
  o.tool_version = VersionString();
  // The straggler rule is the site's (nccl_straggler_fraction) unless
  // --threshold straggler_fraction= says otherwise for this run.
  o.thresholds.straggler_fraction = cfg->nccl.straggler_fraction;
  if (!SetLimits(&o)) return 2;
  SetRun(cli, *cfg, job, &o);
  if (!SetTier(*cfg, &o)) return 2;

  std::string out = g_accept.out.empty() ? "preflight-accept-" + std::string(job) : g_accept.out;
  std::string used, note;
  Status d = accept::PrepareOutDir(out, o.tag, &used, &note);
  if (!d.ok()) {
    Log(LogLevel::kError, "accept", "--out", d.message());
    return 2;
  }
  if (!note.empty()) std::printf("preflight accept: %s\n", note.c_str());
  std::fflush(stdout);
  o.node_state_dir = (used[0] == '/' ? used : CurrentDir() + "/" + used) + "/.state-" + o.tag;
  accept::Report r = accept::RunAccept(o, RunStep, PrintProgress);
  RunCommand({"rm", "-rf", "--", o.node_state_dir}, {}, 60000);
  if (!note.empty()) { r.notes.push_back(note); accept::Judge(&r); }
  return WriteReport(r, used);
}

}  // namespace preflight
