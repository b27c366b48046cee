#include "preflight/topo_expect.h"

#include <cstdlib>

namespace preflight {

Expected<ExpectedPairing> ParseExpectedPairing(const std::string& text) {
  ExpectedPairing out;
  if (text.empty()) return out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t comma = text.find(',', i);
    std::string item = text.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      return Status::InvalidArgument("bad pairing '" + item + "' (expected GPU:NIC[+NIC], e.g. 0:mlx5_0)");
    char* end = nullptr;
    long gpu = std::strtol(item.c_str(), &end, 10);
    if (end != item.c_str() + colon || gpu < 0 || gpu > 4096)
      return Status::InvalidArgument("bad GPU index in '" + item + "'");
    for (const auto& p : out)
      if (p.first == gpu) return Status::InvalidArgument("GPU " + std::to_string(gpu) + " given twice");
    std::vector<std::string> nics;
    std::string rest = item.substr(colon + 1);
    size_t j = 0;
    while (j <= rest.size()) {
      size_t plus = rest.find('+', j);
      std::string nic = rest.substr(j, plus == std::string::npos ? std::string::npos : plus - j);
      if (nic.empty()) return Status::InvalidArgument("empty NIC name in '" + item + "'");
      nics.push_back(nic);
      if (plus == std::string::npos) break;
      j = plus + 1;
    }
    out.emplace_back(static_cast<int>(gpu), nics);
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return out;
}

}  // namespace preflight
