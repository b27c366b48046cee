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

// Issue 29: a bare --preflight-env meant show, while its usage and the man
// page say on is the default.
TEST(EnvMode, ParsesNamesAndBareFormIsOn) {
  EXPECT_EQ(*ParseEnvMode("on"), EnvMode::kOn);
  EXPECT_EQ(*ParseEnvMode("show"), EnvMode::kShow);
  EXPECT_EQ(*ParseEnvMode("off"), EnvMode::kOff);
  EXPECT_EQ(*ParseEnvMode(nullptr), EnvMode::kOn);
  EXPECT_EQ(*ParseEnvMode(""), EnvMode::kOn);
  EXPECT_EQ(*ParseEnvMode("(null)"), EnvMode::kOn);
  auto bad = ParseEnvMode("maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected on, show or off"), std::string::npos);
  // The bare option travels to the job as "on", the text its usage names.
  for (const auto& o : UserOptions()) {
    if (std::string(o.name) != "preflight-env") continue;
    EXPECT_NE(std::string(o.usage).find("on (default)"), std::string::npos);
    JobOptions j;
    ASSERT_TRUE(o.apply(nullptr, j).ok());
    EXPECT_TRUE(o.given(j));
    EXPECT_EQ(o.value_text(j), "on");
  }
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

// --stage requires a value, so an empty variable is no request (the prolog
// did not stage for it before JobContext carried the options either), while
// an empty --nccl-check is still the bare option.
TEST(UserOptions, EmptyVariableOfARequiredValueIsNoRequest) {
  OptionsFromEnv r = JobOptionsFromEnv({{"SPANK_PREFLIGHT_STAGE", ""}, {"SPANK_PREFLIGHT_NCCL_CHECK", ""}});
  EXPECT_TRUE(r.errors.empty());
  EXPECT_FALSE(r.opts.stage_given);
  EXPECT_TRUE(r.opts.nccl_check_given);
  EXPECT_EQ(r.opts.nccl_check, Level::kQuick);
  OptionsFromEnv bad = JobOptionsFromEnv({{"SPANK_PREFLIGHT_STAGE", ",,"}});
  EXPECT_FALSE(bad.ErrorFor("PREFLIGHT_STAGE").ok());
}

// The task asks only whether the variable is there (its value is the
// user's to forge), under either prefix.
TEST(UserOptions, PresenceInTheEnvironmentWithoutParsing) {
  EXPECT_TRUE(JobOptionInEnv({{"SLURM_SPANK_PREFLIGHT_STAGE", "not a spec,,"}}, "PREFLIGHT_STAGE"));
  EXPECT_TRUE(JobOptionInEnv({{"SPANK_PREFLIGHT_STAGE", ""}}, "PREFLIGHT_STAGE"));
  EXPECT_FALSE(JobOptionInEnv({{"PREFLIGHT_STAGE", "/d"}, {"SLURM_SPANK_PREFLIGHT_ENV", "on"}}, "PREFLIGHT_STAGE"));
}

}  // namespace
}  // namespace preflight

namespace preflight {
namespace {

const UserOption& Opt(const std::string& name) {
  for (const auto& o : UserOptions())
    if (name == o.name) return o;
  ADD_FAILURE() << "no option " << name;
  return UserOptions().front();
}

TEST(SubmittedValue, EmptyValueRefusedBareTaken) {
  // Issue #19: '--nccl-check=' and '--preflight-env=' were taken as the bare option.
  Status e = CheckSubmittedValue(Opt("nccl-check"), "");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "empty value after '--nccl-check=' (give --nccl-check alone for its default)");
  EXPECT_FALSE(CheckSubmittedValue(Opt("preflight-env"), "").ok());
  EXPECT_FALSE(CheckSubmittedValue(Opt("stage"), "").ok());
  EXPECT_TRUE(CheckSubmittedValue(Opt("nccl-check"), nullptr).ok());  // the bare option, locally
  EXPECT_TRUE(CheckSubmittedValue(Opt("nccl-check"), "full").ok());
}

TEST(SubmittedValue, EveryOptionHasALengthBound) {
  for (const auto& o : UserOptions()) {
    ASSERT_GT(o.max_value_bytes, 0u) << o.name;
    std::string at(o.max_value_bytes, 'a'), over(o.max_value_bytes + 1, 'a');
    EXPECT_TRUE(CheckSubmittedValue(o, at.c_str()).ok()) << o.name;
    Status s = CheckSubmittedValue(o, over.c_str());
    ASSERT_FALSE(s.ok()) << o.name;
    EXPECT_NE(s.message().find("longer than the limit of " + std::to_string(o.max_value_bytes) + " bytes"),
              std::string::npos)
        << s.message();
  }
}

TEST(Submission, NcclCheckOnlyFromSbatchAndNotInAHetJob) {
  JobOptions o;
  EXPECT_TRUE(CheckSubmission(o, "srun", 0).ok());  // not asked: nothing to refuse
  o.nccl_check_given = true;
  o.nccl_check = Level::kFull;
  EXPECT_TRUE(CheckSubmission(o, "sbatch", 0).ok());
  // Issue #19: srun --nccl-check=full inside salloc was accepted and ran nothing.
  SubmissionCheck srun = CheckSubmission(o, "srun", 0);
  ASSERT_FALSE(srun.ok());
  EXPECT_STREQ(srun.option, "nccl-check");
  EXPECT_NE(srun.why.message().find("srun would run no check"), std::string::npos) << srun.why.message();
  EXPECT_FALSE(CheckSubmission(o, "salloc", 0).ok());
  // A heterogeneous job's second component: refused at submission.
  SubmissionCheck het = CheckSubmission(o, "sbatch", 1);
  ASSERT_FALSE(het.ok());
  EXPECT_STREQ(het.option, "nccl-check");
  EXPECT_EQ(het.why.message().find("a heterogeneous job cannot be checked"), 0u) << het.why.message();
  o.nccl_check = Level::kOff;  // --nccl-check=off asks for nothing anywhere
  EXPECT_TRUE(CheckSubmission(o, "srun", 1).ok());
}

// Issue 29: --stage in a heterogeneous job was accepted, the prolog staged
// one component's nodes, and the steps on the others failed.
TEST(Submission, StageRefusedInAHetJob) {
  JobOptions o;
  ASSERT_TRUE(Opt("stage").apply("/data/a", o).ok());
  for (const char* program : {"sbatch", "salloc", "srun"}) {
    EXPECT_TRUE(CheckSubmission(o, program, 0).ok()) << program;  // one component: staged as before
    SubmissionCheck het = CheckSubmission(o, program, 1);
    ASSERT_FALSE(het.ok()) << program;
    EXPECT_STREQ(het.option, "stage");
    EXPECT_EQ(het.why.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(het.why.message().find("a heterogeneous job cannot be staged (the prolog would stage the datasets on "
                                     "one component's nodes only"),
              0u)
        << het.why.message();
    EXPECT_NE(het.why.message().find("submit the components without --stage"), std::string::npos);
  }
  // Refused whichever other option the job also gave.
  o.nccl_check_given = true;
  o.nccl_check = Level::kQuick;
  EXPECT_STREQ(CheckSubmission(o, "sbatch", 2).option, "stage");
}

}  // namespace
}  // namespace preflight
