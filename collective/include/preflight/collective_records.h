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
#pragma once

#include <string>
#include <vector>

namespace preflight::collective {

inline constexpr const char* kRecordPrefix = "#record ";

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

struct ParsedOutput {
  std::vector<ResultRecord> records;
  std::string display;              // the output without its record lines
  std::vector<std::string> errors;  // record lines that did not parse (named, never skipped silently)
};
ParsedOutput ParseOutput(const std::string& output);

// The record of `kind` for exactly `nodes` (in order), or nullptr.
const ResultRecord* FindRecord(const ParsedOutput& p, const std::string& kind, const std::vector<std::string>& nodes);

}  // namespace preflight::collective
