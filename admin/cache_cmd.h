// `preflight cache ls|gc|rm KEY|SOURCE [node=N]`: this node's --stage cache
// listed, trimmed or a dataset removed; `preflight state gc [--dry-run]
// [node=N]`: state_dir/jobs pruned as the epilog does after every job.
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

// The options of `preflight state gc` (--dry-run), bound to its state here.
void AddStateOptions(po::options_description& desc);

int CacheCmd(const std::vector<std::string>& args, const CommonCli& cli);
int StateCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
