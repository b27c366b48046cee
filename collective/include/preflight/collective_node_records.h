// The nodes' own records (rails, versions: state_paths.h; gemm: gemm_record.h) carried by the
// collective step itself, so a passing --nccl-check is one job step, not
// three (issue 33). Local rank 0 of each node reads its node's records;
// rank 0 prints them all, in node order, as lines the caller parses
// (collective_records.h owns the line format):
//
//   #node-record rails n1 {"node":"n1",...}
//   #node-record versions n2 -            (no record on n2)
//
// As before, the step runs as the job's user: what it reports only informs
// the job's output and decides nothing about a node.
#pragma once

#include <string>

#include "preflight/collective_bootstrap.h"
#include "preflight/status.h"

namespace preflight::collective {

// The records a step carries: name (the word in the line) and file suffix.
struct NodeRecordKind {
  const char* name;
  const char* suffix;
};
const std::vector<NodeRecordKind>& CarriedNodeRecords();  // rails, versions, gemm

// Collective: every rank calls it (one AllGather for all kinds). `nodes_dir` is
// <state_dir>/nodes on this node; each record is read up to 64 KiB (a
// larger one is reported missing, saying so). Returns the lines rank 0
// prints (empty on other ranks).
Expected<std::string> ShareNodeRecords(Bootstrap& b, const std::string& nodes_dir);

}  // namespace preflight::collective
