// The acceptance run's storage stage (run_stages.h): the storage worker on
// every node at once (with the summed row), then on one node alone.
#include <set>
#include <utility>

#include "preflight/accept_storage.h"
#include "run_stages.h"

namespace preflight::accept::run_internal {

std::vector<std::string> Stages::WorkerArgs(std::vector<std::string> a) {
  a.push_back(o_.preflight);
  a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
  a.insert(a.end(), {"accept", "--storage-worker", "--level", o_.level, "--tag", o_.tag});
  if (!o_.storage_bytes.empty()) a.insert(a.end(), {"--storage-bytes", o_.storage_bytes});
  if (o_.storage_files > 0) a.insert(a.end(), {"--storage-files", std::to_string(o_.storage_files)});
  if (!o_.storage_runtime.empty()) a.insert(a.end(), {"--storage-runtime", o_.storage_runtime});
  for (const auto& p : o_.storage_paths) a.insert(a.end(), {"--storage", p});
  return a;
}

std::vector<StorageFigures> Stages::Worker(const std::vector<std::string>& nodes, const std::string& scope) {
  // --label: srun splits each task's output into whole lines (without it,
  // long lines of tasks running at once interleave mid-line).
  std::vector<std::string> a = WorkerArgs(Srun(nodes, false, 1, true));
  ProcessResult p = run_(a, Left());
  std::vector<StorageFigures> out;
  std::set<std::pair<std::string, std::string>> got;
  std::vector<std::string> lines;
  for (const auto& [task, text] : SplitLabelled(p.output)) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
      pos = nl == std::string::npos ? text.size() : nl + 1;
    }
  }
  for (const auto& line : lines) {
    if (line.rfind(kStoragePrefix, 0) != 0) continue;
    auto f = ParseStorageLine(line);
    if (!f) continue;
    f->scope = scope;
    auto so = StorageOptionsFor(o_.level, o_.storage_bytes, o_.storage_files, o_.storage_runtime);
    if (so) {
      so->path = f->path;
      so->node = f->node;
      so->tag = o_.tag;
      f->reproduce = ReproduceCommands(*so);
    }
    got.insert({f->node, f->path});
    out.push_back(*f);
  }
  bool missing = false;
  for (const auto& n : nodes)
    for (const auto& path : o_.storage_paths)
      if (!got.count({n, path})) {
        missing = true;
        StorageFigures f;
        f.path = path;
        f.node = n;
        f.scope = scope;
        f.error = p.timed_out ? "no result within the stage budget" : "no result from " + n + ": " + LastLine(p.output);
        out.push_back(f);
      }
  if (missing) FindLost(nodes, "storage (" + scope + ")");
  return out;
}

void Stages::Storage() {
  if (o_.storage_paths.empty()) {
    Note("no storage path given");
    return;
  }
  if (live_.empty()) {
    Note("no node left to measure storage from");
    return;
  }
  if (Budget("storage from every node at once")) {
    Say("storage: " + std::to_string(o_.storage_paths.size()) + " paths from " + std::to_string(live_.size()) +
        " nodes at once");
    double t0 = Now();
    auto all = Worker(live_, "all nodes");
    // The aggregate row: the nodes' rates summed (they ran at once).
    for (const auto& path : o_.storage_paths) {
      StorageFigures sum;
      sum.path = path;
      sum.scope = "all nodes";
      int n = 0;
      for (const auto& f : all) {
        if (f.path != path || !f.error.empty()) continue;
        ++n;
        sum.seq_write += f.seq_write;
        sum.seq_read += f.seq_read;
        sum.rand_read_iops += f.rand_read_iops;
        sum.ckpt_write += f.ckpt_write;
        sum.create_per_s += f.create_per_s;
        sum.read_files_per_s += f.read_files_per_s;
        sum.stat_per_s += f.stat_per_s;
        if (sum.reproduce.empty()) sum.reproduce = f.reproduce;
      }
      if (n > 0) r_->storage.push_back(sum);
    }
    for (const auto& f : all) {
      r_->storage.push_back(f);
      if (!f.error.empty()) Note(f.node + ": " + f.error);
    }
    Say("storage: every node at once done in " + F("%.1f", Now() - t0) + " s");
  }
  if (!live_.empty() && Budget("storage from one node alone")) {
    double t0 = Now();
    Say("storage: " + std::to_string(o_.storage_paths.size()) + " paths from " + live_[0] + " alone");
    for (auto& f : Worker({live_[0]}, "one node")) {
      if (!f.error.empty()) Note(f.node + " alone: " + f.error);
      r_->storage.push_back(f);
    }
    Say("storage: one node done in " + F("%.1f", Now() - t0) + " s");
  }
}

}  // namespace preflight::accept::run_internal
