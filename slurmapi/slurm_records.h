// `preflight slurm job|steps|nodes ARG`: slurmctld's records as one line of
// JSON on stdout (schema in man preflight(8), SLURM RECORDS; parsed by
// core/slurmctl). Returns the exit code: 0, 1 Slurm error, 2 bad arguments.
#pragma once

#include <string>
#include <vector>

namespace preflight::admin {

int SlurmCmd(const std::vector<std::string>& args);
// `preflight slurm nodes ALL`: every node slurmctld knows (no node may be
// named ALL: it is Slurm's own word for every node in slurm.conf).
inline constexpr const char* kAllNodes = "ALL";

}  // namespace preflight::admin
