// The copy engine on a network source: the source is served through
// preflight-netfs (tests/harness/netfs, the harness's emulated network
// file system: FUSE, a fixed latency per operation, no caching), the seam
// a real NFS or Lustre mount takes in production. The walk's opens, the
// copies and the warm check then run stage_remote_workers at once; what
// they produce must be exactly what the serial engine produces, and every
// failure must name the file.
//
// Skips without root (the mount, reading as nobody), /dev/fuse or the
// preflight-netfs binary.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_spec.h"
#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"

namespace preflight {
namespace {

using preflight_test::NobodyReader;
using preflight_test::Write;

struct TempDir : preflight_test::TempDir {
  TempDir() : preflight_test::TempDir("stage_remote", 0755) {}
};

// SOURCE mounted at MOUNTPOINT through preflight-netfs for the test's life.
class NetMount {
 public:
  NetMount(const std::string& src, const std::string& mnt, int latency_us, const std::string& control) : mnt_(mnt) {
    MakeDirs(mnt, 0755);
    auto r = RunCommand({PF_SOURCE_DIR "/tests/harness/netfs.sh", "mount", src, mnt, "--allow-other", "--latency-us",
                         std::to_string(latency_us), "--control", control},
                        {"PREFLIGHT_NETFS=" PF_NETFS_BIN}, 30000);
    ok_ = r && r->exit_code == 0;
    if (!ok_) why_ = r ? r->output : r.status().message();
  }
  ~NetMount() {
    if (ok_) RunCommand({PF_SOURCE_DIR "/tests/harness/netfs.sh", "umount", mnt_}, {"PREFLIGHT_NETFS=" PF_NETFS_BIN}, 30000);
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

 private:
  std::string mnt_, why_;
  bool ok_ = false;
};

std::string Why(StageIdentity* who) {
  if (!NobodyReader(who)) return preflight_test::kNoNobody;
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "skipped: no /dev/fuse";
  if (::access(PF_NETFS_BIN, X_OK) != 0) return "skipped: no preflight-netfs at " PF_NETFS_BIN;
  return "";
}

TEST(StageRemote, ANetworkSourceIsCopiedWithManyOpsInFlightExactlyAsTheSerialCopy) {
  StageIdentity who;
  std::string skip = Why(&who);
  if (!skip.empty()) GTEST_SKIP() << skip;
  TempDir t;
  std::string src = t.path() + "/src", mnt = t.path() + "/mnt";
  // 3 folders of 150 files (each above the warm check's chunk of 64), a
  // nested folder, files up to 2 MiB (copy_file_range's range), a link.
  for (int d = 0; d < 3; ++d) {
    MakeDirs(src + "/d" + std::to_string(d) + "/sub", 0755);
    for (int i = 0; i < 150; ++i)
      Write(src + "/d" + std::to_string(d) + "/f" + std::to_string(i), preflight_test::Blob(100 + 37 * i, char(d + i)));
    Write(src + "/d" + std::to_string(d) + "/sub/big", preflight_test::Blob((2 << 20) + d, char(d)));
  }
  // Above kRangeMin: copied as 8 MiB ranges by several workers, the last
  // one partial.
  Write(src + "/d1/weights.bin", preflight_test::Blob((20 << 20) + 12345, 'w'));
  ASSERT_EQ(::symlink("d0/f1", (src + "/link").c_str()), 0);
  std::string control = t.path() + "/control";
  NetMount net(src, mnt, 300, control);
  ASSERT_TRUE(net.ok()) << net.why();
  int fd = ::open(mnt.c_str(), O_RDONLY | O_DIRECTORY);
  std::string fs;
  ASSERT_TRUE(OnNetworkFilesystem(fd, &fs));
  ::close(fd);
  EXPECT_EQ(fs, "fuse");

  StageCacheOptions o;
  o.dir = t.path() + "/cache";
  o.workers = 2;
  o.remote_workers = 16;
  StagedDataset d;
  FaultSide side;
  Status s = StageDataset(o, mnt, who, "job1", &d, &side);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(d.hit);
  EXPECT_EQ(d.files, 454u);
  EXPECT_EQ(d.note, "read from a fuse file system, 16 operations in flight");
  for (int dd = 0; dd < 3; ++dd)
    for (const std::string rel : {"/f0", "/f77", "/f149", "/sub/big", "/weights.bin"}) {
      if (rel == "/weights.bin" && dd != 1) continue;
      std::string p = "/d" + std::to_string(dd) + rel;
      auto a = ReadWholeFile(src + p), b = ReadWholeFile(d.data_path + p);
      ASSERT_TRUE(a.ok() && b.ok()) << p;
      EXPECT_TRUE(*a == *b) << p;
    }
  char target[64] = {};
  ASSERT_GT(::readlink((d.data_path + "/link").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "d0/f1");

  // Warm: a hit, checked with chunks on many threads over the mount.
  s = StageDataset(o, mnt, who, "job2", &d, &side);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(d.hit);
  // A file changed behind the mount: seen, and copied again.
  Write(src + "/d2/f140", "rewritten");
  s = StageDataset(o, mnt, who, "job3", &d, &side);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(d.hit);
  auto now = ReadWholeFile(d.data_path + "/d2/f140");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, "rewritten");

  // EIO in the middle of the large file (one of its ranges): the copy
  // fails naming the file, as the source's fault, and serves nothing.
  Write(control, "eio read *weights.bin\n");
  RemoveTree(o.dir);
  s = StageDataset(o, mnt, who, "job3b", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("read " + mnt + "/d1/weights.bin: Input/output error"), std::string::npos) << s.message();
  Write(control, "");

  // A file the user cannot read: the cold copy (an opener thread) fails
  // naming it, as the source's fault, and leaves no copy.
  ASSERT_EQ(::chmod((src + "/d1/f99").c_str(), 0600), 0);
  RemoveTree(o.dir);
  s = StageDataset(o, mnt, who, "job4", &d, &side);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find(mnt + "/d1/f99"), std::string::npos) << s.message();
  // Nothing served: no data folder anywhere in the cache.
  auto r = RunCommand({"find", o.dir, "-name", "data"}, {}, 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "");

  // A source that stops answering in the middle of the data (the server
  // holds every read of the large file, as a dead NFS server would): the
  // root copy workers blocked in those reads cannot be interrupted, so the
  // copy gives up CopyPool::kAbandonGrace after stage_timeout, naming the
  // file, as the source's fault, and serves nothing. Without the bound this
  // test does not end.
  ASSERT_EQ(::chmod((src + "/d1/f99").c_str(), 0644), 0);
  Write(control, "hold read *weights.bin\n");
  RemoveTree(o.dir);
  o.deadline = MonotonicSeconds() + 5;
  s = StageDataset(o, mnt + "/d1", who, "job5", &d, &side);
  Write(control, "");  // the stuck workers (left behind) wake, see the failure and end
  o.deadline = 0;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(side, FaultSide::kSource);
  EXPECT_NE(s.message().find("timed out reading " + mnt + "/d1/weights.bin: the source has not answered"),
            std::string::npos)
      << s.message();
  r = RunCommand({"find", o.dir, "-name", "data"}, {}, 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "");
}

}  // namespace
}  // namespace preflight
