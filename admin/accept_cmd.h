// `preflight accept`: the cluster acceptance run inside an allocation
// (accept/ decides, accept_run.h; this shell reads the allocation, writes
// report.json and report.html and prints the summary), and the hidden
// `preflight accept --storage-worker` each node runs for the storage stage
// (accept_storage_worker.h).
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

// The options of `preflight accept`, bound to its state here: `visible` those
// its help lists, `hidden` the storage worker's internal ones.
void AddAcceptOptions(po::options_description& visible, po::options_description& hidden);

int AcceptCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
