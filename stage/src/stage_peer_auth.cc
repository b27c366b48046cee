#include "preflight/stage_peer_auth.h"

#include <xxhash.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "preflight/stage_spec.h"

// Peer credentials: munge, made by root on a cluster node for one link of
// one job's tree (stage_peer.h).
namespace preflight {

PeerLink MakePeerLink(const PeerOptions& p, const std::string& key, size_t parent, size_t child) {
  PeerLink l;
  l.job_id = p.job_id;
  l.key = key;
  l.parent = parent;
  l.child = child;
  if (parent < p.nodes.size()) l.parent_host = p.nodes[parent].host;
  if (child < p.nodes.size()) l.child_host = p.nodes[child].host;
  return l;
}

namespace {

std::string LinkText(const PeerLink& l) {
  return "job=" + l.job_id + " key=" + l.key + " parent=" + std::to_string(l.parent) + "@" + l.parent_host +
         " child=" + std::to_string(l.child) + "@" + l.child_host;
}

}  // namespace

std::string ParentPayload(const PeerLink& l, const std::string& child_nonce) {
  return "preflight-stage/3 parent " + LinkText(l) + " nonce=" + child_nonce;
}

std::string ChildPayload(const PeerLink& l, const std::string& parent_nonce) {
  return "preflight-stage/3 child " + LinkText(l) + " nonce=" + parent_nonce;
}

std::string PeerNonce() {
  unsigned char r[16];
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = ::getrandom(r + got, sizeof r - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    else if (errno != EINTR) std::abort();  // no entropy source: nothing safe to fall back on
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : r) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

long ListenerUid(const std::string& text, uint16_t port) {
  // "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...", the
  // addresses hex "0100007F:1AAE"; st 0A is LISTEN (proc_net_tcp(5)).
  size_t i = text.find('\n');
  while (i != std::string::npos && i + 1 < text.size()) {
    size_t e = text.find('\n', i + 1);
    std::string line = text.substr(i + 1, e == std::string::npos ? std::string::npos : e - i - 1);
    i = e;
    char local[64], remote[64], st[8];
    unsigned long uid = 0;
    if (std::sscanf(line.c_str(), " %*s %63s %63s %7s %*s %*s %*s %lu", local, remote, st, &uid) != 4) continue;
    const char* colon = std::strrchr(local, ':');
    if (!colon || std::strcmp(st, "0A") != 0) continue;
    if (std::strtoul(colon + 1, nullptr, 16) == port) return static_cast<long>(uid);
  }
  return -1;
}

namespace {

struct MungeCtx {
  explicit MungeCtx(const std::string& socket) : ctx(munge_ctx_create()) {
    if (ctx && !socket.empty()) munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
  }
  ~MungeCtx() {
    if (ctx) munge_ctx_destroy(ctx);
  }
  munge_ctx_t ctx;
};

}  // namespace

Expected<std::string> EncodePeerCredential(const std::string& munge_socket, const std::string& payload) {
  MungeCtx m(munge_socket);
  if (!m.ctx) return Status::IOError("munge: cannot create a context");
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, m.ctx, payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(m.ctx);
    return Status::Unavailable(std::string("munge encode: ") + (why ? why : munge_strerror(e)));
  }
  std::string out = cred;
  std::free(cred);
  return out;
}

Status VerifyPeerCredential(const std::string& munge_socket, const std::string& cred, const std::string& payload) {
  MungeCtx m(munge_socket);
  if (!m.ctx) return Status::IOError("munge: cannot create a context");
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(cred.c_str(), m.ctx, &buf, &len, &uid, &gid);
  std::string got = buf ? std::string(static_cast<const char*>(buf), static_cast<size_t>(std::max(len, 0))) : "";
  std::free(buf);
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(m.ctx);
    return Status::Permission(std::string("peer refused: munge credential: ") + (why ? why : munge_strerror(e)));
  }
  if (uid != 0) return Status::Permission("peer refused: credential of uid " + std::to_string(uid) + ", not a prolog (root)");
  if (got != payload)
    return Status::Permission("peer refused: credential for '" + got + "', not '" + payload + "' (another job, node or connection)");
  return Status::Ok();
}

}  // namespace preflight
