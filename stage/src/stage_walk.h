// The source walker of --stage (private to stage/src): a child process
// that runs as the job's user, walks the source, and passes each entry's
// metadata (and each file's open descriptor) to root over a socketpair;
// root never opens a source path itself. The parent reads the records with
// Receive.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "preflight/clock.h"
#include "preflight/stage_copy.h"

namespace preflight::stage_internal {

// ---- wire format between the walker child and the parent ------------------
enum Kind : uint8_t { kRoot = 1, kEntry = 2, kError = 3, kEnd = 4 };
struct Wire {
  uint8_t kind;
  char type;  // 'd', 'f', 'l'
  uint16_t path_len;
  uint16_t link_len;
  uint8_t has_fd;
  uint8_t pad;
  uint32_t mode;
  uint32_t mtime_nsec;
  uint64_t size;
  int64_t mtime_sec;
  int64_t ctime_sec;
  uint32_t ctime_nsec;
  uint32_t err;  // kError: the errno of the failed call, 0 for a refusal
  uint64_t ino;
};
constexpr size_t kMsgBytes = 60 * 1024;
constexpr size_t kMaxFdsPerMsg = 128;  // below SCM_MAX_FD (253)
constexpr uint64_t kLargeFile = 1 << 20;

struct Record {
  Kind kind;
  char type;
  uint32_t mode;
  uint64_t size;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;
  uint64_t ino = 0;
  int err = 0;  // kError: Wire::err
  std::string path;
  std::string link;
  int fd = -1;
};

// Light lines: directories only, by ctime; manifest lines: every entry.
std::string LightLine(const Record& r);
std::string ManifestLine(const Record& r);

enum class WalkMode { kCopy, kScan, kLight };

// ---- the parent -----------------------------------------------------------
struct Child {
  pid_t pid = -1;
  int sock = -1;
};

// Forks the walker for `src` as `who` (copy: with descriptors; scan: a
// manifest; light: directories only).
Status StartChild(const std::string& src, const StageIdentity& who, WalkMode mode, Child* c,
                  bool local_digest = false, const std::vector<std::string>* light_dirs = nullptr);
// Reaps the walker (SIGKILL first when `kill`) and closes the socket.
void StopChild(Child* c, bool kill);

// Receives batches; calls on_record for each; closes unclaimed fds.
// Returns false with *error/*side on a child error, timeout or protocol
// failure; true at kEnd.
template <class F>
Status Receive(Child* c, double deadline, const std::string& src, FaultSide* side, F&& on_record,
               std::string* end_text = nullptr) {
  std::vector<char> buf(kMsgBytes + 1024);
  std::vector<char> ctl(CMSG_SPACE(sizeof(int) * 256));
  for (;;) {
    if (deadline > 0) {
      double left = deadline - MonotonicSeconds();
      if (left <= 0) {
        *side = FaultSide::kSource;
        return Status::Timeout("staging " + src + ": timed out while reading the source");
      }
      struct pollfd p = {c->sock, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000 + 1, 60000.0)));
      if (r == 0) continue;
      if (r < 0 && errno == EINTR) continue;
    }
    struct iovec iov = {buf.data(), buf.size()};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.data();
    msg.msg_controllen = ctl.size();
    ssize_t n = ::recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    std::vector<int> fds;
    for (struct cmsghdr* h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int* p = reinterpret_cast<const int*>(CMSG_DATA(h));
        fds.insert(fds.end(), p, p + k);
      }
    }
    size_t next_fd = 0;
    auto close_rest = [&] { for (size_t i = next_fd; i < fds.size(); ++i) ::close(fds[i]); };
    if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
      close_rest();
      *side = FaultSide::kNode;
      return n < 0 ? Status::FromErrno(errno, "reading from the source walker")
                   : Status::IOError("staging " + src + ": source walker ended without a result");
    }
    size_t off = 0;
    while (off + sizeof(Wire) <= static_cast<size_t>(n)) {
      Wire w;
      std::memcpy(&w, buf.data() + off, sizeof w);
      off += sizeof w;
      if (off + w.path_len + w.link_len > static_cast<size_t>(n)) break;
      Record r;
      r.kind = static_cast<Kind>(w.kind);
      r.type = w.type;
      r.mode = w.mode;
      r.size = w.size;
      r.mtime_sec = w.mtime_sec;
      r.mtime_nsec = w.mtime_nsec;
      r.ctime_sec = w.ctime_sec;
      r.ctime_nsec = w.ctime_nsec;
      r.ino = w.ino;
      r.err = static_cast<int>(w.err);
      r.path.assign(buf.data() + off, w.path_len);
      off += w.path_len;
      r.link.assign(buf.data() + off, w.link_len);
      off += w.link_len;
      if (w.has_fd) {
        if (next_fd >= fds.size()) { close_rest(); *side = FaultSide::kNode; return Status::IOError("source walker: descriptor missing"); }
        r.fd = fds[next_fd++];
      }
      if (r.kind == kError) {
        if (r.fd >= 0) ::close(r.fd);
        close_rest();
        *side = FaultSide::kSource;
        // The child's errno says what kind of failure it was (the text is
        // the child's message, naming the user's path).
        if (r.err == ENOENT) return Status::NotFound(r.path);
        if (r.err == EACCES || r.err == EPERM) return Status::Permission(r.path);
        return Status::IOError(r.path);
      }
      if (r.kind == kEnd) {
        close_rest();
        if (end_text) *end_text = r.path;
        return Status::Ok();
      }
      Status s = on_record(r);  // takes ownership of r.fd
      if (!s.ok()) { close_rest(); return s; }
    }
    close_rest();
  }
}

}  // namespace preflight::stage_internal
