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
// are refused.
Status ResolveStageSources(std::vector<StageSource>& sources, const std::string& cwd);

// "imagenet-val" -> "PREFLIGHT_STAGE_IMAGENET_VAL".
std::string StageVarName(const std::string& name);

// True if `path` has an empty-safe `..` component.
bool HasDotDot(const std::string& path);

}  // namespace preflight
