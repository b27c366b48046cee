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
  return re_ && ::regexec(re_.get(), text.c_str(), 0, nullptr, 0) == 0;
}

}  // namespace preflight
