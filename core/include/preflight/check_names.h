// The check-name vocabulary, in one place: the names a site's
// `check_<name> = on|warn|off` key may switch (every descriptor and result
// name the node checks produce: checks/src/registry.cc registers the
// descriptors, checks/test/severity_test.cc holds both to this list), the
// key spelling, and the most-specific-switch rule. Below the config table
// (config.cc builds one key per name from it) and the severity policy
// (severity.h), which both read it; nothing here knows a check's code.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace preflight {

// A site's switch for one check.
enum class CheckMode { kOn, kWarn, kOff };
const char* CheckModeName(CheckMode m);

// Names a `check_<name>` key may switch. A new check family adds its names
// here and its descriptor in checks/src/registry.cc.
const std::vector<std::string>& SwitchableChecks();
// "gpu.row_remap" -> "check_gpu_row_remap".
std::string CheckKeyName(const std::string& check);

// The mode for a check or result name: the most specific switch set, else on.
// *by (if given) gets the key that decided, e.g. "check_gpu".
CheckMode ModeFor(const std::map<std::string, CheckMode>& modes, const std::string& check,
                  std::string* by = nullptr);

}  // namespace preflight
