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

// What the plugin exported comes back through one walk of the table: every
// option's value_text read back by its apply gives the same choice.
TEST(UserOptions, ReadBackFromTheJobEnvironment) {
  JobOptions given;
  ASSERT_TRUE(UserOptions()[0].apply("full", given).ok());
  ASSERT_TRUE(UserOptions()[1].apply("show", given).ok());
  std::map<std::string, std::string> env;
  for (const auto& o : UserOptions())
    if (o.given(given)) env[std::string("SPANK_") + o.env_name] = o.value_text(given);
  env["SLURM_SPANK_PREFLIGHT_NCCL_CHECK"] = "off";  // the prolog's SPANK_ copy wins
  OptionsFromEnv r = JobOptionsFromEnv(env);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.opts.nccl_check_given);
  EXPECT_EQ(r.opts.nccl_check, Level::kFull);
  EXPECT_TRUE(r.opts.env_given);
  EXPECT_EQ(r.opts.env, EnvMode::kShow);
  EXPECT_FALSE(r.opts.stage_given);
  // The batch environment's copy, and a bare option ("(null)" in the prolog).
  OptionsFromEnv b = JobOptionsFromEnv({{"SLURM_SPANK_PREFLIGHT_NCCL_CHECK", "(null)"}});
  EXPECT_EQ(b.opts.nccl_check, Level::kQuick);
  // A bad value is kept per option, naming the variable and its text.
  OptionsFromEnv bad = JobOptionsFromEnv({{"SPANK_PREFLIGHT_NCCL_CHECK", "fast"}, {"SPANK_PREFLIGHT_ENV", "on"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  Status e = bad.ErrorFor("PREFLIGHT_NCCL_CHECK");
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.message().find("SPANK_PREFLIGHT_NCCL_CHECK='fast'"), std::string::npos) << e.message();
  EXPECT_TRUE(bad.ErrorFor("PREFLIGHT_ENV").ok());
  EXPECT_TRUE(bad.opts.env_given);
}

}  // namespace
}  // namespace preflight
