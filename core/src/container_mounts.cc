#include "preflight/container_mounts.h"

#include <sys/stat.h>

namespace preflight {
namespace {

// A field of enroot's fstab: no blank, tab, newline, backslash or control byte.
bool FstabSafe(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  for (unsigned char c : path)
    if (c <= ' ' || c == '\\' || c == '$' || c == 0x7f) return false;
  return true;
}

}  // namespace

std::vector<ContainerMount> ContainerMounts(const ContainerMountInputs& in, std::vector<std::string>* notes) {
  struct Want {
    const std::string* path;
    bool dir, writable;
    const char* why;
  };
  const Want wants[] = {
      {&in.topo_file, false, false, "NCCL_TOPO_FILE"},
      {&in.job_records, true, false, "the job's preflight records"},
      {&in.stage_view, true, false, "the staged datasets (PREFLIGHT_STAGE_DIR)"},
      {&in.ckpt_local, true, true, "the node-local checkpoint folder (PREFLIGHT_CKPT_LOCAL)"},
  };
  std::vector<ContainerMount> out;
  for (const Want& w : wants) {
    const std::string& p = *w.path;
    if (p.empty()) continue;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) continue;
    if (w.dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
      if (notes) notes->push_back(p + ": not a " + (w.dir ? "folder" : "regular file") + ", not mounted (" + w.why + ")");
      continue;
    }
    if (!FstabSafe(p)) {
      if (notes) notes->push_back("a path with a blank, control byte or backslash cannot be written in enroot's fstab, not mounted (" +
                                  std::string(w.why) + ")");
      continue;
    }
    out.push_back({p, w.dir, w.writable, w.why});
  }
  return out;
}

std::vector<std::string> EnrootFstabLines(const std::vector<ContainerMount>& mounts) {
  std::vector<std::string> lines;
  for (const auto& m : mounts)
    lines.push_back(m.source + " " + m.source + " none x-create=" + (m.dir ? "dir" : "file") + ",bind," +
                    (m.writable ? "rw" : "ro") + ",nosuid,nodev,private,nofail");
  return lines;
}

}  // namespace preflight
