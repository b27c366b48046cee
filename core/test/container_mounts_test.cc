#include "preflight/container_mounts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

TEST(ContainerMounts, ListsWhatExistsAsItsKindAndSpellsItForEnroot) {
  preflight_test::TempDir tmp("container-mounts");
  std::filesystem::create_directories(tmp / "records");
  std::filesystem::create_directories(tmp / "ckpt");
  std::ofstream(tmp / "topo.xml") << "<system/>";
  ContainerMountInputs in;
  in.topo_file = tmp / "topo.xml";
  in.job_records = tmp / "records";
  in.stage_view = tmp / "no-such-view";  // a job without --stage: silently none
  in.ckpt_local = tmp / "ckpt";
  std::vector<std::string> notes;
  auto m = ContainerMounts(in, &notes);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(notes.empty());
  EXPECT_FALSE(m[0].dir);
  EXPECT_FALSE(m[0].writable);
  EXPECT_TRUE(m[2].writable);
  auto lines = EnrootFstabLines(m);
  EXPECT_EQ(lines[0], in.topo_file + " " + in.topo_file + " none x-create=file,bind,ro,nosuid,nodev,private,nofail");
  EXPECT_EQ(lines[2], in.ckpt_local + " " + in.ckpt_local + " none x-create=dir,bind,rw,nosuid,nodev,private,nofail");
}

TEST(ContainerMounts, RefusesTheWrongKindAndWhatFstabCannotCarry) {
  preflight_test::TempDir tmp("container-mounts");
  std::ofstream(tmp / "file") << "x";
  std::filesystem::create_directories(tmp / "a b");
  std::filesystem::create_directories(tmp / "${HOME}");
  std::filesystem::create_directories(tmp / "back\\slash");
  for (const std::string& bad : {tmp / "a b", tmp / "${HOME}", tmp / "back\\slash", tmp / "file"}) {
    ContainerMountInputs in;
    in.job_records = bad;
    std::vector<std::string> notes;
    EXPECT_TRUE(ContainerMounts(in, &notes).empty()) << bad;
    ASSERT_EQ(notes.size(), 1u) << bad;
    EXPECT_NE(notes[0].find("not mounted"), std::string::npos) << notes[0];
  }
  ContainerMountInputs dir_as_file;
  dir_as_file.topo_file = tmp / "a b";
  std::vector<std::string> notes;
  EXPECT_TRUE(ContainerMounts(dir_as_file, &notes).empty());
  EXPECT_NE(notes.at(0).find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace preflight
