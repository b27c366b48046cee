// The walker child's side of the wire (private to stage/src): records
// batched into SOCK_SEQPACKET messages with their descriptors
// (SCM_RIGHTS). The format is stage_walk.h's Wire; Receive reads it.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "stage_walk_wire.h"

namespace preflight::stage_internal {

// The sender: the child runs as the job user.
class Sender {
 public:
  explicit Sender(int sock) : sock_(sock) { buf_.reserve(kMsgBytes); }
  bool Add(Kind kind, char type, const struct stat* st, const std::string& path, const std::string& link, int fd,
           int err = 0) {
    size_t need = sizeof(Wire) + path.size() + link.size();
    if (path.size() > 65535 || link.size() > 65535) return false;
    if (buf_.size() + need > kMsgBytes || fds_.size() >= kMaxFdsPerMsg)
      if (!Flush()) return false;
    Wire w{};
    w.kind = kind;
    w.type = type;
    w.path_len = static_cast<uint16_t>(path.size());
    w.link_len = static_cast<uint16_t>(link.size());
    w.has_fd = fd >= 0;
    w.err = static_cast<uint32_t>(err);
    if (st) {
      w.mode = st->st_mode;
      w.size = static_cast<uint64_t>(st->st_size);
      w.mtime_sec = st->st_mtim.tv_sec;
      w.mtime_nsec = static_cast<uint32_t>(st->st_mtim.tv_nsec);
      w.ctime_sec = st->st_ctim.tv_sec;
      w.ctime_nsec = static_cast<uint32_t>(st->st_ctim.tv_nsec);
      w.ino = st->st_ino;
    }
    const char* p = reinterpret_cast<const char*>(&w);
    buf_.insert(buf_.end(), p, p + sizeof w);
    buf_.insert(buf_.end(), path.begin(), path.end());
    buf_.insert(buf_.end(), link.begin(), link.end());
    if (fd >= 0) fds_.push_back(fd);
    // Small early batches get the parent's workers going while we walk on.
    if (++count_ < 256 && fds_.size() >= 8) return Flush();
    return true;
  }
  bool Flush() {
    if (buf_.empty()) return true;
    struct iovec iov = {buf_.data(), buf_.size()};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> ctl;
    if (!fds_.empty()) {
      ctl.assign(CMSG_SPACE(sizeof(int) * fds_.size()), 0);
      msg.msg_control = ctl.data();
      msg.msg_controllen = ctl.size();
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds_.size());
      std::memcpy(CMSG_DATA(c), fds_.data(), sizeof(int) * fds_.size());
    }
    ssize_t n;
    do n = ::sendmsg(sock_, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    // Our copies of the sent descriptors: closed by TakeSent's caller, out
    // of the send lock. A close is a round trip on a FUSE source (FLUSH),
    // so closing them here, one by one under the lock, was the walk's
    // bottleneck (2 ms a file at 2 ms per operation).
    sent_.insert(sent_.end(), fds_.begin(), fds_.end());
    fds_.clear();
    buf_.clear();
    return n >= 0;
  }

  // Moves the descriptors sent so far to *out, for the caller to close.
  void TakeSent(std::vector<int>* out) {
    out->insert(out->end(), sent_.begin(), sent_.end());
    sent_.clear();
  }

 private:
  int sock_;
  std::vector<char> buf_;
  std::vector<int> fds_;
  std::vector<int> sent_;
  size_t count_ = 0;
};

}  // namespace preflight::stage_internal
