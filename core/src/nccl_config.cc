#include "preflight/nccl_config.h"

#include "preflight/config_values.h"

namespace preflight {
namespace {
constexpr EnumNames<NcclOnFailure> kOnFailureNames = {{NcclOnFailure::kRequeue, "requeue"}, {NcclOnFailure::kFail, "fail"}};
}  // namespace

const char* NcclOnFailureName(NcclOnFailure f) { return NameIn(kOnFailureNames, f); }
Expected<NcclOnFailure> ParseNcclOnFailure(const std::string& s) { return ParseIn(kOnFailureNames, s); }
Expected<std::string> ParseNcclBackend(const std::string& s) { return OneOf(s, {"auto", "nccl", "host"}); }

}  // namespace preflight
