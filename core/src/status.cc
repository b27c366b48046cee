#include "preflight/status.h"

#include <cerrno>
#include <cstring>

namespace preflight {

Status Status::FromErrno(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  Status s;
  switch (err) {
    case ENOENT: case ENOTDIR: s = NotFound(std::move(m)); break;
    case EACCES: case EPERM: case EROFS: s = Permission(std::move(m)); break;
    case ETIMEDOUT: s = Timeout(std::move(m)); break;
    default: s = IOError(std::move(m)); break;
  }
  s.errno_ = err;
  return s;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::Context(const std::string& context) const {
  if (ok()) return *this;
  Status s(code_, context + ": " + message_);
  s.errno_ = errno_;
  return s;
}

}  // namespace preflight
