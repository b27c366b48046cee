// fake_ras, TEST ONLY: a stand-in for NCCL's RAS client socket (NCCL 2.24+,
// src/ras/client_support.cc) that speaks its line protocol and replays
// reports from files, for preflight-run's hang attribution
// (wrapper/ras_client.h) in unit and system tests.
//
//   fake_ras --listen HOST:PORT --reply FILE[,FILE...] [--mode MODE]
//            [--ready FILE] [--max-seconds N]
//
// Protocol as NCCL serves it: lines end in '\n' ('\r' dropped), commands
// case-insensitive; CLIENT PROTOCOL n -> SERVER PROTOCOL 2; SET FORMAT
// json|text -> OK; TIMEOUT n -> OK; STATUS -> the report, then close; else
// "ERROR: Unknown command <line>". Connection k gets reply file k (the last
// one again after that), written in two parts with a short gap, as NCCL's
// report arrives. Modes (the bad cases of issue 31):
//   normal   as above
//   old      no SET FORMAT (NCCL before 2.28.7): "ERROR: Unknown command"
//   silent   accepts, reads, never answers
//   garbage  answers the handshake with a line that is not the protocol
//   huge     answers STATUS with 100 MB
//   endless  sends the first part of the report, then never closes
// --ready FILE is written (with the port) once listening; PORT 0 picks one.
// The server exits after --max-seconds (default 600), so nothing outlives
// a test.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) { std::fprintf(stderr, "fake_ras: cannot read %s\n", path.c_str()); std::exit(2); }
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

void Serve(int fd, const std::string& report, const std::string& mode) {
  std::string buf;
  char b[1024];
  for (;;) {
    ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n <= 0) break;
    buf.append(b, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (mode == "silent") continue;
      if (strncasecmp(line.c_str(), "CLIENT PROTOCOL", 15) == 0) {
        SendAll(fd, mode == "garbage" ? "HTTP/1.1 400 Bad Request\n" : "SERVER PROTOCOL 2\n");
      } else if (strncasecmp(line.c_str(), "SET FORMAT ", 11) == 0 && mode != "old") {
        SendAll(fd, "OK\n");
      } else if (strncasecmp(line.c_str(), "TIMEOUT ", 8) == 0) {
        SendAll(fd, "OK\n");
      } else if (strcasecmp(line.c_str(), "STATUS") == 0) {
        if (mode == "huge") {
          std::string mb(1 << 20, 'x');
          for (int i = 0; i < 100 && SendAll(fd, mb); ++i) {}
        } else {
          size_t half = report.size() / 2;
          SendAll(fd, report.substr(0, half));
          if (mode == "endless") { std::this_thread::sleep_for(std::chrono::seconds(3600)); break; }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          SendAll(fd, report.substr(half));
        }
        ::close(fd);
        return;
      } else {
        SendAll(fd, "ERROR: Unknown command " + line + "\n");
      }
    }
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen_at, replies, mode = "normal", ready;
  int max_seconds = 600;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--listen") listen_at = v;
    else if (k == "--reply") replies = v;
    else if (k == "--mode") mode = v;
    else if (k == "--ready") ready = v;
    else if (k == "--max-seconds") max_seconds = std::atoi(v.c_str());
    else { std::fprintf(stderr, "fake_ras: unknown option %s\n", k.c_str()); return 2; }
  }
  size_t colon = listen_at.rfind(':');
  if (colon == std::string::npos || replies.empty()) {
    std::fprintf(stderr, "usage: fake_ras --listen HOST:PORT --reply FILE[,FILE...] [--mode M] [--ready F]\n");
    return 2;
  }
  std::vector<std::string> reports;
  std::stringstream rs(replies);
  for (std::string f; std::getline(rs, f, ',');) reports.push_back(Slurp(f));
  std::string host = listen_at.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  struct addrinfo hints, *ai = nullptr;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  if (::getaddrinfo(host.c_str(), listen_at.substr(colon + 1).c_str(), &hints, &ai) != 0) {
    std::fprintf(stderr, "fake_ras: bad address %s\n", listen_at.c_str());
    return 2;
  }
  int lfd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as NCCL (it also sets SO_REUSEPORT)
  if (::bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(lfd, 64) != 0) {
    std::fprintf(stderr, "fake_ras: cannot listen on %s: %s\n", listen_at.c_str(), std::strerror(errno));
    return 1;
  }
  ::freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&ss), &sl);
  int port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  ::signal(SIGPIPE, SIG_IGN);
  ::alarm(static_cast<unsigned>(max_seconds));  // SIGALRM ends it
  if (!ready.empty()) {
    std::string tmp = ready + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), ready.c_str());
  }
  for (size_t k = 0;; ++k) {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const std::string& report = reports[std::min(k, reports.size() - 1)];
    std::thread(Serve, fd, report, mode).detach();
  }
}
