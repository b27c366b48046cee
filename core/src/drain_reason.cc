#include "preflight/drain_reason.h"

#include <cstring>

#include "preflight/text.h"

namespace preflight {
namespace {

// Bounds on the parts never cut by the length rule: together (with the
// longest owner and the markers) 197 characters, so a finding always fits.
constexpr size_t kCheckMax = 20, kDeviceMax = 60, kValueMax = 32, kThresholdMax = 48;
constexpr const char* kGot = " [got ";
constexpr const char* kWant = " [want ";
constexpr const char* kWantInner = ", want ";
constexpr const char* kMore = "; also: ";

// One line of printable UTF-8: CR/LF to spaces, any other byte outside
// printable UTF-8 as "\xNN" (text.h: a path or file name is the user's
// bytes, ESC sequences and 0xff included); `bound` bytes at most, cut on a
// character boundary ("..." ends a cut one).
std::string Clean(std::string s, size_t bound = std::string::npos) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  s = PrintableText(s);
  if (s.size() > bound) s = Utf8Cut(s, bound);
  return s;
}

// The check name as one token (the parser ends it at the first ' ' or ':').
std::string CheckToken(const std::string& check) {
  std::string s(Utf8Prefix(Clean(check), kCheckMax));
  for (char& c : s)
    if (c == ' ' || c == ':') c = '_';
  return s.empty() ? std::string("unknown") : s;
}

// The device without ": " (the parser ends the device at the first one).
// A longer one loses its middle, not its end: a path's telling part is its
// last components ("/srv/cluster/.../nodes/n1/scratch"), and a cut falls
// on a '/' where one is near.
std::string DeviceText(const std::string& device) {
  std::string s = Clean(device);
  for (size_t p; (p = s.find(": ")) != std::string::npos;) s.erase(p + 1, 1);
  if (s.size() <= kDeviceMax) return s;
  constexpr size_t kHead = 20, kTail = kDeviceMax - kHead - 3;
  std::string head(Utf8Prefix(s, kHead)), tail(Utf8Suffix(s, kTail));
  size_t slash = head.rfind('/');
  if (slash != std::string::npos && slash > 0) head.resize(slash + 1);
  slash = tail.find('/');
  if (slash != std::string::npos && slash + 1 < tail.size()) tail.erase(0, slash);
  return head + "..." + tail;
}

// Text without a figure marker or "]" that the parser would take for its own.
std::string FigureText(const std::string& v, size_t bound) {
  std::string s = Clean(v, bound);
  for (char& c : s)
    if (c == ']' || c == '[') c = c == ']' ? ')' : '(';
  return s;
}

// kNone is written as "node" (drain_reason.h).
std::string OwnerWord(FaultOwner o) { return FaultOwnerName(o == FaultOwner::kNone ? FaultOwner::kNode : o); }

bool StartsWith(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

// "CHECK[ DEVICE]: FINDING" (the head of both grammars, after the prefix).
void SplitCheckDeviceFinding(const std::string& body, DrainReason* r) {
  size_t end = body.find_first_of(" :");
  r->check = body.substr(0, end);
  if (end == std::string::npos) return;
  if (body.compare(end, 2, ": ") == 0) {
    r->finding = body.substr(end + 2);
    return;
  }
  size_t colon = body.find(": ", end);
  if (body[end] == ' ' && colon != std::string::npos) {
    r->device = body.substr(end + 1, colon - end - 1);
    r->finding = body.substr(colon + 2);
  } else {
    r->finding = body.substr(end + 1);  // "prolog failed": no ": " at all
  }
}

std::optional<DrainReason> ParseLegacy(const std::string& text) {
  DrainReason r;
  r.legacy = true;
  std::string body = text.substr(std::strlen(kLegacyReasonPrefix));
  auto nccl = [&](const char* what, const char* check) {
    std::string rest = body.substr(std::strlen(what));
    size_t colon = rest.find(": ");
    r.check = check;
    r.device = rest.substr(0, colon);
    if (colon != std::string::npos) r.finding = rest.substr(colon + 2);
  };
  if (StartsWith(body, "nccl intra-node ")) {
    nccl("nccl intra-node ", reason_check::kNcclIntra);
  } else if (StartsWith(body, "nccl inter-node ")) {
    nccl("nccl inter-node ", reason_check::kNcclInter);
  } else if (StartsWith(body, "config: ")) {  // --stage's config fault: "preflight: config: stage_dir ..."
    r.owner = FaultOwner::kConfig;
    r.check = reason_check::kStage;
    r.finding = body.substr(8);
  } else if (StartsWith(body, "config ")) {  // "preflight: config FILE:LINE: key ..."
    r.owner = FaultOwner::kConfig;
    r.check = reason_check::kConfig;
    r.finding = body.substr(7);
  } else if (StartsWith(body, "stage ")) {
    r.check = reason_check::kStage;
    r.finding = body.substr(6);
  } else {
    SplitCheckDeviceFinding(body, &r);  // "gpu.ecc GPU2 0000:3a:00.0: ...; ib.port ..."
  }
  if (r.check.empty()) r.check = "unknown";
  return r;
}

}  // namespace

std::string FormatReason(const DrainReason& r, size_t max) {
  std::string head = std::string(kReasonPrefix) + OwnerWord(r.owner) + "] " + CheckToken(r.check);
  std::string device = DeviceText(r.device);
  if (!device.empty()) head += " " + device;
  head += ": ";
  std::string figure;
  std::string value = FigureText(r.figure, kValueMax), threshold = FigureText(r.threshold, kThresholdMax);
  if (!value.empty()) figure = kGot + value + (threshold.empty() ? "" : kWantInner + threshold) + "]";
  else if (!threshold.empty()) figure = kWant + threshold + "]";
  std::string finding = Clean(r.finding), more = r.more.empty() ? "" : kMore + Clean(r.more);
  // The one cut rule: `more` goes first, then the finding's tail ("...").
  size_t fixed = head.size() + figure.size();
  if (fixed + finding.size() + more.size() > max) {
    size_t room = max > fixed + finding.size() ? max - fixed - finding.size() : 0;
    more = room >= std::strlen(kMore) + 16 ? Utf8Cut(more, room) : std::string();
  }
  if (fixed + finding.size() > max) {
    size_t room = max > fixed + 3 ? max - fixed - 3 : 0;
    finding = std::string(Utf8Prefix(finding, room)) + "...";
  }
  std::string s = head + finding + figure + more;
  if (s.size() > max) s = std::string(Utf8Prefix(s, max));  // only when max is below the documented bound
  return s;
}

std::optional<DrainReason> ParseReason(const std::string& text) {
  if (StartsWith(text, kLegacyReasonPrefix)) return ParseLegacy(text);
  if (!StartsWith(text, kReasonPrefix)) return std::nullopt;
  size_t close = text.find("] ", std::strlen(kReasonPrefix));
  if (close == std::string::npos) return std::nullopt;
  std::string owner = text.substr(std::strlen(kReasonPrefix), close - std::strlen(kReasonPrefix));
  DrainReason r;
  std::optional<FaultOwner> o = FaultOwnerFromName(owner);
  if (!o || *o == FaultOwner::kNone) return std::nullopt;
  r.owner = *o;
  SplitCheckDeviceFinding(text.substr(close + 2), &r);
  if (r.check.empty()) return std::nullopt;
  // finding [figure] [more]: the first figure marker that closes, then "; also: ".
  std::string& f = r.finding;
  size_t fig = f.find(kGot);
  size_t want = f.find(kWant);
  if (want != std::string::npos && (fig == std::string::npos || want < fig)) fig = want;
  size_t fig_end = fig == std::string::npos ? std::string::npos : f.find(']', fig);
  size_t tail;
  if (fig_end != std::string::npos) {
    std::string inner = f.substr(fig, fig_end - fig);
    if (StartsWith(inner, kGot)) {
      inner = inner.substr(std::strlen(kGot));
      size_t w = inner.find(kWantInner);
      r.figure = inner.substr(0, w);
      if (w != std::string::npos) r.threshold = inner.substr(w + std::strlen(kWantInner));
    } else {
      r.threshold = inner.substr(std::strlen(kWant));
    }
    tail = fig_end + 1;
  } else {
    fig = f.find(kMore);
    tail = fig;
  }
  if (tail != std::string::npos) {
    std::string rest = f.substr(tail);
    if (StartsWith(rest, kMore)) r.more = rest.substr(std::strlen(kMore));
    f.resize(fig);
  }
  return r;
}

bool IsPreflightReason(const std::string& text) { return ParseReason(text).has_value(); }

bool IsNcclReason(const DrainReason& r) { return StartsWith(r.check, "nccl."); }

}  // namespace preflight
