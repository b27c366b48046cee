// plugstack.conf read as slurmd reads it, for `preflight config check`:
// which SPANK plugins load, in which order, from which file and line; and
// whether preflight.so loads before pyxis (spank_pyxis.so), where pyxis's
// task_init, which copies the container image's environment over each
// task's with overwrite, would replace the per-task values preflight set.
//
// Slurm's rules, from src/common/spank.c (Slurm 24.11 and 25.11:
// _spank_stack_load, _spank_stack_process_line, _plugin_stack_parse_line,
// _spank_conf_include) and spank(8) CONFIGURATION:
//  - '#' starts a comment anywhere on a line; words split at blanks;
//  - the first word is `required`, `optional` or `include`, the second the
//    plugin (or the include's glob); other words are the plugin's arguments;
//    any other first word, or a missing second, makes the line invalid and
//    slurmd ignores it (logging "Invalid line. Ignoring.");
//  - `include PATTERN`: a relative pattern is relative to the folder of the
//    file it is in; glob(3) with no flags, so the matches load in sorted
//    (LC_COLLATE) order; no match is not an error;
//  - a missing plugstack.conf (or included file) is an empty one;
//  - a plugin path without '/' at its start is looked up in PluginDir;
//    plugins are told apart here by their file name.
// Slurm follows includes with no depth bound (a loop recurses until
// slurmd fails); this reader stops at kMaxPlugstackDepth and says so.
#pragma once

#include <string>
#include <vector>

namespace preflight {

inline constexpr int kMaxPlugstackDepth = 16;

struct PlugstackPlugin {
  std::string file;  // the plugstack file the line is in
  int line = 0;      // 1-based
  bool required = true;
  std::string path;  // as written: absolute, or a name looked up in PluginDir
  std::vector<std::string> args;
  std::string Name() const;  // the file name: "spank_pyxis.so"
};

struct PlugstackStack {
  std::vector<PlugstackPlugin> plugins;  // in load order
  // "FILE:LINE: what": lines slurmd ignores, files it cannot read, an
  // include too deep. Not the order finding (PlugstackOrderWarnings).
  std::vector<std::string> problems;
};

// One file's text, its includes followed from the file system (glob(3)).
// `file` names the text (its folder anchors relative includes); `depth` is
// how deep in includes it sits (0: plugstack.conf itself).
void ParsePlugstackText(const std::string& file, const std::string& text, int depth, PlugstackStack* out);
// The whole stack from `path` (a missing file: an empty stack).
PlugstackStack ReadPlugstack(const std::string& path);

// The plugstack.conf slurmd uses: slurm.conf's PlugStackConfig (text of
// the file at `slurm_conf_path`), else plugstack.conf beside slurm.conf
// (Slurm's get_extra_conf_path). A relative PlugStackConfig is taken as
// written (Slurm opens it from slurmd's working folder).
std::string PlugstackPath(const std::string& slurm_conf_path, const std::string& slurm_conf_text);

// The warning when preflight.so loads before spank_pyxis.so (one line,
// naming both files and lines and what to do); none when either is
// missing or the order is right.
std::vector<std::string> PlugstackOrderWarnings(const PlugstackStack& stack);

// `preflight config check`'s plugstack lines for the slurm.conf at
// `slurm_conf_path` (unreadable: a line saying so): the stack's problems,
// then the order warnings, each prefixed "warning: ", or one line saying
// the order is right. What the admin command prints.
std::vector<std::string> PlugstackNotes(const std::string& slurm_conf_path);

}  // namespace preflight
