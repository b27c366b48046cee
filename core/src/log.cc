#include "preflight/log.h"

#include <cstdio>

namespace preflight {
namespace {

void StderrSink(LogLevel, const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }
LogSink g_sink = StderrSink;

}  // namespace

void SetLogSink(LogSink sink) { g_sink = sink ? sink : StderrSink; }

std::string FormatLogLine(const std::string& phase, const std::string& what, const std::string& cause) {
  std::string line = "preflight: " + phase + ": " + what;
  if (!cause.empty()) line += ": " + cause;
  return line;
}

void Log(LogLevel level, const std::string& phase, const std::string& what, const std::string& cause) {
  g_sink(level, FormatLogLine(phase, what, cause));
}

}  // namespace preflight
