// gpu.dcgm: NVIDIA DCGM's diagnostic, where the site has DCGM (issue 13, item 5).
//
// DCGM's `dcgmi diag -r LEVEL -j` (1 quick: deployment and software checks,
// ~seconds; 2 medium: adds PCIe/memory/SM tests, ~minutes; 3-4 long stress)
// does the active GPU testing preflight does not reimplement. At the full
// level (prolog with --nccl-check=full, epilog after a failed job) preflight
// runs `dcgmi diag -r dcgm_level -j`; the health check (idle sweep) runs it at
// dcgm_health_level when that is not 0. Each result DCGM reports as FAIL
// becomes a fail naming the GPU, DCGM's category and test and its warning
// text; WARN a warn; PASS and SKIP add to the one summary result.
// No dcgmi on the node: "skipped: dcgmi not found", never pass. dcgmi that
// runs but says nothing parseable (nv-hostengine not running): a warn with
// its first line. No answer within dcgm_timeout: fail (a wedged GPU hangs
// the diagnostic).
//
// Tests: tests/fakes/fake_dcgmi.sh prints captured outputs from
// tests/fixtures/dcgm (see the README there for where each came from).
#pragma once

#include <string>
#include <vector>

#include "preflight/checks.h"

namespace preflight {

std::vector<CheckResult> CheckDcgm(const CheckEnv& env);

// Turn dcgmi's output (text before the JSON document is ignored) into
// results; `level` for the messages. Exposed for tests.
std::vector<CheckResult> ParseDcgmDiag(const std::string& output, int exit_code, unsigned level);

}  // namespace preflight
