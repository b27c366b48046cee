// The acceptance run's report (preflight accept): what was measured, what it
// was judged against, the verdict, the reason in words and the command that
// reproduces it. Slurm-free: the shell (admin/accept_cmd.cc) fills the
// measurements, Judge() decides, ReportJson()/ReportHtml() render.
//
// Figures are in bytes/s (rates), operations/s (IOPS, files/s) or seconds;
// the unit is a field of every figure. A threshold of 0 means none applies,
// and the figure's threshold_source says why.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "preflight/report.h"
#include "preflight/status.h"

namespace preflight::accept {

// Verdicts are core's (report.h); skip: not measured (the reason says why).
// The accept report's words: "pass", "warn", "fail", "skip" (its schema's;
// a node report writes "skipped").
const char* ReportWord(Verdict v);
// The run's worst: fail > warn > pass > skip (a stage that could not be
// measured does not hide one that passed; core's node Overall() ranks skip
// above pass, since a node check that could not run is not a pass).
Verdict Worse(Verdict a, Verdict b);

// One judged figure: every number the report shows a verdict for.
struct Figure {
  std::string stage;             // "nodes", "collective", "storage", "train"
  std::string name;              // "busbw 4 nodes", "seq_write", ...
  std::string node;              // the node it belongs to ("" for the allocation)
  std::string path;              // the storage path ("" otherwise)
  std::string unit;              // "B/s", "IOPS", "files/s", "ratio", "steps/s"
  double value = 0;
  double threshold = 0;          // 0: none
  std::string threshold_source;  // "2-node figure x 0.70", "--threshold seq_read", "profile h100", "none: ..."
  double reference = 0;          // what it is compared with, when not a threshold (the 2-node figure)
  Verdict verdict = Verdict::kSkip;
  std::string reason;            // in words
  std::string reproduce;         // a command line
  // What a node's figure broke, in the same words for every node that broke
  // it ("/p (all nodes): seq_write below 10 MB/s per node"); "" when it
  // passed or belongs to the allocation. Figures that share a rule are one
  // finding (Report::reasons). Not in report.json: the reason is.
  std::string rule;
  bool ranged = false;           // the rule compares `value`: the finding gives the nodes' range
};

// Collective: one all-reduce sweep at one node count (1 = intra-node).
struct SizePoint {
  uint64_t bytes = 0;
  double busbw = 0;   // bytes/s
  uint64_t wrong = 0; // elements that did not verify
};
struct Curve {
  std::string op = "all_reduce";  // preflight-nccl's operation (collective_ops.h names)
  int nodes = 0;                  // node count (1: intra-node on nodes[0])
  std::vector<std::string> node_names;
  int ranks = 0;
  std::string backend;            // "nccl", "host-tcp"
  std::string profile;            // the SKU profile preflight-nccl applied ("" none)
  double profile_threshold = 0;   // its threshold, bytes/s (0 none)
  std::string threshold_source;   // preflight-nccl's words for it
  std::vector<SizePoint> sizes;
  std::string error;              // why there is no sweep ("" when there is)
  std::string reproduce;
  double worse_busbw = 0;         // measured twice: the worse sweep's Busbw() (0: measured once)
  double Busbw() const;           // at the largest size measured (0 when none)
};

struct PairFigure {
  std::string a, b;
  double busbw = 0;  // bytes/s, the better of its samples
  double worse = 0;  // bytes/s, the worse of two samples (0: measured once)
  bool pass = true;
  std::string message;
};

// Storage: one path measured from every node at once or from one node alone.
struct StorageFigures {
  std::string path;
  std::string scope;           // "all nodes" or "one node"
  std::string node;            // the node ("" for the aggregate over all nodes)
  double seq_write = 0;        // B/s (1 MiB blocks)
  double seq_read = 0;         // B/s
  double rand_read_iops = 0;   // 4 KiB random reads
  double ckpt_write = 0;       // B/s, one checkpoint-sized file
  double create_per_s = 0;     // small files created (written, fsync'ed at the end) per second
  double read_files_per_s = 0; // small files read per second
  double stat_per_s = 0;       // metadata: stat() per second
  std::string error;           // why figures are missing ("" none): unwritable, full, node lost
  std::vector<std::string> reproduce;  // the fio command lines
};

// Training (accept_train.h): the command on every node at once, bounded.
struct TrainNode {
  std::string node;
  std::vector<std::pair<double, double>> rate;  // (seconds since start, steps/s)
  double median_rate = 0;    // steps/s, over `rate` (0: fewer than two samples)
  long last_step = -1;       // -1: no progress line
  double last_time = 0;      // when the last progress line came (seconds since start)
  bool has_loss = false;
  bool loss_finite = true;
  double last_loss = 0;
  std::vector<std::string> errors;  // the tap's error lines ("T TEXT")
  std::string end;           // the tap's end ("exit 0", "bound", "signal 9"; "": never ended)
  long lines = 0;            // the command's output lines
  std::string last;          // its last non-empty line
  int gpus = 0;              // GPUs sampled (0: none; gpu_note says why)
  double gpu_util = 0;       // their mean utilisation over the run, percent
  double gpu_power_w = 0;    // their mean total power draw, watts
  std::string gpu_note;
  // The checkpoint round trip (accept_train.h: TrainRoundTrip).
  struct Checkpoint {
    bool tried = false;        // the run went under preflight-run with a checkpoint directory
    std::string off;           // why there was no round trip here ("" when tried or not asked)
    std::string saved;         // the newest complete checkpoint after the run ("" none); through
                               // a shared tier the newest durable there (every node's part)
    std::string saved_local;   // through a shared tier: the newest complete one on this node's disk
    long saved_step = -1;      // the step its name carries (-1: none)
    bool resumed = false;      // the resume run came back from this node
    std::string from;          // what it resumed from ("" nothing)
    std::string from_path;     // through a shared tier: its whole path ($PREFLIGHT_RESUME_FROM)
    bool from_tier = false;    // ... and that is on the shared tier
    long first_step = -1;      // the training run's first progress step
    long resume_step = -1;     // the resume run's first progress step (-1 none)
    double resume_time = 0;    // when it came (seconds after the resume run started)
    std::string resume_end;    // how the resume run ended (TrainNode::end's words)
    std::string resume_last;   // its last non-empty line
    std::string left;          // a checkpoint folder that could not be removed, and why
  } ckpt;
};
struct TrainRun {
  std::string command;       // "" : the stage did not run (error says why)
  double seconds = 0;        // the bound
  double resume_seconds = 0; // the round trip's resume run's bound (0: none ran)
  std::string tier;          // the shared tier's folder the round trip went through ("" none)
  std::string convention;    // how its checkpoints were known complete ("" preflight-run's marker)
  std::vector<TrainNode> nodes;
  std::string error;
};

// A stage of the run: timed, with a budget.
struct Stage {
  std::string name;             // "nodes", "collective", "storage"
  Verdict verdict = Verdict::kSkip;
  double seconds = 0;
  double budget_seconds = 0;
  std::vector<std::string> notes;  // lines for the summary (bad input, nodes lost, one-node allocation)
};

struct NodeRow {
  std::string node;
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;
};

// What the verdicts are judged against; every field has a stated default
// (ThresholdKeys()) and can be set with `--threshold KEY=VALUE`.
struct Thresholds {
  double scaling_warn = 0.90;       // busbw at k nodes / 2-node busbw below this: warn
  double scaling_fail = 0.70;       // below this: fail (the network is unfit)
  double straggler_fraction = 0.5;  // a node's pairs below this fraction of the median: named (the site's nccl_straggler_fraction)
  double seq_write = 0;             // B/s per node (0: none)
  double seq_read = 0;
  double rand_read_iops = 0;
  double ckpt_write = 0;            // B/s per node
  double create_per_s = 0;
  double storage_fraction = 0.5;    // a path's one-node figure below this fraction of the best path's: warn
  double train_fraction = 0.8;      // a node's median step rate below this fraction of the allocation's: fail
  double train_dip = 0.5;           // a sample (after the first) below this fraction of the node's median: warn
  double train_gpu_util = 0.5;      // a node's mean GPU utilisation in the training run below this: warn
};
struct ThresholdKey {
  const char* name;
  const char* unit;  // "ratio", "rate", "count"
  const char* help;
};
const std::vector<ThresholdKey>& ThresholdKeys();
// "KEY=VALUE": rates take ParseRate's forms (100M, 2G), counts plain numbers,
// ratios numbers in (0, 1). Unknown keys and bad values are InvalidArgument
// naming the key.
Status SetThreshold(Thresholds* t, const std::string& key_value);
// After all are set: scaling_fail must not be above scaling_warn.
Status CheckThresholds(const Thresholds& t);

struct Report {
  std::string tool_version;
  std::string created;            // ISO 8601 UTC
  std::string job_id;
  std::string level;              // "quick", "full"
  std::vector<std::string> nodes; // the allocation, in ring order
  std::vector<std::string> storage_paths;
  Thresholds thresholds;
  std::vector<Stage> stages;
  std::vector<Curve> curves;      // all-reduce, by node count, ascending
  // all_gather, reduce_scatter, all_to_all across the whole allocation
  // (2+ nodes): judged like a curve, not part of scaling or stragglers.
  std::vector<Curve> op_curves;
  std::vector<PairFigure> pairs;
  std::map<std::string, std::string> node_checks;  // node -> "" passed, else the reason
  std::map<std::string, std::string> lost_nodes;   // node -> when/what
  std::vector<StorageFigures> storage;
  TrainRun train;
  std::vector<std::string> notes; // bad input and run-wide notes (also in the summary)

  // Filled by Judge():
  std::vector<Figure> figures;
  std::vector<NodeRow> node_rows;
  std::vector<std::string> stragglers;
  std::string straggler_text;
  std::string scaling_text;       // which step of the curve broke, or that it held
  Verdict verdict = Verdict::kSkip;
  // The overall verdict's reasons, worst first, one line per finding: the
  // nodes that broke the same rule on the same path as one hostlist, with
  // the range of their figures ("fail: /p (all nodes): seq_write below
  // 10 MB/s per node on n[1-8]: 1.30 MB/s to 7.20 MB/s"); a finding of one
  // node is its figure's reason.
  std::vector<std::string> reasons;
};

// The figures, node rows and verdicts from the measurements (idempotent).
// Scaling: busbw at each node count k >= 4 against the 2-node figure
// (scaling_warn, scaling_fail); the first k that falls below is "the step
// that broke" (k/2 -> k). Any wrong element fails, whatever the bandwidth.
// Stragglers: the ring pairs through FindStragglers (collective/straggler.h).
// Storage: per path and node against the thresholds that are set (a path
// slow for every node is the path's fault, never a node's), each path's
// one-node figures against the best path's, and each node against the other
// nodes on the same path at the same time (storage_fraction: that names the
// node).
void Judge(Report* r);

// report.json (schema: accept/accept-report.schema.json), pretty, stable order.
std::string ReportJson(const Report& r);
// report.html: one self-contained file, inline CSS and SVG, no script, no
// network; every user-derived string (node names, paths) escaped.
std::string ReportHtml(const Report& r);
// The short text summary for the job output.
std::string SummaryText(const Report& r);

std::string HtmlEscape(const std::string& s);
std::string RateWords(double bytes_per_s);  // "1.23 GB/s", "850 MB/s"

}  // namespace preflight::accept
