// `preflight config check|show|keys [NODE]`: the site config validated (with
// notes on slurm.conf's PrologFlags and the SPANK stack), printed, or its keys
// listed; `preflight options`: the job options the SPANK plugin adds.
#pragma once

#include <string>
#include <vector>

#include "preflight/cli.h"

namespace preflight {

int ConfigCmd(const std::vector<std::string>& args, const CommonCli& cli);
int OptionsCmd(const std::vector<std::string>& args, const CommonCli& cli);

}  // namespace preflight
