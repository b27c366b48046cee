// report.json (ReportJson, accept_report.h): every field of the report, in
// the order accept-report.schema.json documents.
#include <cstdint>

#include "preflight/accept_report.h"
#include "preflight/json.h"

namespace preflight::accept {

namespace {
void WriteStrings(JsonWriter& w, const std::string& key, const std::vector<std::string>& v) {
  w.Key(key).BeginArray();
  for (const auto& s : v) w.String(s);
  w.EndArray();
}

// One sweep: a curve of the all-reduce, or another operation's.
void WriteCurve(JsonWriter& w, const Curve& c) {
  w.BeginObject().Field("op", c.op).Field("nodes", c.nodes);
  WriteStrings(w, "node_names", c.node_names);
  w.Field("ranks", c.ranks).Field("backend", c.backend).Field("profile", c.profile);
  w.Field("profile_threshold_Bps", c.profile_threshold).Field("threshold_source", c.threshold_source);
  w.Field("busbw_Bps", c.Busbw()).Field("worse_busbw_Bps", c.worse_busbw).Field("error", c.error)
      .Field("reproduce", c.reproduce);
  w.Key("sizes").BeginArray();
  for (const auto& s : c.sizes)
    w.BeginObject().Field("bytes", static_cast<int64_t>(s.bytes)).Field("busbw_Bps", s.busbw)
        .Field("wrong", static_cast<int64_t>(s.wrong)).EndObject();
  w.EndArray().EndObject();
}
}  // namespace

std::string ReportJson(const Report& r) {
  JsonWriter w;
  w.BeginObject();
  w.Field("schema", "preflight-accept-report/1");
  w.Field("tool", "preflight accept");
  w.Field("version", r.tool_version);
  w.Field("created", r.created);
  w.Field("job_id", r.job_id);
  w.Field("level", r.level);
  w.Field("verdict", ReportWord(r.verdict));
  WriteStrings(w, "reasons", r.reasons);
  WriteStrings(w, "notes", r.notes);
  WriteStrings(w, "nodes", r.nodes);
  WriteStrings(w, "storage_paths", r.storage_paths);
  w.Key("thresholds").BeginObject();
  const Thresholds& t = r.thresholds;
  w.Field("scaling_warn", t.scaling_warn).Field("scaling_fail", t.scaling_fail);
  w.Field("straggler_fraction", t.straggler_fraction).Field("seq_write_Bps", t.seq_write);
  w.Field("seq_read_Bps", t.seq_read).Field("rand_read_iops", t.rand_read_iops);
  w.Field("ckpt_write_Bps", t.ckpt_write).Field("create_per_s", t.create_per_s);
  w.Field("storage_fraction", t.storage_fraction);
  w.Field("train_fraction", t.train_fraction).Field("train_dip", t.train_dip).Field("train_gpu_util", t.train_gpu_util);
  w.EndObject();
  w.Key("stages").BeginArray();
  for (const auto& s : r.stages) {
    w.BeginObject().Field("name", s.name).Field("verdict", ReportWord(s.verdict)).Field("seconds", s.seconds);
    w.Field("budget_seconds", s.budget_seconds);
    WriteStrings(w, "notes", s.notes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("collective").BeginObject();
  w.Field("scaling", r.scaling_text);
  w.Key("curves").BeginArray();
  for (const auto& c : r.curves) WriteCurve(w, c);
  w.EndArray();
  w.Key("operations").BeginArray();
  for (const auto& c : r.op_curves) WriteCurve(w, c);
  w.EndArray();
  w.Key("pairs").BeginArray();
  for (const auto& p : r.pairs)
    w.BeginObject().Field("a", p.a).Field("b", p.b).Field("busbw_Bps", p.busbw).Field("worse_busbw_Bps", p.worse)
        .Field("pass", p.pass)
        .Field("message", p.message).EndObject();
  w.EndArray();
  WriteStrings(w, "stragglers", r.stragglers);
  w.Field("straggler_text", r.straggler_text);
  w.EndObject();
  w.Key("storage").BeginArray();
  for (const auto& s : r.storage) {
    w.BeginObject().Field("path", s.path).Field("scope", s.scope).Field("node", s.node);
    w.Field("seq_write_Bps", s.seq_write).Field("seq_read_Bps", s.seq_read).Field("rand_read_iops", s.rand_read_iops);
    w.Field("ckpt_write_Bps", s.ckpt_write).Field("create_per_s", s.create_per_s);
    w.Field("read_files_per_s", s.read_files_per_s).Field("stat_per_s", s.stat_per_s).Field("error", s.error);
    WriteStrings(w, "reproduce", s.reproduce);
    w.EndObject();
  }
  w.EndArray();
  w.Key("train").BeginObject().Field("command", r.train.command).Field("seconds", r.train.seconds);
  w.Field("error", r.train.error).Key("nodes").BeginArray();
  for (const auto& n : r.train.nodes) {
    w.BeginObject().Field("node", n.node).Field("median_steps_per_s", n.median_rate);
    w.Field("last_step", static_cast<int64_t>(n.last_step)).Field("loss_finite", n.loss_finite);
    if (n.has_loss) w.Field("last_loss", n.last_loss);
    w.Field("end", n.end).Field("output_lines", static_cast<int64_t>(n.lines)).Field("last_line", n.last);
    w.Field("gpus", n.gpus).Field("gpu_util_percent", n.gpu_util).Field("gpu_power_w", n.gpu_power_w);
    w.Field("gpu_note", n.gpu_note);
    WriteStrings(w, "errors", n.errors);
    w.Key("rate").BeginArray();
    for (const auto& [t, v] : n.rate) w.BeginArray().Number(t).Number(v).EndArray();
    w.EndArray();
    const TrainNode::Checkpoint& c = n.ckpt;
    w.Key("checkpoint").BeginObject().Field("tried", c.tried).Field("off", c.off).Field("saved", c.saved);
    w.Field("saved_step", static_cast<int64_t>(c.saved_step)).Field("resumed", c.resumed).Field("from", c.from);
    w.Field("first_step", static_cast<int64_t>(c.first_step)).Field("resume_step", static_cast<int64_t>(c.resume_step));
    w.Field("resume_seconds", c.resume_time).Field("resume_end", c.resume_end).Field("resume_last_line", c.resume_last);
    w.Field("left", c.left).Field("saved_local", c.saved_local).Field("from_path", c.from_path);
    w.Field("from_tier", c.from_tier).EndObject().EndObject();
  }
  w.EndArray().Field("resume_seconds", r.train.resume_seconds).Field("tier", r.train.tier);
  w.Field("convention", r.train.convention).EndObject();
  w.Key("node_rows").BeginArray();
  for (const auto& n : r.node_rows) {
    w.BeginObject().Field("node", n.node).Field("verdict", ReportWord(n.verdict));
    WriteStrings(w, "reasons", n.reasons);
    w.EndObject();
  }
  w.EndArray();
  w.Key("figures").BeginArray();
  for (const auto& f : r.figures) {
    w.BeginObject().Field("stage", f.stage).Field("name", f.name).Field("node", f.node).Field("path", f.path);
    w.Field("unit", f.unit).Field("value", f.value).Field("threshold", f.threshold);
    w.Field("threshold_source", f.threshold_source).Field("reference", f.reference);
    w.Field("verdict", ReportWord(f.verdict)).Field("reason", f.reason).Field("reproduce", f.reproduce);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

}  // namespace preflight::accept
