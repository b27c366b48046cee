// The acceptance run's stages (private to accept/src): the object that runs
// nodes, collective and storage in turn for RunAccept (accept_run.h), each
// against its budget, and the text helpers they share. The machinery every
// stage uses is in run_stages.cc; each stage is in a file of its own:
// run_nodes.cc, run_collective.cc, run_storage.cc, run_train.cc.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight/accept_train.h"
#include "preflight/strings.h"

namespace preflight::accept::run_internal {

double Now();  // steady clock, seconds
std::string F(const char* fmt, double v);  // printf of one double
// argv as one shell command line, arguments quoted where needed.
std::string Cmdline(const std::vector<std::string>& argv);
// srun --label output: "K: line" (K padded) -> task K's lines.
std::map<int, std::string> SplitLabelled(const std::string& out);
// The last non-empty line of `out`, cut at 240 characters.
std::string LastLine(const std::string& out);

class Stages {
 public:
  Stages(const RunOptions& o, const Runner& run, const Progress& progress, Report* r)
      : o_(o), run_(run), progress_(progress), r_(r) {}

  // Fills r->stages and runs the three stages in order.
  void Go();

 private:
  // run_stages.cc
  template <class Fn>
  void Timed(size_t i, Fn fn);
  void Say(const std::string& line);
  void Note(const std::string& line);
  // Time left in this stage's budget, in ms (0: spent).
  unsigned Left() const;
  bool Budget(const std::string& what);
  std::vector<std::string> Srun(const std::vector<std::string>& nodes, bool pmix, int per_node, bool label);
  // After a failed step: which of `nodes` does Slurm no longer reach? They
  // are named and dropped from the later steps.
  void FindLost(const std::vector<std::string>& nodes, const std::string& step);

  // run_nodes.cc
  void Nodes();
  void Rails();
  // `preflight` (pass_args, the node checks' state_dir) with `args`, within
  // the stage's budget and at most 60 s.
  ProcessResult Preflight(const std::vector<std::string>& args);

  // run_collective.cc
  std::vector<std::string> NcclArgs(std::vector<std::string> a);
  // A preflight-nccl step; one its watchdog ended before the PMIx bootstrap
  // completed (collective_records.h: kNoBootstrapLine) runs again, up to
  // kBootstrapLaunches in all, each said as a note.
  ProcessResult Launch(const std::vector<std::string>& a, const std::string& what);
  void Collective();
  void Operations(int per);
  void IntraNode();
  std::vector<PairFigure> RunPairs(const std::vector<std::string>& nodes, int per, std::string* error);
  void Pairs(int per);

  // run_storage.cc
  std::vector<std::string> WorkerArgs(std::vector<std::string> a);
  std::vector<StorageFigures> Worker(const std::vector<std::string>& nodes, const std::string& scope);
  void Storage();

  // run_train.cc
  // `runner`: words before the srun (preflight-run, through the shared
  // tier); `nodes`: these instead of every live node.
  std::map<std::string, TapRecord> TapStep(const std::vector<std::string>& extra, double seconds, ProcessResult* out,
                                           const std::vector<std::string>& runner = {},
                                           const std::vector<std::string>* nodes = nullptr);
  std::vector<std::string> TripArgs(std::vector<std::string> mode) const;
  void Train();
  bool MakeTier();
  std::vector<std::string> TierRunner(double seconds) const;
  void Durable();
  void Resume();
  void EndTier();

  const RunOptions& o_;
  const Runner& run_;
  const Progress& progress_;
  Report* r_;
  std::vector<std::string> live_;
  Stage* stage_ = nullptr;
  double deadline_ = 0;
};

}  // namespace preflight::accept::run_internal
