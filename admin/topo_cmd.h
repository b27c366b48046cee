// `preflight topo`: the GPU-NIC table and the environment a task would get
// (hwloc loaded afresh, or another node's --xml), and `preflight topo
// --compare [HOSTLIST|FILE]...`: the nodes' rails records compared, the odd node named.
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

// The options of `preflight topo`, bound to its state here; parsed with the
// common ones.
void AddTopoOptions(po::options_description& desc);
// After the parse, for every command: notes whether --gpus was given and
// refuses an out-of-range --nodes (logged; false).
bool TopoOptionsParsed(const po::variables_map& vm);

int TopoCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
