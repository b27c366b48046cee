#include "preflight/stage_config.h"

#include "preflight/config_values.h"

namespace preflight {
namespace {
constexpr EnumNames<StageVerify> kStageVerifyNames = {{StageVerify::kFiles, "files"}, {StageVerify::kDirs, "dirs"}};
}  // namespace

const char* StageVerifyName(StageVerify v) { return NameIn(kStageVerifyNames, v); }
Expected<StageVerify> ParseStageVerify(const std::string& s) { return ParseIn(kStageVerifyNames, s); }

}  // namespace preflight
