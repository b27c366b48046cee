// Test tool (not installed): judge the fixture report (fixture_report.h) and
// write DIR/report.json and DIR/report.html, for the golden HTML test
// (tests/golden/accept_html.sh) that opens it in headless chromium.
//   accept_render_fixture DIR [fast|slow|wide]
#include <cstdio>
#include <string>

#include "fixture_report.h"
#include "preflight/fileutil.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: accept_render_fixture DIR [fast|slow|wide]\n");
    return 2;
  }
  std::string dir = argv[1];
  bool fast = argc > 2 && std::string(argv[2]) == "fast";
  bool wide = argc > 2 && std::string(argv[2]) == "wide";
  auto r = wide ? preflight::accept::testing::WideReport() : preflight::accept::testing::FixtureReport(fast);
  preflight::accept::Judge(&r);
  auto a = preflight::WriteFileAtomic(dir + "/report.json", preflight::accept::ReportJson(r));
  auto b = preflight::WriteFileAtomic(dir + "/report.html", preflight::accept::ReportHtml(r));
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "%s %s\n", a.message().c_str(), b.message().c_str());
    return 1;
  }
  return 0;
}
