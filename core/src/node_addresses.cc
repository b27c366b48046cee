#include "preflight/node_addresses.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/hostlist.h"

namespace preflight {

Expected<std::map<std::string, std::string>> LoadNodeAddresses(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "node_addresses " + path);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("node_addresses " + path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxNodeAddressesBytes)
    return Status::InvalidArgument("node_addresses " + path + ": " + std::to_string(st.st_size) +
                                   " bytes; the limit is " + std::to_string(kMaxNodeAddressesBytes));
  auto text = ReadWholeFile(path);
  if (!text) return text.status();
  std::map<std::string, std::string> out;
  std::map<std::string, int> line_of;  // node -> the line that named it
  std::istringstream in(*text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string addr, name;
    if (!(words >> addr)) continue;
    auto where = [&] { return "node_addresses " + path + ":" + std::to_string(no) + ": "; };
    unsigned char buf[16];
    if (::inet_pton(AF_INET, addr.c_str(), buf) != 1 && ::inet_pton(AF_INET6, addr.c_str(), buf) != 1)
      return Status::InvalidArgument(where() + "'" + addr + "' is not an IPv4 or IPv6 address");
    bool any = false;
    while (words >> name) {
      Status v = ValidNodeName(name);
      if (!v.ok()) return Status::InvalidArgument(where() + v.message());
      auto [at, fresh] = line_of.emplace(name, no);
      if (!fresh)  // which line wins would be a guess: the site says which
        return Status::InvalidArgument(where() + "node '" + name + "' is named twice (lines " + std::to_string(at->second) +
                                       " and " + std::to_string(no) + ")");
      out[name] = addr;
      any = true;
    }
    if (!any) return Status::InvalidArgument(where() + "address '" + addr + "' names no node");
  }
  return out;
}

Expected<std::string> NodeAddress(const Config& cfg, const std::string& node) {
  if (cfg.node_addresses.empty()) return std::string();
  auto m = LoadNodeAddresses(cfg.node_addresses);
  if (!m) return m.status();
  auto it = m->find(node);
  return it == m->end() ? std::string() : it->second;
}

}  // namespace preflight
