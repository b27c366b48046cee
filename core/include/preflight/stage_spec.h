// Dataset staging: the job option's grammar and its submit-time checks.
//
//   --stage=SRC[:NAME][,SRC[:NAME]...]     SRC a directory or a file
//   --stage=@LIST                          LIST: one SRC[:NAME] a line (# comments)
//
// NAME defaults to SRC's last component (characters outside [A-Za-z0-9._-]
// become '_'). SRC is split from NAME at the last ':' only when what follows
// contains no '/', so paths with ':' still work. A path with a `..`
// component is refused. The job sees $PREFLIGHT_STAGE_DIR/NAME and
// $PREFLIGHT_STAGE_<NAME> (upper case, non-alphanumerics as '_').
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// Bounds on what a user can hand to --stage (spank-preflight(8), LIMITS).
// The canonical text travels to the prolog, the epilog and every task as
// one environment variable (SPANK_PREFLIGHT_STAGE / SLURM_SPANK_...):
// Slurm passes a longer one on with only a warning, and then execve of the
// prolog fails (E2BIG, MAX_ARG_STRLEN = 128 KiB) and slurmd drains the node
// for the user's option. 16 KiB keeps every job-control variable together
// far below that; a longer list is refused at submission.
inline constexpr size_t kMaxStageSpecBytes = 16 * 1024;  // the encoded value
inline constexpr size_t kMaxStageSources = 256;          // datasets per job
inline constexpr size_t kMaxStageListFileBytes = 1 << 20;  // an @LIST file
// A dataset's deepest entry, relative to its root: the copy creates it with
// one mkdirat/openat relative to the copy's root, which the kernel bounds
// at PATH_MAX (4096) bytes. Deeper trees are the user's to flatten.
inline constexpr size_t kMaxStageRelPathBytes = 4000;

struct StageSource {
  std::string path;   // absolute after ResolveStageSources (may be relative before)
  std::string name;   // view entry name
  bool list = false;  // "@LIST": path is a list file, expanded at submit
};

// Syntax only (no filesystem access): runs in every SPANK context.
Expected<std::vector<StageSource>> ParseStageSpec(const std::string& text);

// The canonical text handed to the prolog (SPANK_PREFLIGHT_STAGE):
// "PATH:NAME,PATH:NAME".
std::string StageSpecText(const std::vector<StageSource>& sources);

// At submission, as the submitting user (sbatch/srun run as the user):
// expand list files, make paths absolute against `cwd`, and require each
// source to exist and be readable by the caller's real uid (directories
// also searchable). Errors name the path and the cause. Duplicate names
// are refused; so are a list file that is not a regular file (a FIFO would
// block sbatch) or is larger than kMaxStageListFileBytes, more than
// kMaxStageSources datasets, an encoded value over kMaxStageSpecBytes, and
// sources on a kernel pseudo filesystem (/proc, /sys, ...), whose files
// change size while read.
Status ResolveStageSources(std::vector<StageSource>& sources, const std::string& cwd);

// "imagenet-val" -> "PREFLIGHT_STAGE_IMAGENET_VAL".
std::string StageVarName(const std::string& name);

// Whether the filesystem holding `fd` is a kernel pseudo filesystem
// (proc, sysfs, debugfs, tracefs, cgroup, securityfs, ...): its files
// report sizes that do not match what a read returns. Sets *what to its
// name when true.
bool OnPseudoFilesystem(int fd, std::string* what);

// Whether the file system holding `fd` is reached over a network or
// through FUSE (nfs, lustre, gpfs, fuse, cifs/smb, ceph, beegfs, 9p, afs,
// orangefs, panfs, coda): every lookup, stat, open and read there is a
// round trip, so the stage copy engine and its warm check keep many
// operations in flight (stage_remote_workers) instead of one per CPU.
// Sets *what to its name when true.
bool OnNetworkFilesystem(int fd, std::string* what);

// True if `path` has an empty-safe `..` component.
bool HasDotDot(const std::string& path);

}  // namespace preflight
