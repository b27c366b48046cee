// Result records: how preflight-nccl tells a caller what it decided.
//
// With --records the tool prints, besides the table a person reads, one
// line per verdict:
//
//   #record {"tool":"preflight-nccl","kind":"pair","nodes":["n1","n2"],"verdict":"pass",...}
//
// Callers (the allocation orchestration's pair step, the plugin's root-run
// intra-node check) parse those lines as JSON and show the rest of the
// output; nothing decides by searching the human text. A record printed by
// a user-run step is only as trustworthy as that step (see preflight-nccl(1)
// SECURITY): the pair verdicts are the user's own figures.
//
// With --node-records the allocation step also carries each node's own
// records (collective_node_records.h), one line per record line:
//
//   #node-record rails n1 {"node":"n1",...}
//   #node-record versions n2 -           (none on n2; a reason may follow)
#pragma once

#include <map>
#include <string>
#include <vector>

namespace preflight::collective {

inline constexpr const char* kRecordPrefix = "#record ";
inline constexpr const char* kNodeRecordPrefix = "#node-record ";
// The lines a rank prints when its watchdog ends it at nccl_timeout: before
// the PMIx bootstrap completed (a fence Slurm never completed: the launch
// said nothing about the nodes, and a caller may launch it again, up to
// kBootstrapLaunches in all), or after it (a dead peer's socket, a cut
// link: a finding).
inline constexpr const char* kNoBootstrapLine = "# FAILED: preflight-nccl: no PMIx bootstrap within nccl_timeout";
// Launches of one step whose bootstrap Slurm never completed: CI saw Slurm
// 22.05's stepd refuse a peer's direct connection on two launches in a row
// (stop 48), so three.
inline constexpr int kBootstrapLaunches = 3;
inline constexpr const char* kNoVerdictLine = "# FAILED: preflight-nccl: no verdict within nccl_timeout";

struct ResultRecord {
  std::string kind;                // "allocation", "intra-node", "pair"
  std::vector<std::string> nodes;  // the nodes measured
  bool pass = false;
  double busbw = 0;                // bytes/s at the judged size (0: none measured)
  double threshold = 0;            // bytes/s (0: none)
  std::string message;             // "busbw 4.98 MB/s at 1M < 20 MB/s", or why it could not run
  std::string drain_reason;        // intra-node failures: the reason for `scontrol update ... Reason=`
  std::vector<double> samples;     // pairs, intra-node groups: every measurement's busbw (busbw is the best of them)
  // The worst of its samples when it was measured twice or more (the
  // straggler rule's median takes it, straggler.h); 0 when measured once.
  double WorseSample() const;
};

// One "#record {...}\n" line (compact JSON, one line whatever the strings hold).
std::string RecordLine(const ResultRecord& r);

// The "#node-record" lines for one node's record of `kind` (its text: the
// file's JSON lines, or "-" and a reason when it has none).
std::string NodeRecordLines(const std::string& kind, const std::string& node, const std::string& text);

// One kind of node record across the nodes: the JSON lines, and the nodes
// without one ("n2,n3").
struct NodeRecordSet {
  std::vector<std::string> lines;
  std::string missing;
};

struct ParsedOutput {
  std::vector<ResultRecord> records;
  std::map<std::string, NodeRecordSet> node_records;  // by kind ("rails", "versions")
  std::string display;              // the output without its record lines
  std::vector<std::string> errors;  // record lines that did not parse (named, never skipped silently)
};
ParsedOutput ParseOutput(const std::string& output);

// The record of `kind` for exactly `nodes` (in order), or nullptr.
const ResultRecord* FindRecord(const ParsedOutput& p, const std::string& kind, const std::vector<std::string>& nodes);

}  // namespace preflight::collective
