#include "preflight/collective_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/report.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"

namespace preflight::collective {

// --- running steps as the user ----------------------------------------------------------
Expected<std::pair<int, std::string>> RunAs(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                            uid_t uid, gid_t gid, const std::vector<gid_t>& groups, unsigned timeout_ms) {
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.drop = true;  // only when root and uid != 0 (process.h)
  spec.as.uid = uid;
  spec.as.gid = gid;
  spec.as.groups = groups;
  auto c = Start(spec);
  if (!c) return c.status();
  ProcessResult r = Collect(*c, timeout_ms, 256u << 10);
  int code = r.exit_code;
  if (r.timed_out) {
    r.output += "preflight: " + argv[0] + ": killed after " + std::to_string(timeout_ms / 1000) + " s\n";
    code = 124;
  }
  return std::make_pair(code, r.output);
}

}  // namespace preflight::collective
