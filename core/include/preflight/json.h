// A small streaming JSON writer: enough for result files, no parser.
// Output is deterministic (keys in call order), so golden tests can diff it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace preflight {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(const std::string& k);
  JsonWriter& String(const std::string& v);
  JsonWriter& Number(double v);
  JsonWriter& Int(int64_t v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Shorthands for "key": value.
  JsonWriter& Field(const std::string& k, const std::string& v) { return Key(k).String(v); }
  JsonWriter& Field(const std::string& k, const char* v) { return Key(k).String(v); }
  JsonWriter& Field(const std::string& k, double v) { return Key(k).Number(v); }
  JsonWriter& Field(const std::string& k, int64_t v) { return Key(k).Int(v); }
  JsonWriter& Field(const std::string& k, int v) { return Key(k).Int(v); }
  JsonWriter& Field(const std::string& k, bool v) { return Key(k).Bool(v); }
  const std::string& str() const { return out_; }

 private:
  void Separate();
  void Newline();
  bool pretty_;
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool after_key_ = false;
};

// `s` as the inside of a JSON string: valid JSON (and so valid UTF-8) for
// any bytes; a byte outside a valid UTF-8 character becomes U+FFFD.
std::string JsonEscape(const std::string& s);

}  // namespace preflight
