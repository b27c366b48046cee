// Output-line patterns for preflight-run: POSIX extended regular expressions
// as glibc implements them (so \b, \w, \< and \> work too). Chosen over
// std::regex, which took ~2 us a line here against ~0.25 us for regexec:
// the wrapper matches every line a job prints (bench/run_overhead.sh).
#pragma once

#include <regex.h>

#include <memory>
#include <string>

#include "preflight/status.h"

namespace preflight {

class Regex {
 public:
  // Errors name the pattern and carry regerror's text.
  static Expected<Regex> Compile(const std::string& pattern);
  // True if the pattern matches anywhere in `text`, NUL bytes included (a
  // match does not span a NUL). Thread-compatible.
  bool Search(const std::string& text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  std::shared_ptr<regex_t> re_;
};

}  // namespace preflight
