#include "preflight/topo.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {
TEST(Topo, Placeholder) { EXPECT_STREQ(PathClassName(PathClass::kPIX), "PIX"); }
}  // namespace
}  // namespace preflight
