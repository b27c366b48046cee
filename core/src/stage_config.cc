#include "preflight/stage_config.h"

#include "preflight/config_values.h"

namespace preflight {
namespace {
constexpr EnumNames<StageVerify> kStageVerifyNames = {{StageVerify::kFiles, "files"}, {StageVerify::kDirs, "dirs"}};
}  // namespace

const char* StageVerifyName(StageVerify v) { return NameIn(kStageVerifyNames, v); }
Expected<StageVerify> ParseStageVerify(const std::string& s) { return ParseIn(kStageVerifyNames, s); }

Expected<uint64_t> ParseStagePeerPort(const std::string& s) {
  auto n = ParseCount(s);
  if (!n || *n < 1 || *n > 1023)
    return Status::InvalidArgument("bad value '" + s +
                                   "' (expected a number from 1 to 1023: a privileged port, where only root may listen)");
  return n;
}

uint16_t StagePeerPortFor(uint64_t port, size_t i) {
  uint64_t span = port < 1024 ? 1024 - port : 1;
  return static_cast<uint16_t>(port + i % span);
}

}  // namespace preflight
