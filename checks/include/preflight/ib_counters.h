// ib.counters: InfiniBand/RoCE port error counters as deltas between checks.
//
// Per port, the counters under /sys/class/infiniband/<hca>/ports/<n>/counters
// and .../hw_counters (mlx5) that the site thresholds (ib_counter_warn,
// ib_counter_fail: "name:max" lists) are read and compared with a base taken
// at the start of the current window (ib_counter_window, default 1h; 0: the
// previous check's values), kept per boot in <state_dir>/nodes/<node>.ibcounters
// (counters restart at boot; the first check of a boot is a baseline and
// blames nothing). A rise above a warn figure warns, above a fail figure
// fails (drains), naming HCA, port, counter, the rise and the figure. A
// counter that went down (cleared with perfquery -R) is re-baselined. The
// window makes the figures independent of how often checks run (a prolog
// per job start): a cable gaining a few errors per check still adds up.
//
// Thresholds are per window, like infiniband-diags' ibcheckerrs per run
// (which holds absolute counters against the same figures); the default
// warn figures are ibcheckerrs' defaults. link_downed (a flap) is ib.flapping's
// (ib_checks.cc), not repeated here.
//
// Seams: sysfs through FsRoot (tests: tests/fixtures/sysfs trees); the state
// file under state_dir. Self-contained: one descriptor body and its parser.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "preflight/checks.h"

namespace preflight {

std::vector<CheckResult> CheckIbCounters(const CheckEnv& env);

// One port's verdict from its previous and current counters (pure; tested
// directly). Counters absent from `prev` are baselined (no verdict).
struct CounterDelta {
  std::string name;
  uint64_t before = 0, now = 0;
  bool baseline = false;  // not in prev, or went down
  uint64_t rise() const { return baseline ? 0 : now - before; }
};
CheckResult JudgeIbCounters(const std::string& device, const std::vector<CounterDelta>& deltas,
                            const std::vector<std::pair<std::string, uint64_t>>& warn,
                            const std::vector<std::pair<std::string, uint64_t>>& fail, double interval_s,
                            bool windowed = false);

}  // namespace preflight
