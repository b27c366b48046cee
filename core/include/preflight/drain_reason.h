// The one grammar of every drain reason preflight writes to slurmctld, its
// one writer (FormatReason) and its one reader (ParseReason). Stable: fleet
// tools (NVIDIA NVSentinel's Slurm drain monitor, soperator, sinfo -R
// greps) match it by its fixed prefix, and preflight's own health check,
// preflight-run and `preflight reasons` read it back. preflight(7), DRAIN
// REASONS, has the grammar with examples.
//
//   reason  = "preflight[" owner "] " check [" " device] ": " finding [figure] [more]
//   owner   = "node" | "user" | "config"       whose fault (fault.h)
//   check   = 1*(ALPHA / DIGIT / "." / "_" / "-")   e.g. gpu.ecc, nccl.intra
//   device  = text without ": "                e.g. "GPU3 0000:1b:00.0"
//   finding = one line of text
//   figure  = " [got " VALUE [", want " THRESHOLD] "]"   |   " [want " THRESHOLD "]"
//             the named check's measured value and the bound it broke
//   more    = "; also: " text                  the other checks that failed in the same run
//
//   preflight[node] gpu.ecc GPU3 0000:1b:00.0: uncorrected ECC errors 12 > 0 [got 12, want <= 0]
//   preflight[config] config: /etc/preflight/preflight.conf:7: key 'stage_peer_port': bad value '70000'
//
// "preflight[" is the fixed prefix of every reason preflight writes;
// "preflight[node]" the prefix of those a hardware fault caused. At most
// kReasonMax bytes (the rule preflight has always kept for one line in
// sinfo -R; Slurm itself stores longer); only the text is cut, `more`
// first (to "..." or to nothing), then the finding (ending "..."), never
// the prefix, check, device or figure. Every part may hold a user's bytes
// (a dataset path, a file name): the reason is printable UTF-8 whatever
// they are (text.h PrintableText: controls, ESC and invalid bytes written
// as "\xNN"), and every cut falls on a character boundary, so every reader
// (sinfo, `preflight slurm`'s JSON, slurmrestd, fleet tools) can take it.
//
// Reasons written before this grammar ("preflight: gpu.ecc GPU3: ...",
// "preflight: nccl intra-node n2 (...): ...", "preflight: config ...",
// "preflight: stage ...") are still read, so a node drained by an older
// version is still recognised and returned to service.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "preflight/fault.h"

namespace preflight {

inline constexpr const char* kReasonPrefix = "preflight[";
inline constexpr size_t kReasonMax = 200;
// The prefix of every pre-grammar reason (read, never written).
inline constexpr const char* kLegacyReasonPrefix = "preflight: ";

// Check names of the reasons not built from a node check's CheckResult.
namespace reason_check {
inline constexpr const char* kConfig = "config";            // the site config does not load
inline constexpr const char* kStage = "stage";              // --stage on the node (stage_job.h)
inline constexpr const char* kCkpt = "ckpt";                // the job's checkpoint folder (node_ckpt.h)
inline constexpr const char* kNcclIntra = "nccl.intra";     // a node alone below nccl_min_intra_busbw
inline constexpr const char* kNcclInter = "nccl.inter";     // the node in two failed ring pairs
inline constexpr const char* kNcclStraggler = "nccl.straggler";  // the node slowing the allocation's collective
}  // namespace reason_check

struct DrainReason {
  FaultOwner owner = FaultOwner::kNode;  // kNone is written as "node"
  std::string check;      // required; spaces and ':' are replaced by '_'
  std::string device;     // "" when the finding is the node's as a whole
  std::string finding;    // newlines become spaces
  std::string figure;     // the measured value, "" when none
  std::string threshold;  // the bound it was held against, "" when none
  std::string more;       // the other failed checks, "" when none
  bool legacy = false;    // ParseReason: read from a pre-grammar reason
};

// The reason text, at most `max` characters. Bounds on the fixed parts, so
// that they fit in kReasonMax with room for the finding: check 20
// characters, device 60, value 32, threshold 48 (longer ones are cut: the
// device loses its middle, "/srv/.../nodes/n1/scratch", the value and the
// threshold end "...").
// A `max` below kReasonMax may cut the whole text.
std::string FormatReason(const DrainReason& r, size_t max = kReasonMax);

// The parts of a reason preflight wrote (this grammar or a legacy one);
// nullopt for any other reason (an admin's, Slurm's "Prolog error", "Not
// responding"). A cut finding keeps its "...".
std::optional<DrainReason> ParseReason(const std::string& text);

// Whether preflight wrote `text` (ParseReason would return a value).
bool IsPreflightReason(const std::string& text);

// Whether the reason is one of the collective check's (nccl.*), which the
// allocation check reads back to tell which nodes its root step drained.
bool IsNcclReason(const DrainReason& r);

}  // namespace preflight
