// The report's printf of one number (private to accept/src), for the
// words of report.cc and report_judge.cc.
#pragma once

#include <cstdio>
#include <string>

namespace preflight::accept {

inline std::string Fmt(const char* f, double a) {
  char b[64];
  std::snprintf(b, sizeof b, f, a);
  return b;
}

}  // namespace preflight::accept
