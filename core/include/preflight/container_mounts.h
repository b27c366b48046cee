// What a job's container needs from the host to see what preflight gave the
// job, and enroot's spelling of it: the lines `preflight container
// enroot-mounts` prints for the enroot hook (conf/enroot/hooks.d/, run by
// enroot for every container pyxis starts), appended to $ENROOT_MOUNTS.
//
// The mounts, each at the same path inside as outside, so that the values
// preflight puts in the task environment (NCCL_TOPO_FILE,
// PREFLIGHT_STAGE_DIR, PREFLIGHT_CKPT_LOCAL) mean the same in the
// container:
//   nccl_topo_file            read-only file   NCCL_TOPO_FILE
//   <state_dir>/jobs/<job>    read-only folder the job's records: its GPUs,
//                                              the prolog's summary, each
//                                              task's env choice, staging
//   <stage_dir>/jobs/<job>    read-only folder the staged datasets
//   <ckpt_dir>/<job>          read-write folder the node-local checkpoint tier
// Only what exists on the host is listed. Every mount is nosuid, nodev,
// private and nofail: the hook runs as the job's user and a bind mount
// gives the container nothing the user could not read (or, for the
// checkpoint folder, write) outside it.
//
// enroot's fstab(5) syntax (enroot's conf/hooks/extra/50-slurm-pmi.sh and
// its mounts.d): "SRC DST none x-create=file|dir,bind,ro|rw,...", DST
// relative to the container's root; a field may not hold a blank, so a
// path with a blank, a tab, a newline or a backslash is left out, with a
// note (fstab's octal escapes are not read by enroot's parser).
#pragma once

#include <string>
#include <vector>

namespace preflight {

struct ContainerMountInputs {
  std::string topo_file;     // nccl_topo_file, "" when not set
  std::string job_records;   // <state_dir>/jobs/<job>
  std::string stage_view;    // <stage_dir>/jobs/<job>, "" when staging is off
  std::string ckpt_local;    // <ckpt_dir>/<job>, "" when ckpt_dir is off
};

struct ContainerMount {
  std::string source;  // absolute host path; also the path inside
  bool dir = true;
  bool writable = false;
  std::string why;     // what it is for, in words
};

// The mounts of `in` whose source exists (stat, following links as the
// bind mount will) as the kind each must be; `notes` says what was left
// out and why (missing is not a note: a job without --stage has no view).
std::vector<ContainerMount> ContainerMounts(const ContainerMountInputs& in, std::vector<std::string>* notes);

// One enroot fstab line per mount: "SRC DST none x-create=KIND,bind,ro|rw,
// nosuid,nodev,private,nofail" with DST the source path.
std::vector<std::string> EnrootFstabLines(const std::vector<ContainerMount>& mounts);

}  // namespace preflight
