#include "preflight/ckpt_record.h"

#include <nlohmann/json.hpp>

#include "preflight/json.h"

namespace preflight {

const char* CkptStateName(CkptState s) {
  switch (s) {
    case CkptState::kLocal: return "local";
    case CkptState::kPersisting: return "persisting";
    case CkptState::kDurable: return "durable";
    case CkptState::kFailed: return "failed";
  }
  return "?";
}

Expected<CkptState> ParseCkptState(const std::string& s) {
  for (CkptState c : {CkptState::kLocal, CkptState::kPersisting, CkptState::kDurable, CkptState::kFailed})
    if (s == CkptStateName(c)) return c;
  return Status::InvalidArgument("checkpoint state '" + s + "': expected local, persisting, durable or failed");
}

CkptRecord CkptRecordFromPersist(const CkptPersistRequest& req, const Expected<CkptPersistResult>& result,
                                 double start, double end) {
  CkptRecord r;
  r.name = req.name;
  r.run = req.run;
  r.node = req.node;
  r.tier = req.tier;
  r.local_time = req.complete_time;
  r.persist_start = start;
  if (!result) {
    r.state = CkptState::kFailed;
    r.error = result.status().message();
    r.persist_end = end;
    return r;
  }
  r.bytes = result->bytes;
  r.files = result->files;
  r.copy_seconds = result->seconds;
  if (result->state == CkptCommitState::kDurable) {
    r.state = CkptState::kDurable;
    r.persist_end = end;
  } else {
    r.state = CkptState::kPersisting;
    r.missing = result->missing;
  }
  return r;
}

std::string CkptRecordJson(const CkptRecord& r, bool pretty) {
  JsonWriter w(pretty);
  w.BeginObject();
  w.Field("name", r.name).Field("run", r.run).Field("node", r.node).Field("tier", r.tier);
  w.Field("state", CkptStateName(r.state));
  w.Field("bytes", static_cast<int64_t>(r.bytes)).Field("files", static_cast<int64_t>(r.files));
  w.Field("local_time", r.local_time).Field("persist_start", r.persist_start).Field("persist_end", r.persist_end);
  w.Field("copy_seconds", r.copy_seconds).Field("throughput_bytes_per_second", r.Throughput());
  w.Key("missing").BeginArray();
  for (const auto& m : r.missing) w.String(m);
  w.EndArray();
  w.Field("error", r.error);
  w.EndObject();
  return w.str();
}

Expected<CkptRecord> ParseCkptRecord(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("checkpoint record: not a JSON object");
  CkptRecord r;
  auto str = [&](const char* k, std::string* out, bool required) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return required ? Status::InvalidArgument(std::string("checkpoint record: no ") + k) : Status::Ok();
    if (!it->is_string()) return Status::InvalidArgument(std::string("checkpoint record: ") + k + " is not a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto num = [&](const char* k, double* out) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return Status::Ok();
    if (!it->is_number()) return Status::InvalidArgument(std::string("checkpoint record: ") + k + " is not a number");
    *out = it->get<double>();
    return Status::Ok();
  };
  auto count = [&](const char* k, uint64_t* out) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return Status::Ok();
    if (!it->is_number_unsigned())
      return Status::InvalidArgument(std::string("checkpoint record: ") + k + " is not a non-negative integer");
    *out = it->get<uint64_t>();
    return Status::Ok();
  };
  std::string state;
  for (Status s : {str("name", &r.name, true), str("run", &r.run, false), str("node", &r.node, false),
                   str("tier", &r.tier, false), str("state", &state, true), str("error", &r.error, false),
                   count("bytes", &r.bytes), count("files", &r.files), num("local_time", &r.local_time),
                   num("persist_start", &r.persist_start), num("persist_end", &r.persist_end),
                   num("copy_seconds", &r.copy_seconds)})
    if (!s.ok()) return s;
  auto st = ParseCkptState(state);
  if (!st) return st.status();
  r.state = *st;
  auto m = j.find("missing");
  if (m != j.end()) {
    if (!m->is_array()) return Status::InvalidArgument("checkpoint record: missing is not an array");
    for (const auto& x : *m) {
      if (!x.is_string()) return Status::InvalidArgument("checkpoint record: missing holds a non-string");
      r.missing.push_back(x.get<std::string>());
    }
  }
  return r;
}

}  // namespace preflight
