// Slurm's hostlist syntax, expanded without libslurm (the wrapper runs in
// the job, where only the environment's SLURM_JOB_NODELIST is at hand) and
// compressed for the words of a report, and the one check of a node name
// before it becomes part of a path.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// The most names one hostlist may expand to, counted over the whole list
// (the product of its bracket groups, summed over its comma items) before
// anything is expanded. A Slurm cluster's largest job list is far below it;
// "n[1-9]n[1-9]...n[1-9]" (12 groups, 282 billion names) is refused at once.
inline constexpr size_t kMaxHostlistNames = 65536;
// The longest hostlist text taken (characters).
inline constexpr size_t kMaxHostlistLength = 65536;
// The longest node name taken where one becomes a path component.
inline constexpr size_t kMaxNodeNameLength = 64;

// "n[1-3,7],gpu[01-02]" -> n1 n2 n3 n7 gpu01 gpu02. Refused with the reason:
// unbalanced or nested brackets, an empty or reversed range, a non-number
// in a range, more than kMaxHostlistNames names, or a name that
// ValidNodeName refuses.
Expected<std::vector<std::string>> ExpandHostlist(const std::string& s);

// n1 n2 n3 n7 gpu08 gpu09 gpu10 -> "gpu[08-10],n[1-3,7]": the names as one
// hostlist that ExpandHostlist turns back into them (sorted by prefix, then
// number; duplicates once). A name's last run of digits is its number;
// names that differ only there share brackets, a zero-padded number keeps
// its width (gpu08..gpu10; n1..n10 is n[1-10]). A name without digits, or
// with a number longer than 18 digits, is kept as it is. "" for none.
std::string CompressHostlist(const std::vector<std::string>& names);

// A node name as it may appear in a path under state_dir or in a config
// value's %n: 1..kMaxNodeNameLength characters from Slurm's node-name set
// (letters, digits, '-', '_', '.'), not starting with '.' (so never "." or
// ".."). The error names the name (non-printable bytes escaped) and why.
Status ValidNodeName(const std::string& name);

}  // namespace preflight
