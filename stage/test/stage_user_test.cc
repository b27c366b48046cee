// The stage children's identity (stage_user.h ReadAsStageUser) and how
// their end is classed (stage_user_child.h StageChildEnd), issue 29: a user
// whose `pkill -9 -u USER` once ended the root prolog's source walker and
// drained the node can no longer signal it, while it still reads only what
// the user may read.
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include "stage_test_util.h"
#include "stage_user_child.h"

#include "preflight/fileutil.h"
#include "preflight/stage_user.h"

namespace preflight {
namespace {

using preflight_test::NobodyReader;

// Runs `body` in a forked child with the user's full identity (as the
// user's own processes have it); its exit code.
template <class F>
int AsTheUser(const StageIdentity& who, F body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string err;
    if (!DropToStageUser(who, &err)) ::_exit(100);
    ::_exit(body());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
}

TEST(StageUser, TheUsersProcessesCannotSignalOrTraceTheReader) {
  StageIdentity who;
  if (!NobodyReader(&who)) GTEST_SKIP() << preflight_test::kNoNobody;
  preflight_test::TempDir t("user", 0755);
  std::string secret = t.path() + "/secret", open_file = t.path() + "/open";
  ASSERT_TRUE(WriteFileAtomic(secret, "root only\n", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(open_file, "anyone\n", 0644).ok());
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t reader = ::fork();
  if (reader == 0) {
    // The reader: reports what the kernel let it do (one byte per probe), then waits.
    ::close(ready[0]);
    ::close(go[1]);
    std::string err;
    char r[5] = {'E', '?', '?', '?', '?'};
    if (ReadAsStageUser(who, &err)) {
      r[0] = 'K';
      r[1] = ::open(secret.c_str(), O_RDONLY) < 0 && errno == EACCES ? 'd' : 'R';
      r[2] = ::faccessat(AT_FDCWD, secret.c_str(), R_OK, AT_EACCESS) != 0 ? 'd' : 'R';
      r[3] = ::open(open_file.c_str(), O_RDONLY) >= 0 ? 'r' : 'D';
      r[4] = ::geteuid() == who.uid && ::getuid() == 0 ? 'u' : 'U';
    }
    if (::write(ready[1], r, sizeof r) != sizeof r) ::_exit(3);
    char c;
    ssize_t n = ::read(go[0], &c, 1);
    ::_exit(n == 1 ? 0 : 4);
  }
  ::close(ready[1]);
  ::close(go[0]);
  char r[5] = {};
  ASSERT_EQ(::read(ready[0], r, sizeof r), 5);
  EXPECT_EQ(std::string(r, 5), "Kddru") << "K: identity taken; d: the root-only file refused (open, faccessat "
                                           "AT_EACCESS); r: a readable file read; u: euid the user's, real uid 0";
  // The user's own process: kill, ptrace and renice all refused.
  EXPECT_EQ(AsTheUser(who, [&] { return ::kill(reader, SIGKILL) == -1 && errno == EPERM ? 0 : 1; }), 0)
      << "SIGKILL from the user's process";
  EXPECT_EQ(AsTheUser(who, [&] { return ::kill(reader, SIGSTOP) == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(AsTheUser(who, [&] { return ::ptrace(PTRACE_ATTACH, reader, nullptr, nullptr) == -1 ? 0 : 1; }), 0)
      << "ptrace attach";
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  int st = 0;
  ASSERT_EQ(::waitpid(reader, &st, 0), reader);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the reader lived to the end: status " << st;
  ::close(ready[0]);
  ::close(go[1]);
}

TEST(StageUser, AKilledReaderIsTheJobsFaultNamedWithTheSignal) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::raise(SIGKILL);
    ::_exit(0);
  }
  FaultSide side = FaultSide::kNone;
  Status s = stage_internal::StageChildEnd(&pid, "source walker", "/data/ds", &side);
  EXPECT_EQ(side, FaultSide::kSource) << "killed: the job's, not the node's";
  EXPECT_EQ(pid, -1);
  EXPECT_NE(s.message().find("staging /data/ds: the source walker (reading as the job's user) was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << s.message();
  pid = ::fork();
  if (pid == 0) ::_exit(0);
  s = stage_internal::StageChildEnd(&pid, "cache check", "/data/ds", &side);
  EXPECT_EQ(side, FaultSide::kNode) << "an exit without a result is preflight's own failure";
  EXPECT_NE(s.message().find("the cache check ended without a result (exit 0)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace preflight
