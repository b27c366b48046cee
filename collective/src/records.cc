#include "preflight/collective_records.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "preflight/json.h"

namespace preflight::collective {

double ResultRecord::WorseSample() const {
  return samples.size() > 1 ? *std::min_element(samples.begin(), samples.end()) : 0;
}

std::string RecordLine(const ResultRecord& r) {
  JsonWriter w(false);
  w.BeginObject();
  w.Field("tool", "preflight-nccl");
  w.Field("kind", r.kind);
  w.Key("nodes").BeginArray();
  for (const auto& n : r.nodes) w.String(n);
  w.EndArray();
  w.Field("verdict", r.pass ? "pass" : "fail");
  w.Field("busbw_Bps", r.busbw);
  w.Field("threshold_Bps", r.threshold);
  w.Field("message", r.message);
  if (!r.drain_reason.empty()) w.Field("drain_reason", r.drain_reason);
  if (!r.samples.empty()) {
    w.Key("samples_Bps").BeginArray();
    for (double s : r.samples) w.Number(s);
    w.EndArray();
  }
  w.EndObject();
  return kRecordPrefix + w.str() + "\n";
}

namespace {

bool FromJson(const std::string& text, ResultRecord* r, std::string* why) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) { *why = "not a JSON object"; return false; }
  if (j.value("tool", "") != "preflight-nccl") { *why = "not a preflight-nccl record"; return false; }
  auto str = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end()) return true;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  auto num = [&](const char* k, double* out) {
    auto it = j.find(k);
    if (it == j.end()) return true;
    if (!it->is_number()) return false;
    *out = it->get<double>();
    return true;
  };
  std::string verdict;
  if (!str("kind", &r->kind) || !str("verdict", &verdict) || !str("message", &r->message) ||
      !str("drain_reason", &r->drain_reason) || !num("busbw_Bps", &r->busbw) || !num("threshold_Bps", &r->threshold)) {
    *why = "a field has the wrong type";
    return false;
  }
  if (verdict != "pass" && verdict != "fail") { *why = "verdict '" + verdict + "' (expected pass or fail)"; return false; }
  r->pass = verdict == "pass";
  auto samples = j.find("samples_Bps");
  if (samples != j.end()) {
    if (!samples->is_array()) { *why = "samples_Bps is not an array"; return false; }
    for (const auto& s : *samples) {
      if (!s.is_number()) { *why = "a sample is not a number"; return false; }
      r->samples.push_back(s.get<double>());
    }
  }
  auto nodes = j.find("nodes");
  if (nodes != j.end()) {
    if (!nodes->is_array()) { *why = "nodes is not an array"; return false; }
    for (const auto& n : *nodes) {
      if (!n.is_string()) { *why = "a node is not a string"; return false; }
      r->nodes.push_back(n.get<std::string>());
    }
  }
  return true;
}

}  // namespace

std::string NodeRecordLines(const std::string& kind, const std::string& node, const std::string& text) {
  const std::string head = kNodeRecordPrefix + kind + " " + node + " ";
  std::string out;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    if (text[b] == '{') out += head + text.substr(b, e - b) + "\n";
    b = e + 1;
  }
  if (out.empty()) out = head + (text.rfind("-", 0) == 0 ? text.substr(0, text.find('\n')) : "- no JSON line") + "\n";
  return out;
}

namespace {

// "#node-record KIND NODE TEXT" into p; false when the line is malformed.
bool AddNodeRecord(const std::string& body, ParsedOutput* p) {
  size_t s1 = body.find(' ');
  size_t s2 = s1 == std::string::npos ? s1 : body.find(' ', s1 + 1);
  if (s2 == std::string::npos || s1 == 0 || s2 == s1 + 1 || s2 + 1 >= body.size()) return false;
  NodeRecordSet& set = p->node_records[body.substr(0, s1)];
  std::string node = body.substr(s1 + 1, s2 - s1 - 1), text = body.substr(s2 + 1);
  if (text[0] == '{') set.lines.push_back(text);
  else if (text[0] == '-') set.missing += (set.missing.empty() ? "" : ",") + node;
  else return false;
  return true;
}

}  // namespace

ParsedOutput ParseOutput(const std::string& output) {
  ParsedOutput p;
  const std::string prefix = kRecordPrefix;
  size_t b = 0;
  while (b < output.size()) {
    size_t e = output.find('\n', b);
    size_t end = e == std::string::npos ? output.size() : e + 1;
    std::string line = output.substr(b, end - b);
    b = end;
    if (line.rfind(kNodeRecordPrefix, 0) == 0) {
      std::string body = line.substr(std::string(kNodeRecordPrefix).size());
      if (!body.empty() && body.back() == '\n') body.pop_back();
      if (!AddNodeRecord(body, &p)) p.errors.push_back("malformed node record: " + body.substr(0, 120));
      continue;
    }
    if (line.rfind(prefix, 0) != 0) {
      p.display += line;
      continue;
    }
    std::string body = line.substr(prefix.size());
    if (!body.empty() && body.back() == '\n') body.pop_back();
    ResultRecord r;
    std::string why;
    if (FromJson(body, &r, &why)) p.records.push_back(std::move(r));
    else p.errors.push_back(why + ": " + body.substr(0, 120));
  }
  return p;
}

const ResultRecord* FindRecord(const ParsedOutput& p, const std::string& kind, const std::vector<std::string>& nodes) {
  for (const auto& r : p.records)
    if (r.kind == kind && r.nodes == nodes) return &r;
  return nullptr;
}

}  // namespace preflight::collective
