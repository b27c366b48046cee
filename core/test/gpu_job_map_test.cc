#include "preflight/gpu_job_map.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "preflight/fileutil.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::TempDir;
using Jobs = std::vector<std::string>;

std::string Read(const std::string& path) {
  auto t = ReadWholeFile(path);
  return t ? *t : "<missing>";
}
// Every name in `dir` but the lock file.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && n != ".preflight.lock") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GpuJobMapFormat, OneJobPerLineBlankLinesDropped) {
  EXPECT_EQ(ParseGpuJobFile("12\n\n34\r\n"), (Jobs{"12", "34"}));
  EXPECT_EQ(ParseGpuJobFile(""), Jobs{});
  EXPECT_EQ(ParseGpuJobFile("7"), Jobs{"7"});  // no final newline
  EXPECT_EQ(FormatGpuJobFile({"12", "34"}), "12\n34\n");
  EXPECT_EQ(FormatGpuJobFile({}), "");
}

TEST(GpuJobMapFormat, AddOnceRemoveOnlyTheJob) {
  EXPECT_EQ(WithJob({}, "5"), Jobs{"5"});
  EXPECT_EQ(WithJob({"4"}, "5"), (Jobs{"4", "5"}));
  EXPECT_EQ(WithJob({"4", "5"}, "5"), (Jobs{"4", "5"}));  // a prolog run twice
  EXPECT_EQ(WithoutJob({"4", "5", "6"}, "5"), (Jobs{"4", "6"}));
  EXPECT_EQ(WithoutJob({"5", "5"}, "5"), Jobs{});
  EXPECT_EQ(WithoutJob({"50", "15"}, "5"), (Jobs{"50", "15"}));  // whole lines only
}

TEST(GpuJobMapFormat, NamesAndJobIds) {
  EXPECT_TRUE(IsGpuJobFileName("0"));
  EXPECT_TRUE(IsGpuJobFileName("12"));
  EXPECT_FALSE(IsGpuJobFileName(".0.tmp.99"));
  EXPECT_FALSE(IsGpuJobFileName(".preflight.lock"));
  EXPECT_FALSE(IsGpuJobFileName("2.0"));
  EXPECT_FALSE(IsGpuJobFileName(""));
  EXPECT_TRUE(CheckMapJobId("123456").ok());
  EXPECT_FALSE(CheckMapJobId("").ok());
  EXPECT_FALSE(CheckMapJobId("12\n34").ok());
  EXPECT_FALSE(CheckMapJobId("../1").ok());
  EXPECT_FALSE(CheckMapJobId("123_4").ok());
}

TEST(GpuJobMap, PrologWritesEpilogRemoves) {
  TempDir t("gpumap");
  std::string dir = t / "map";  // made by the prolog
  auto a = AddJobToGpuMap(dir, {0, 2}, "101");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->written, (std::vector<int>{0, 2}));
  EXPECT_EQ(Names(dir), (std::vector<std::string>{"0", "2"}));  // no temporary left
  EXPECT_EQ(Read(dir + "/0"), "101\n");
  EXPECT_EQ(Read(dir + "/2"), "101\n");
  struct stat st;
  ASSERT_EQ(::stat((dir + "/0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);

  auto r = RemoveJobFromGpuMap(dir, "101");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->removed, (std::vector<int>{0, 2}));
  EXPECT_EQ(Names(dir), std::vector<std::string>{});
}

TEST(GpuJobMap, JobsSharingANodeAndAGpu) {
  TempDir t("gpumap");
  std::string dir = t / "map";
  ASSERT_TRUE(AddJobToGpuMap(dir, {0, 1}, "7").ok());
  ASSERT_TRUE(AddJobToGpuMap(dir, {1, 2}, "8").ok());  // GPU 1 shared (shards)
  ASSERT_TRUE(AddJobToGpuMap(dir, {1}, "8").ok());     // the same prolog again: listed once
  EXPECT_EQ(Read(dir + "/0"), "7\n");
  EXPECT_EQ(Read(dir + "/1"), "7\n8\n");
  EXPECT_EQ(Read(dir + "/2"), "8\n");

  auto r = RemoveJobFromGpuMap(dir, "7");  // job 7's epilog: job 8 keeps its lines
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->removed, std::vector<int>{0});
  EXPECT_EQ(r->written, std::vector<int>{1});
  EXPECT_EQ(Names(dir), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(Read(dir + "/1"), "8\n");
  EXPECT_EQ(Read(dir + "/2"), "8\n");
  ASSERT_TRUE(RemoveJobFromGpuMap(dir, "8").ok());
  EXPECT_EQ(Names(dir), std::vector<std::string>{});
}

TEST(GpuJobMap, NoGpusOrNoFolderIsNothingToDo) {
  TempDir t("gpumap");
  auto a = AddJobToGpuMap(t / "map", {}, "9");  // a job with no GPU on this node
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->written.empty());
  EXPECT_NE(::access((t / "map").c_str(), F_OK), 0);  // not even the folder
  auto r = RemoveJobFromGpuMap(t / "map", "9");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->removed.empty());
}

TEST(GpuJobMap, ConcurrentPrologsOfTwoJobsBothLand) {
  TempDir t("gpumap");
  std::string dir = t / "map";
  ASSERT_TRUE(MakeDirs(dir, 0755).ok());
  std::vector<std::thread> threads;
  std::vector<Status> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] { got[i] = AddJobToGpuMap(dir, {0}, std::to_string(100 + i)).status(); });
  for (auto& th : threads) th.join();
  for (const auto& s : got) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ParseGpuJobFile(Read(dir + "/0")).size(), 8u);
}

TEST(GpuJobMap, RefusesAFolderOthersCanWriteOrASymlink) {
  TempDir t("gpumap", 0755);
  std::string open = t / "open";
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  auto a = AddJobToGpuMap(open, {0}, "1");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kPermission);
  EXPECT_NE(a.status().message().find("dcgm_job_map_dir"), std::string::npos) << a.status().message();
  EXPECT_NE(::access((open + "/0").c_str(), F_OK), 0);

  std::string real = t / "real", link = t / "link";
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  a = AddJobToGpuMap(link, {0}, "1");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("symlink"), std::string::npos) << a.status().message();
  EXPECT_NE(::access((real + "/0").c_str(), F_OK), 0);
  EXPECT_FALSE(RemoveJobFromGpuMap(link, "1").ok());
}

TEST(GpuJobMap, AGpuFileThatIsASymlinkIsNeverFollowed) {
  TempDir t("gpumap");
  std::string dir = t / "map", target = t / "target";
  ASSERT_TRUE(MakeDirs(dir, 0755).ok());
  std::ofstream(target) << "keep\n";
  ASSERT_EQ(::symlink(target.c_str(), (dir + "/3").c_str()), 0);
  auto a = AddJobToGpuMap(dir, {3}, "5");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("symlink"), std::string::npos) << a.status().message();
  EXPECT_EQ(Read(target), "keep\n");
  // The epilog still clears this job from the other GPUs and says why not there.
  ASSERT_TRUE(AddJobToGpuMap(dir, {1}, "5").ok());
  auto r = RemoveJobFromGpuMap(dir, "5");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(::access((dir + "/1").c_str(), F_OK), 0);
  EXPECT_EQ(Read(target), "keep\n");
}

TEST(GpuJobMap, ABadJobIdWritesNothing) {
  TempDir t("gpumap");
  auto a = AddJobToGpuMap(t / "map", {0}, "1\n2");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(::access((t / "map").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace preflight
