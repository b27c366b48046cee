// One log line format for every preflight component:
//   preflight: <phase>: <what>: <cause>
// The sink is stderr by default; the SPANK plugin installs Slurm's logger.
#pragma once

#include <string>

namespace preflight {

enum class LogLevel { kError, kInfo, kDebug };
using LogSink = void (*)(LogLevel level, const std::string& line);

void SetLogSink(LogSink sink);
void Log(LogLevel level, const std::string& phase, const std::string& what, const std::string& cause = "");
std::string FormatLogLine(const std::string& phase, const std::string& what, const std::string& cause);

}  // namespace preflight
