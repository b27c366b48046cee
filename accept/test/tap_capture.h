// The tap's stdout while it runs (train_tap_test.cc, train_trip_test.cc):
// RunTrainTap with stdout on a file, read back.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "preflight/accept_train.h"
#include "preflight_test/temp_dir.h"

namespace preflight::accept::testing {

// The tap's stdout while it runs `a`; its return code in *rc.
inline std::string CaptureTap(const TrainTapArgs& a, int* rc = nullptr) {
  preflight_test::TempDir t("tap");
  std::string out = t.path() + "/out";
  std::fflush(stdout);
  int saved = ::dup(1);
  FILE* f = std::fopen(out.c_str(), "w");
  ::dup2(::fileno(f), 1);
  int r = RunTrainTap(a);
  if (rc) *rc = r;
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  std::fclose(f);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace preflight::accept::testing
