#include "preflight/hostlist.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace preflight {
namespace {

// The text as an error message shows it: bytes outside printable ASCII
// escaped, at most 120 characters.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 120)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  if (s.size() > 120) out += "...";
  return out;
}

struct Range {
  uint64_t lo, hi;
  size_t width;  // zero padding: "08-10" keeps two digits
};
// One comma item: literal[ranges]literal[ranges]...literal.
struct Item {
  std::vector<std::string> literals;   // groups.size() + 1 of them
  std::vector<std::vector<Range>> groups;
};

Expected<uint64_t> Number(const std::string& s) {
  if (s.empty() || s.size() > 18) return Status::InvalidArgument("");
  uint64_t n = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return Status::InvalidArgument("");
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

Status ParseItem(const std::string& whole, const std::string& item, Item* out) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("hostlist '" + Printable(whole) + "': " + why); };
  std::string lit;
  size_t i = 0;
  while (i < item.size()) {
    char c = item[i];
    if (c == ']') return bad("unbalanced ']'");
    if (c != '[') { lit += c; ++i; continue; }
    size_t rb = item.find(']', i + 1);
    if (rb == std::string::npos) return bad("unbalanced '['");
    std::string body = item.substr(i + 1, rb - i - 1);
    if (body.find('[') != std::string::npos) return bad("nested '['");
    if (body.empty()) return bad("empty brackets '[]'");
    std::vector<Range> ranges;
    size_t p = 0;
    while (p <= body.size()) {
      size_t comma = body.find(',', p);
      std::string r = body.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
      size_t dash = r.find('-');
      std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
      auto lo = Number(a), hi = Number(b);
      if (!lo || !hi || *hi < *lo) return bad("bad range '" + Printable(r) + "' (expected N or LO-HI, LO <= HI)");
      ranges.push_back(Range{*lo, *hi, a.size()});
      if (comma == std::string::npos) break;
      p = comma + 1;
    }
    out->literals.push_back(lit);
    lit.clear();
    out->groups.push_back(std::move(ranges));
    i = rb + 1;
  }
  out->literals.push_back(lit);
  return Status::Ok();
}

// Names the item expands to, or more than `limit` when it would exceed it
// (never overflows: stops multiplying past the limit).
uint64_t CountNames(const Item& item, uint64_t limit) {
  uint64_t total = 1;
  for (const auto& g : item.groups) {
    uint64_t n = 0;
    for (const auto& r : g) {
      n += r.hi - r.lo + 1;  // each term < 10^18: no overflow in a handful of ranges
      if (n > limit) return limit + 1;
    }
    if (total > limit / n) return limit + 1;
    total *= n;
  }
  return total;
}

void Expand(const Item& item, size_t g, const std::string& prefix, std::vector<std::string>* out) {
  std::string head = prefix + item.literals[g];
  if (g == item.groups.size()) { out->push_back(head); return; }
  for (const auto& r : item.groups[g])
    for (uint64_t n = r.lo; n <= r.hi; ++n) {
      std::string num = std::to_string(n);
      if (num.size() < r.width) num = std::string(r.width - num.size(), '0') + num;  // keep padding
      Expand(item, g + 1, head + num, out);
    }
}

}  // namespace

Status ValidNodeName(const std::string& name) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("node name '" + Printable(name) + "': " + why); };
  if (name.empty()) return bad("empty");
  if (name.size() > kMaxNodeNameLength)
    return bad("longer than " + std::to_string(kMaxNodeNameLength) + " characters");
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.')
      return bad("only letters, digits, '-', '_' and '.' may appear in a node name");
  if (name[0] == '.') return bad("may not start with '.'");
  return Status::Ok();
}

Expected<std::vector<std::string>> ExpandHostlist(const std::string& s) {
  if (s.size() > kMaxHostlistLength)
    return Status::InvalidArgument("hostlist of " + std::to_string(s.size()) + " characters: longer than the limit of " +
                                   std::to_string(kMaxHostlistLength));
  // Split at top-level commas.
  std::vector<std::string> texts;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return Status::InvalidArgument("hostlist '" + Printable(s) + "': unbalanced ']'");
    if (depth > 1) return Status::InvalidArgument("hostlist '" + Printable(s) + "': nested '['");
    if (c == ',' && depth == 0) { texts.push_back(cur); cur.clear(); continue; }
    cur += c;
  }
  if (depth != 0) return Status::InvalidArgument("hostlist '" + Printable(s) + "': unbalanced '['");
  texts.push_back(cur);
  // Parse and count everything before expanding anything.
  std::vector<Item> items;
  uint64_t total = 0;
  for (const auto& t : texts) {
    if (t.empty()) continue;
    Item item;
    Status st = ParseItem(s, t, &item);
    if (!st.ok()) return st;
    total += CountNames(item, kMaxHostlistNames);
    if (total > kMaxHostlistNames)
      return Status::InvalidArgument("hostlist '" + Printable(s) +
                                     "': expands to more than " + std::to_string(kMaxHostlistNames) +
                                     " names (the limit)");
    items.push_back(std::move(item));
  }
  std::vector<std::string> out;
  out.reserve(total);
  for (const auto& item : items) Expand(item, 0, "", &out);
  for (const auto& name : out) {
    Status v = ValidNodeName(name);
    if (!v.ok()) return Status::InvalidArgument("hostlist '" + Printable(s) + "': " + v.message());
  }
  return out;
}

namespace {

// A name split at its last run of digits: prefix, number, suffix.
struct Numbered {
  std::string prefix, suffix;
  std::string digits;  // "" when the name has none (or too many to count)
};

Numbered SplitNumber(const std::string& name) {
  size_t end = name.find_last_of("0123456789");
  if (end == std::string::npos) return {name, "", ""};
  size_t begin = name.find_last_not_of("0123456789", end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  std::string digits = name.substr(begin, end + 1 - begin);
  if (digits.size() > 18) return {name, "", ""};
  return {name.substr(0, begin), name.substr(end + 1), digits};
}

// "1-3,7" (each number padded to `width`, 0: none) from sorted numbers.
std::string Ranges(const std::set<uint64_t>& numbers, size_t width) {
  auto text = [width](uint64_t n) {
    std::string s = std::to_string(n);
    return s.size() < width ? std::string(width - s.size(), '0') + s : s;
  };
  std::string out;
  for (auto it = numbers.begin(); it != numbers.end();) {
    uint64_t lo = *it, hi = lo;
    for (++it; it != numbers.end() && *it == hi + 1; ++it) hi = *it;
    out += (out.empty() ? "" : ",") + text(lo) + (hi == lo ? "" : "-" + text(hi));
  }
  return out;
}

}  // namespace

std::string CompressHostlist(const std::vector<std::string>& names) {
  // (prefix, suffix, width) -> numbers. A zero-padded number ("08") fixes
  // its group's width; an unpadded one of that width ("10") joins it, since
  // ExpandHostlist pads every number of a range to its first's width.
  using Key = std::tuple<std::string, std::string, size_t>;
  std::vector<Numbered> split;
  std::set<Key> padded;
  std::set<std::string> plain;
  for (const auto& n : names) {
    Numbered s = SplitNumber(n);
    if (s.digits.empty()) { plain.insert(n); continue; }
    if (s.digits.size() > 1 && s.digits[0] == '0') padded.insert({s.prefix, s.suffix, s.digits.size()});
    split.push_back(s);
  }
  std::map<Key, std::set<uint64_t>> groups;
  for (const auto& s : split) {
    Key k{s.prefix, s.suffix, s.digits.size()};
    if (!padded.count(k)) std::get<2>(k) = 0;
    groups[k].insert(std::stoull(s.digits));
  }
  std::vector<std::pair<std::string, std::string>> items;  // (sort key, text)
  for (const auto& p : plain) items.push_back({p, p});
  for (const auto& [k, numbers] : groups) {
    const auto& [prefix, suffix, width] = k;
    std::string r = Ranges(numbers, width);
    bool one = numbers.size() == 1;
    items.push_back({prefix + suffix, prefix + (one ? r : "[" + r + "]") + suffix});
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i.second;
  return out;
}

}  // namespace preflight
