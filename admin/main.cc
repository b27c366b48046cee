// preflight: the admin command (man preflight(8)): config, options, topo,
// fleet, cache, state, reasons, slurm, accept, container, version.
// Every subcommand is one row of kCommands below (its synopsis and what it
// does are the help text, `preflight COMMAND --help` prints its own); each is
// a thin shell over core/.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight/accept_storage.h"
#include "preflight/accept_storage_worker.h"
#include "preflight/cli.h"
#include "preflight/config_check.h"
#include "preflight/drain_reason.h"
#include "preflight/json.h"
#include "preflight/log.h"
#include "preflight/fileutil.h"
#include "preflight/fleet.h"
#include "preflight/fsroot.h"
#include "preflight/hostlist.h"
#include "container_cmd.h"
#include "fleet_cmd.h"
#include "cache_cmd.h"
#include "topo_cmd.h"
#include "config_cmd.h"
#include "preflight/job.h"
#include "preflight/options.h"
#include "preflight/placement.h"
#include "preflight/plugstack.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/slurm_conf.h"
#include "preflight/slurmctl.h"
#include "preflight/topo.h"
#include "preflight/topo_load.h"
#include "preflight/stage_job.h"
#include "preflight/state_paths.h"
#include "slurm_records.h"

namespace {

using namespace preflight;

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
};
AcceptCli g_accept;

int AcceptStorageWorker(const CommonCli& cli) {
  (void)cli;
  std::string node = std::getenv("SLURMD_NODENAME") ? std::getenv("SLURMD_NODENAME") : ShortHostname();
  auto opts = accept::StorageOptionsFor(g_accept.level, g_accept.storage_bytes, g_accept.storage_files,
                                        g_accept.storage_runtime);
  if (!opts) {
    Log(LogLevel::kError, "accept", "storage options", opts.status().message());
    return 2;
  }
  accept::StorageWorkerArgs w;
  w.base = *opts;
  w.paths = g_accept.storage;
  w.node = node;
  w.tag = g_accept.tag;
  return accept::RunStorageWorker(w);
}

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

// preflight accept: the acceptance run inside an allocation (accept/accept_run.h
// decides; this reads the allocation, writes the report, prints the summary).
int AcceptCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  if (!args.empty()) {
    Log(LogLevel::kError, "accept", "unexpected argument '" + args[0] + "'", "storage paths go after --storage");
    return 2;
  }
  if (g_accept.level != "quick" && g_accept.level != "full") {
    Log(LogLevel::kError, "accept", "--level " + g_accept.level, "expected quick or full");
    return 2;
  }
  for (const auto& p : g_accept.storage)
    if (p.empty() || p.size() > accept::kMaxStoragePath || p[0] != '/') {
      Log(LogLevel::kError, "accept", "--storage " + p.substr(0, 80),
          "expected an absolute path of at most " + std::to_string(accept::kMaxStoragePath) + " bytes");
      return 2;
    }
  if (auto so = accept::StorageOptionsFor(g_accept.level, g_accept.storage_bytes, g_accept.storage_files,
                                          g_accept.storage_runtime); !so) {
    Log(LogLevel::kError, "accept", "storage options", so.status().message());
    return 2;
  }
  if (g_accept.storage_worker) return AcceptStorageWorker(cli);
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
  for (const auto& t : g_accept.thresholds) {
    Status s = accept::SetThreshold(&o.thresholds, t);
    if (!s.ok()) {
      Log(LogLevel::kError, "accept", "--threshold", s.message());
      return 2;
    }
  }
  Status tc = accept::CheckThresholds(o.thresholds);
  if (!tc.ok()) {
    Log(LogLevel::kError, "accept", "--threshold", tc.message());
    return 2;
  }
  for (const auto& b : g_accept.budgets) {
    size_t eq = b.find('=');
    double secs = eq == std::string::npos ? 0 : std::atof(b.c_str() + eq + 1);
    std::string stage = b.substr(0, eq);
    double* field = stage == "nodes" ? &o.budget_nodes : stage == "collective" ? &o.budget_collective
                    : stage == "storage" ? &o.budget_storage : nullptr;
    if (!field || secs < 1 || secs > 86400) {
      Log(LogLevel::kError, "accept", "--budget " + b, "expected nodes|collective|storage=SECONDS (1..86400)");
      return 2;
    }
    *field = secs;
  }
  o.storage_paths = g_accept.storage;
  if (o.storage_paths.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.storage_paths.push_back(!cfg->scratch_dir.empty() ? cfg->scratch_dir : tmp && *tmp ? tmp : "/tmp");
  }
  o.tag = std::string(job) + "-" + std::to_string(::time(nullptr));
  o.srun = cfg->nccl.srun.empty() ? "srun" : cfg->nccl.srun;
  o.nccl = cfg->nccl.binary;
  o.preflight = SelfExe();
  o.prolog = g_accept.prolog.empty() ? Beside("preflight-prolog", "prolog") : g_accept.prolog;
  if (cli.config_given()) o.pass_args = {"--config", cli.config};
  for (const auto& kv : cli.sets) o.pass_args.insert(o.pass_args.end(), {"--set", kv});
  o.max_bytes = g_accept.max_bytes;
  o.storage_bytes = g_accept.storage_bytes;
  o.storage_files = g_accept.storage_files;
  o.storage_runtime = g_accept.storage_runtime;
  o.ranks_per_node = g_accept.ranks_per_node;

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
  auto run = [](const std::vector<std::string>& argv, unsigned ms) {
    auto r = RunCommand(argv, {}, ms == 0 ? 1 : ms);
    if (r) return *r;
    ProcessResult p;
    p.exit_code = 127;
    p.output = "cannot run " + argv[0] + ": " + r.status().message();
    return p;
  };
  auto progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  accept::Report r = accept::RunAccept(o, run, progress);
  RunCommand({"rm", "-rf", "--", o.node_state_dir}, {}, 60000);
  if (!note.empty()) { r.notes.push_back(note); accept::Judge(&r); }
  char created[32];
  std::time_t now = std::time(nullptr);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  r.created = created;
  Status wj = WriteFileAtomic(used + "/report.json", accept::ReportJson(r), 0644);
  Status wh = WriteFileAtomic(used + "/report.html", accept::ReportHtml(r), 0644);
  std::fputs(accept::SummaryText(r).c_str(), stdout);
  if (!wj.ok()) Log(LogLevel::kError, "accept", "report.json", wj.message());
  if (!wh.ok()) Log(LogLevel::kError, "accept", "report.html", wh.message());
  if (wj.ok() && wh.ok()) std::printf("report: %s/report.json, %s/report.html\n", used.c_str(), used.c_str());
  std::fflush(stdout);
  if (!wj.ok() || !wh.ok()) return 2;
  return r.verdict == accept::Verdict::kFail ? 1 : 0;
}

// One row per subcommand: its synopsis lines (what `preflight --help` lists
// and `preflight COMMAND --help` prints) and what it does.
struct Usage {
  const char* synopsis;
  const char* what;
};
struct Command {
  const char* name;
  Usage usage[2];  // a second synopsis line, or {nullptr, nullptr}
  int (*run)(const std::vector<std::string>& args, const CommonCli& cli);
};

int VersionCmd(const std::vector<std::string>&, const CommonCli&) {
  std::cout << "preflight " << VersionString() << "\n";
  return 0;
}

const Command kCommands[] = {
    {"config", {{"config check|show|keys [NODE]", "validate, print or list the site config"}, {}}, ConfigCmd},
    {"options", {{"options", "the job options the SPANK plugin adds"}, {}}, OptionsCmd},
    {"topo",
     {{"topo [--xml F [--fsroot D]] [--gpus L] [--nodes N] [--json]", "GPU-NIC table and a task's env"},
      {"topo --compare FILE...", "compare nodes' rails records, name the odd node"}},
     TopoCmd},
    {"fleet", {{"fleet [HOSTLIST|FILE]...", "nodes' driver/VBIOS/InfoROM/HCA firmware/kernel records; name the odd node"}, {}},
     FleetCmd},
    {"cache", {{"cache ls|gc|rm KEY|SRC [node=N]", "list, trim or remove --stage cached datasets"}, {}}, CacheCmd},
    {"state", {{"state gc [--dry-run] [node=N]", "prune state_dir/jobs to state_keep and state_keep_size"}, {}}, StateCmd},
    {"reasons", {{"reasons [HOSTLIST]", "preflight's drains (default: on every node) as JSON, parsed"}, {}}, ReasonsCmd},
    {"slurm", {{"slurm job J|steps J|nodes LIST", "slurmctld's records as JSON (what root-run code reads)"}, {}},
     SlurmRecordsCmd},
    {"accept",
     {{"accept [--level quick|full] [--out DIR] [--storage PATH]...", "cluster acceptance run inside an allocation: report.json + report.html"},
      {}},
     AcceptCmd},
    {"container", {{"container enroot-mounts", "the enroot fstab lines giving a job's container its preflight folders (the enroot hook)"}, {}},
     ContainerCmd},
    {"version", {{"version", "print the version"}, {}}, VersionCmd},
};

// The synopses of `commands`, in one column as wide as the widest, then what
// each does.
std::string UsageLines(const std::vector<const Command*>& commands) {
  size_t width = 0;
  for (const Command* c : commands)
    for (const Usage& u : c->usage)
      if (u.synopsis) width = std::max(width, std::strlen(u.synopsis));
  std::string o;
  for (const Command* c : commands)
    for (const Usage& u : c->usage) {
      if (!u.synopsis) continue;
      o += "  " + std::string(u.synopsis) + std::string(width - std::strlen(u.synopsis) + 2, ' ') + u.what + "\n";
    }
  return o;
}

int Main(int argc, char** argv) {
  CommonCli cli;
  std::vector<std::string> words;
  std::vector<const Command*> all;
  for (const auto& c : kCommands) all.push_back(&c);
  // 100 columns: at boost's default 80 the option help wraps mid-word.
  po::options_description common("Options", 100);
  AddCommonOptions(common, cli);
  po::options_description topo_opts("Options of 'preflight topo'", 100);
  AddTopoOptions(topo_opts);
  po::options_description state_opts("Options of 'preflight state gc'", 100);
  AddStateOptions(state_opts);
  po::options_description accept_opts("Options of 'preflight accept'", 100);
  accept_opts.add_options()
      ("level", po::value<std::string>(&g_accept.level)->value_name("LEVEL"), "quick (default) or full: sizes, budgets, storage file sizes")
      ("out", po::value<std::string>(&g_accept.out)->value_name("DIR"), "where report.json and report.html go (default ./preflight-accept-JOBID)")
      ("storage", po::value<std::vector<std::string>>(&g_accept.storage)->value_name("PATH")->composing(),
       "a directory to measure (repeatable; default scratch_dir, else $TMPDIR, else /tmp)")
      ("threshold", po::value<std::vector<std::string>>(&g_accept.thresholds)->value_name("KEY=VALUE")->composing(),
       "a verdict threshold (repeatable): scaling_warn, scaling_fail, straggler_fraction, seq_write, seq_read, "
       "rand_read_iops, ckpt_write, create_per_s, storage_fraction")
      ("budget", po::value<std::vector<std::string>>(&g_accept.budgets)->value_name("STAGE=SECONDS")->composing(),
       "a stage's time budget: nodes, collective, storage (repeatable)")
      ("max-bytes", po::value<std::string>(&g_accept.max_bytes)->value_name("SIZE"), "cap on the collective's message sizes")
      ("ranks-per-node", po::value<int>(&g_accept.ranks_per_node)->value_name("N"), "collective ranks per node (default one; GPUs per node on GPU nodes)")
      ("storage-bytes", po::value<std::string>(&g_accept.storage_bytes)->value_name("SIZE"), "storage file size per node (checkpoint: twice that)")
      ("storage-files", po::value<int>(&g_accept.storage_files)->value_name("N"), "small files per node")
      ("storage-runtime", po::value<std::string>(&g_accept.storage_runtime)->value_name("SECONDS"), "cap per fio job")
      ("prolog", po::value<std::string>(&g_accept.prolog)->value_name("PATH"), "preflight-prolog to run the node checks with");
  po::options_description accept_hidden;
  accept_hidden.add_options()
      ("storage-worker", po::bool_switch(&g_accept.storage_worker), "internal: measure --storage paths on this node")
      ("tag", po::value<std::string>(&g_accept.tag), "internal: the storage worker's directory suffix");
  po::options_description visible(100);
  visible.add(common).add(topo_opts).add(state_opts).add(accept_opts);
  po::options_description parsed_opts;
  parsed_opts.add(visible).add(accept_hidden);
  const std::string general = "Usage: preflight [OPTIONS] COMMAND [ARGS...]\nCommands:\n" + UsageLines(all);
  po::variables_map vm;
  Status s = ParseCommandLineWords(argc, argv, parsed_opts, &words, vm);
  if (!s.ok()) {
    Log(LogLevel::kError, "admin", "bad command line", s.message());
    return 2;
  }
  if (!TopoOptionsParsed(vm)) return 2;
  const Command* cmd = nullptr;
  for (const auto& c : kCommands)
    if (!words.empty() && words[0] == c.name) cmd = &c;
  if (cli.help && cmd != nullptr) {
    // `preflight fleet --help`: that command's usage and the options it reads.
    std::cout << "Usage: preflight [OPTIONS] " << cmd->name << " ...\n" << UsageLines({cmd}) << "\n";
    if (std::strcmp(cmd->name, "topo") == 0) std::cout << topo_opts << "\n";
    if (std::strcmp(cmd->name, "state") == 0) std::cout << state_opts << "\n";
    if (std::strcmp(cmd->name, "accept") == 0) std::cout << accept_opts << "\n";
    std::cout << common << "\nSee preflight(8).\n";
    return 0;
  }
  if (cli.help) { std::cout << general << visible << "\n"; return 0; }
  if (cli.version) return VersionCmd({}, cli);
  if (words.empty()) {
    std::cerr << general << visible << "\n";
    return 2;
  }
  if (cmd != nullptr) return cmd->run(std::vector<std::string>(words.begin() + 1, words.end()), cli);
  Log(LogLevel::kError, "admin", "unknown command '" + words[0] + "'", "see preflight --help");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  return preflight::GuardedMain("admin", [&] { return Main(argc, argv); });
}
