// What the allocation's orchestration (allocation.cc) and its node-record
// comparisons (node_compare.cc) share. Private to collective/src.
#pragma once

#include <string>
#include <vector>

#include "preflight/collective_records.h"
#include "preflight/collective_run.h"
#include "preflight/config.h"

namespace preflight::collective::allocation_internal {

// srun's argv for one of the check's steps on `nodes`, `per_node` tasks each.
std::vector<std::string> Srun(const Config& cfg, const std::vector<std::string>& nodes, int per_node, bool pmix);
// Every line of `text`, prefixed with `head`.
std::string Prefixed(const std::string& head, const std::string& text);
// The comparisons' text (rails, versions; gemm at full) from the records
// the step carried (`carried`, null when it did not start); a kind it did
// not carry is read with its own step.
std::string NodeComparisons(const Config& cfg, const Allocation& a, const ParsedOutput* carried, Level level);

}  // namespace preflight::collective::allocation_internal
