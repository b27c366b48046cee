#include "preflight/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace preflight {
namespace {

// Callers decide on the cause by errno (a full disk is the job's, a broken
// one the node's), never by the message text, so it must survive Context.
TEST(Status, FromErrnoKeepsTheErrnoThroughContext) {
  Status s = Status::FromErrno(ENOSPC, "write /x");
  EXPECT_EQ(s.sys_errno(), ENOSPC);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  Status c = s.Context("stage").Context("job 7");
  EXPECT_EQ(c.sys_errno(), ENOSPC);
  EXPECT_EQ(c.message(), "job 7: stage: write /x: No space left on device");
  EXPECT_EQ(Status::FromErrno(ENOENT, "open").sys_errno(), ENOENT);
  EXPECT_EQ(Status::FromErrno(ENOENT, "open").code(), Status::Code::kNotFound);
  // Statuses not made from an errno carry none, whatever their text says.
  EXPECT_EQ(Status::IOError("No space left on device").sys_errno(), 0);
  EXPECT_EQ(Status::Ok().sys_errno(), 0);
}

}  // namespace
}  // namespace preflight
