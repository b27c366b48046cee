#include "preflight/ckpt_config.h"

#include "preflight/config_values.h"

namespace preflight {
namespace {
constexpr EnumNames<CkptIoClass> kCkptIoClassNames = {
    {CkptIoClass::kIdle, "idle"}, {CkptIoClass::kLow, "low"}, {CkptIoClass::kNormal, "normal"}};
}  // namespace

const char* CkptIoClassName(CkptIoClass c) { return NameIn(kCkptIoClassNames, c); }
Expected<CkptIoClass> ParseCkptIoClass(const std::string& s) { return ParseIn(kCkptIoClassNames, s); }

}  // namespace preflight
