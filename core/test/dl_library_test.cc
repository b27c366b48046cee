// The one dlopen loop and the names it tries (dl_library.h), against real
// libraries of this machine (libc, libm) and names that cannot load.
#include "preflight/dl_library.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace preflight {
namespace {

using Names = std::vector<std::string>;

TEST(DlLibrary, TheDefaultFallsBackASiteValueDoesNot) {
  EXPECT_EQ(LibraryNames("liba.so.2", "liba.so.2", {"liba.so.1"}), (Names{"liba.so.2", "liba.so.1"}));
  EXPECT_EQ(LibraryNames("/opt/liba.so.2", "liba.so.2", {"liba.so.1"}), (Names{"/opt/liba.so.2"}));
  EXPECT_EQ(CudaRuntimeNames(kCudaRuntimeSoname), (Names{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}));
  EXPECT_EQ(CudaRuntimeNames("/usr/local/cuda/lib64/libcudart.so.12"), (Names{"/usr/local/cuda/lib64/libcudart.so.12"}));
}

TEST(DlLibrary, FirstThatLoadsAndEveryNameIsToldBeforeItsOpen) {
  Names told;
  auto got = OpenFirstLibrary({"/nonexistent/libnope.so.1", "libm.so.6", "libc.so.6"},
                              [&](const std::string& n) { told.push_back(n); });
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->name, "libm.so.6");
  EXPECT_NE(got->handle, nullptr);
  EXPECT_EQ(told, (Names{"/nonexistent/libnope.so.1", "libm.so.6"})) << "stops at the first that loads";
}

TEST(DlLibrary, SymbolsATableLacksAreNamedTogether) {
  auto m = OpenFirstLibrary({"libm.so.6"});
  ASSERT_TRUE(m.ok());
  double (*cosine)(double) = nullptr;
  int (*nope)(void) = nullptr;
  std::string missing;
  EXPECT_TRUE(ResolveSymbol(m->handle, "cos", cosine, &missing));
  EXPECT_FALSE(ResolveSymbol(m->handle, "preflight_no_such_a", nope, &missing));
  EXPECT_FALSE(ResolveSymbol(m->handle, "preflight_no_such_b", nope, &missing));
  EXPECT_FALSE(ResolveSymbol(m->handle, "preflight_optional", nope, nullptr));
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.0), 1.0);
  EXPECT_EQ(missing, "preflight_no_such_a, preflight_no_such_b");
}

TEST(DlLibrary, NoneLoadsNamesEveryAttempt) {
  auto got = OpenFirstLibrary({"/nonexistent/a/libx.so.13", "libpreflight-no-such.so.12", ""});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kUnavailable);
  const std::string m = got.status().message();
  EXPECT_NE(m.find("/nonexistent/a/libx.so.13"), std::string::npos) << m;
  EXPECT_NE(m.find("libpreflight-no-such.so.12"), std::string::npos) << m;
  EXPECT_NE(m.find("; "), std::string::npos) << m;
  EXPECT_FALSE(OpenFirstLibrary({}).ok());
}

}  // namespace
}  // namespace preflight
