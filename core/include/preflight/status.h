// Errors as values. Every fallible core function returns Status or
// Expected<T>; nothing in core/ throws across its public interface.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace preflight {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad user or admin input; message names the input
    kNotFound,
    kIOError,          // a system call failed; message has path and strerror
    kPermission,
    kTimeout,
    kUnavailable,      // the facility is absent here (no driver, no HCA): "skipped"
    kFailed,           // a check ran and its figure is outside the threshold
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status IOError(std::string m) { return Status(Code::kIOError, std::move(m)); }
  static Status Permission(std::string m) { return Status(Code::kPermission, std::move(m)); }
  static Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status Failed(std::string m) { return Status(Code::kFailed, std::move(m)); }
  // "what: strerror(err)", with the code chosen from errno (ENOENT -> NotFound,
  // EACCES/EPERM -> Permission, else IOError). The one place errno becomes text.
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno a FromErrno status was made from (kept through Context), 0
  // for any other: callers that decide on the cause (a full disk is not a
  // broken one) test this, never the message text.
  int sys_errno() const { return errno_; }
  std::string ToString() const;
  // Prefix the message with more context: "context: message".
  Status Context(const std::string& context) const;

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
  int errno_ = 0;
};

// A value or the Status saying why there is none.
template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}      // NOLINT: must not be ok()
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace preflight
