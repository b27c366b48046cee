#include "preflight/fileutil.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <thread>

namespace preflight {
namespace {

TEST(WriteAll, WritesEverythingThroughShortWrites) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  // More than a pipe's buffer (64 KiB): the writer sees short writes while
  // the reader drains.
  std::string data(1 << 20, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  });
  EXPECT_TRUE(WriteAll(p[1], data));
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  EXPECT_EQ(got, data);
}

TEST(WriteAll, AGonePeerIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(sv[1]);
  // With no_sigpipe, send(MSG_NOSIGNAL): EPIPE comes back; SIGPIPE would
  // have ended this test process.
  errno = 0;
  EXPECT_FALSE(WriteAll(sv[0], "abc", 3, /*no_sigpipe=*/true));
  EXPECT_EQ(errno, EPIPE);
  ::close(sv[0]);
}

TEST(WriteAll, ABadDescriptorFailsWithItsErrno) {
  errno = 0;
  EXPECT_FALSE(WriteAll(-1, std::string("x")));
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace preflight
