#include "preflight/regex.h"

namespace preflight {

Expected<Regex> Regex::Compile(const std::string& pattern) {
  auto* re = new regex_t;
  int rc = ::regcomp(re, pattern.c_str(), REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char buf[256];
    ::regerror(rc, re, buf, sizeof buf);
    delete re;
    return Status::InvalidArgument("pattern '" + pattern + "': " + buf);
  }
  Regex r;
  r.pattern_ = pattern;
  r.re_ = std::shared_ptr<regex_t>(re, [](regex_t* p) {
    ::regfree(p);
    delete p;
  });
  return r;
}

bool Regex::Search(const std::string& text) const {
  if (!re_) return false;
  if (text.find('\0') == std::string::npos) return ::regexec(re_.get(), text.c_str(), 0, nullptr, 0) == 0;
  // regexec stops at the first NUL, so a NUL byte a program printed would
  // hide whatever follows it on the line (a NaN, a retryable error). Each
  // NUL-separated piece is searched; ^ and $ still mean the line's ends.
  size_t start = 0;
  while (true) {
    size_t nul = text.find('\0', start);
    std::string piece = text.substr(start, nul == std::string::npos ? std::string::npos : nul - start);
    int flags = (start > 0 ? REG_NOTBOL : 0) | (nul != std::string::npos ? REG_NOTEOL : 0);
    if (::regexec(re_.get(), piece.c_str(), 0, nullptr, flags) == 0) return true;
    if (nul == std::string::npos) return false;
    start = nul + 1;
  }
}

}  // namespace preflight
