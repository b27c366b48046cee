#include "preflight/status.h"

#include <cerrno>
#include <cstring>

namespace preflight {

Status Status::FromErrno(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT: case ENOTDIR: return NotFound(std::move(m));
    case EACCES: case EPERM: case EROFS: return Permission(std::move(m));
    case ETIMEDOUT: return Timeout(std::move(m));
    default: return IOError(std::move(m));
  }
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::Context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace preflight
