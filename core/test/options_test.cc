#include "preflight/options.h"

#include <gtest/gtest.h>

#include <set>

namespace preflight {
namespace {

TEST(Level, ParsesNamesAndBareForms) {
  EXPECT_EQ(*ParseLevel("quick"), Level::kQuick);
  EXPECT_EQ(*ParseLevel("full"), Level::kFull);
  EXPECT_EQ(*ParseLevel("off"), Level::kOff);
  // Slurm: NULL locally, "" remotely, "(null)" in the prolog environment.
  EXPECT_EQ(*ParseLevel(nullptr), Level::kQuick);
  EXPECT_EQ(*ParseLevel(""), Level::kQuick);
  EXPECT_EQ(*ParseLevel("(null)"), Level::kQuick);
}

TEST(Level, RefusesEverythingElse) {
  for (const char* bad : {"bogus", "QUICK", "quick ", "quick,full", "1"}) {
    auto l = ParseLevel(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_NE(l.status().message().find("expected quick, full or off"), std::string::npos);
  }
}

TEST(UserOptions, TableIsConsistent) {
  std::set<int> vals;
  std::set<std::string> names;
  for (const auto& o : UserOptions()) {
    EXPECT_TRUE(vals.insert(o.val).second) << o.name;
    EXPECT_TRUE(names.insert(o.name).second);
    EXPECT_LE(std::string(o.name).size(), 75u);  // SPANK_OPTION_MAXLEN
    EXPECT_NE(o.apply, nullptr);
    EXPECT_EQ(std::string(o.env_name).rfind("PREFLIGHT_", 0), 0u);
  }
  EXPECT_TRUE(names.count("nccl-check"));
}

TEST(UserOptions, CallbacksAreIdempotent) {
  JobOptions o;
  const UserOption* nccl = nullptr;
  for (const auto& u : UserOptions())
    if (std::string(u.name) == "nccl-check") nccl = &u;
  ASSERT_NE(nccl, nullptr);
  EXPECT_FALSE(nccl->given(o));
  ASSERT_TRUE(nccl->apply("full", o).ok());
  ASSERT_TRUE(nccl->apply("full", o).ok());
  EXPECT_TRUE(nccl->given(o));
  EXPECT_EQ(nccl->value_text(o), "full");
  EXPECT_FALSE(nccl->apply("bogus", o).ok());
  EXPECT_EQ(nccl->value_text(o), "full");  // a refused value changes nothing
}

}  // namespace
}  // namespace preflight
