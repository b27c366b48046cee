// What the nodes and slurmctld say about the fleet: `preflight fleet`, the
// nodes' version records side by side with the odd node named; `preflight
// reasons`, preflight's drains parsed into their parts; `preflight slurm`,
// slurmctld's records as JSON (slurmapi/).
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

int FleetCmd(const std::vector<std::string>& args, const CommonCli& cli);
int ReasonsCmd(const std::vector<std::string>& args, const CommonCli& cli);
int SlurmRecordsCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
