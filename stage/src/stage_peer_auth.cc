#include "preflight/stage_peer.h"

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

// Peer credentials: munge, made by root on a cluster node for this job's
// dataset (stage_peer.h).
namespace preflight {

std::string PeerPayload(const std::string& job_id, const std::string& key) {
  return "preflight-stage job=" + job_id + " key=" + key;
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
  if (got != payload) return Status::Permission("peer refused: credential for '" + got + "', not this job's dataset");
  return Status::Ok();
}

}  // namespace preflight
