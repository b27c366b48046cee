// The syntax of the topo_expect key: the GPU-NIC placement a site pins
// ("0:mlx5_0,1:mlx5_1,2:mlx5_2+mlx5_3": GPU index -> its NIC(s), closest
// first). Parsed here so the config can refuse a bad line; the check that
// compares it with the node is checks/ (pairing_check.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/status.h"

namespace preflight {

using ExpectedPairing = std::vector<std::pair<int, std::vector<std::string>>>;
Expected<ExpectedPairing> ParseExpectedPairing(const std::string& text);

}  // namespace preflight
