// `preflight slurm job|steps|nodes ARG`: slurmctld's records as one line of
// JSON on stdout (schema in man preflight(8), SLURM RECORDS; parsed by
// core/slurmctl). Returns the exit code: 0, 1 Slurm error, 2 bad arguments.
#pragma once

#include <string>
#include <vector>

namespace preflight::admin {

int SlurmCmd(const std::vector<std::string>& args);

}  // namespace preflight::admin
