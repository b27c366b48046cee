// The GPU-to-job mapping that dcgm-exporter reads, so its GPU metrics carry
// the Slurm job id (label hpc_job) with no site script. Written by the
// prolog, pruned by the epilog (prolog/node_phase.h), when the site sets
// `dcgm_job_map_dir`.
//
// The format, as dcgm-exporter reads it (NVIDIA/dcgm-exporter, flag
// --hpc-job-mapping-dir / env DCGM_HPC_JOB_MAPPING_DIR; reader:
// internal/pkg/transformation/hpc.go, hpcMapper.Process, getGPUFiles,
// readFile; described in its README, "Include HPC Job Information in
// Metric Labels"):
//  - one file per GPU directly in the folder, named by the GPU's id as DCGM
//    numbers it (its `gpu` label: "0", "1", ...); getGPUFiles keeps only
//    names that strconv.Atoi accepts, so any other name (our hidden
//    ".N.tmp.PID" files, the lock file) is ignored;
//  - the file's lines are the job ids using that GPU, one per line; each
//    line becomes one copy of every metric of that GPU with hpc_job=<line>
//    (bufio.Scanner: a final newline adds no empty job);
//  - the folder is read at every scrape, so a file must be whole whenever
//    it exists: written to a hidden name, fsync'd, renamed into place.
// The GPU ids are Slurm's (SLURM_JOB_GPUS: the GRES indices), which are
// DCGM's when gres.conf lists the GPUs in NVML order (AutoDetect=nvml does).
//
// Jobs that share a GPU (GRES sharding, OverSubscribe) are all listed in its
// file; each epilog removes only its own job id, and the file goes when its
// last job does. Concurrent prologs and epilogs of one node serialise on a
// root-only lock file in the folder (bounded wait).
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

// What a GPU file names: its job ids, blank lines dropped.
std::vector<std::string> ParseGpuJobFile(const std::string& text);
// The file's text for `jobs`: one per line, each ended by '\n'; "" for none.
std::string FormatGpuJobFile(const std::vector<std::string>& jobs);
// `jobs` once `job` runs on the GPU: appended unless already listed.
std::vector<std::string> WithJob(std::vector<std::string> jobs, const std::string& job);
// `jobs` once `job` has ended: every line that is exactly `job` removed,
// every other job's line kept.
std::vector<std::string> WithoutJob(std::vector<std::string> jobs, const std::string& job);
// A name dcgm-exporter reads as a GPU file: decimal digits only.
bool IsGpuJobFileName(const std::string& name);
// A Slurm job id as it may appear in a file: digits, at most 20 (a line
// break or a '/' in it would forge another job's line or another path).
Status CheckMapJobId(const std::string& job);

// What one update did, for the log.
struct GpuJobMapChange {
  std::vector<int> written;  // GPU files written (created or rewritten)
  std::vector<int> removed;  // GPU files removed (their last job ended)
};

// Prolog: lists `job` in the file of each of `gpus` in `dir`. `dir` is made
// if missing and must pass OpenPrivateDir (fileutil.h: root-owned, no
// symlink on the way, not writable by others); every file operation is
// relative to that checked descriptor and never follows a symlink. A GPU
// file that is not a regular file is left alone and reported. Errors carry
// the path and errno; files already written stay (the epilog removes them).
Expected<GpuJobMapChange> AddJobToGpuMap(const std::string& dir, const std::vector<int>& gpus, const std::string& job);
// Epilog: removes `job` from every GPU file in `dir` (whatever GPUs the
// epilog is told about: a job's id is found wherever the prolog put it),
// deleting files left with no job. A missing `dir` is no error (nothing
// was written). Same folder rules as AddJobToGpuMap.
Expected<GpuJobMapChange> RemoveJobFromGpuMap(const std::string& dir, const std::string& job);

}  // namespace preflight
