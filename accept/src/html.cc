// report.html: one self-contained file. Inline CSS and inline SVG only: no
// script, no external resource, so it opens from a mail attachment or a
// ticket on a machine with no network. Every string that comes from the run
// (node names, paths, messages, commands) goes through HtmlEscape; only the
// literal markup below is unescaped. Each plot is an <svg data-plot=NAME
// data-points=N> whose points carry class "pt", so a test can count them.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "preflight/accept_report.h"

namespace preflight::accept {

std::string HtmlEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') o += "&#xFFFD;";  // control bytes: not markup, not text
        else o += static_cast<char>(c);
    }
  }
  return o;
}

namespace {

std::string F(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

std::string SizeLabel(double b) {
  if (b >= 1 << 30) return F("%.0fG", b / (1 << 30));
  if (b >= 1 << 20) return F("%.0fM", b / (1 << 20));
  if (b >= 1 << 10) return F("%.0fK", b / (1 << 10));
  return F("%.0f", b);
}

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> xy;  // x in axis units (log2 already applied by caller), y
  std::vector<std::string> titles;            // per point tooltip (escaped here)
};

// A line plot: x positions given (already transformed), y linear from 0.
std::string LinePlot(const std::string& name, const std::string& title, const std::vector<Series>& series,
                     const std::vector<std::pair<double, std::string>>& xticks, const std::string& ylabel,
                     double yscale, const std::string& yunit) {
  size_t points = 0;
  double xmin = 1e300, xmax = -1e300, ymax = 0;
  for (const auto& s : series)
    for (const auto& p : s.xy) {
      ++points;
      xmin = std::min(xmin, p.first);
      xmax = std::max(xmax, p.first);
      ymax = std::max(ymax, p.second);
    }
  std::string o = "<h3>" + HtmlEscape(title) + "</h3>\n";
  if (points == 0) return o + "<p class=\"none\">no figures measured for this plot</p>\n";
  if (xmax == xmin) { xmin -= 1; xmax += 1; }
  if (ymax <= 0) ymax = 1;
  ymax *= 1.1;
  const double W = 640, H = 300, L = 70, R = 150, T = 15, B = 40;
  auto X = [&](double x) { return L + (x - xmin) / (xmax - xmin) * (W - L - R); };
  auto Y = [&](double y) { return H - B - y / ymax * (H - T - B); };
  o += "<svg class=\"plot\" data-plot=\"" + HtmlEscape(name) + "\" data-points=\"" + std::to_string(points) +
       "\" width=\"" + F("%.0f", W) + "\" height=\"" + F("%.0f", H) + "\" viewBox=\"0 0 " + F("%.0f", W) + " " +
       F("%.0f", H) + "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n";
  o += "<rect x=\"" + F("%.0f", L) + "\" y=\"" + F("%.0f", T) + "\" width=\"" + F("%.0f", W - L - R) + "\" height=\"" +
       F("%.0f", H - T - B) + "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double y = ymax * i / 4;
    o += "<line x1=\"" + F("%.0f", L) + "\" x2=\"" + F("%.0f", W - R) + "\" y1=\"" + F("%.1f", Y(y)) + "\" y2=\"" +
         F("%.1f", Y(y)) + "\" stroke=\"#ddd\"/>";
    o += "<text x=\"" + F("%.0f", L - 5) + "\" y=\"" + F("%.1f", Y(y) + 4) + "\" text-anchor=\"end\">" +
         F("%.3g", y / yscale) + "</text>\n";
  }
  for (const auto& [x, label] : xticks) {
    o += "<text x=\"" + F("%.1f", X(x)) + "\" y=\"" + F("%.0f", H - B + 15) + "\" text-anchor=\"middle\">" +
         HtmlEscape(label) + "</text>";
  }
  o += "\n<text x=\"12\" y=\"" + F("%.0f", T + (H - T - B) / 2) + "\" transform=\"rotate(-90 12 " +
       F("%.0f", T + (H - T - B) / 2) + ")\" text-anchor=\"middle\">" + HtmlEscape(ylabel + " (" + yunit + ")") +
       "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kPalette[i % (sizeof kPalette / sizeof *kPalette)];
    const auto& s = series[i];
    std::string pts;
    for (const auto& p : s.xy) pts += F("%.1f", X(p.first)) + "," + F("%.1f", Y(p.second)) + " ";
    o += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
    for (size_t k = 0; k < s.xy.size(); ++k) {
      o += "<circle class=\"pt\" cx=\"" + F("%.1f", X(s.xy[k].first)) + "\" cy=\"" + F("%.1f", Y(s.xy[k].second)) +
           "\" r=\"3.5\" fill=\"" + color + "\"><title>" + HtmlEscape(k < s.titles.size() ? s.titles[k] : s.label) +
           "</title></circle>";
    }
    double ly = T + 14 + 16 * i;
    o += "\n<rect x=\"" + F("%.0f", W - R + 10) + "\" y=\"" + F("%.0f", ly - 9) + "\" width=\"10\" height=\"10\" fill=\"" +
         color + "\"/><text x=\"" + F("%.0f", W - R + 25) + "\" y=\"" + F("%.0f", ly) + "\">" + HtmlEscape(s.label) +
         "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

// Bars side by side: one group per metric, one bar per path.
std::string BarPlot(const std::string& name, const std::string& title, const std::vector<std::string>& groups,
                    const std::vector<std::string>& paths, const std::vector<std::vector<double>>& v,  // [group][path]
                    const std::vector<std::string>& group_units) {
  size_t points = 0;
  for (const auto& g : v) points += g.size();
  std::string o = "<h3>" + HtmlEscape(title) + "</h3>\n";
  if (points == 0 || paths.empty()) return o + "<p class=\"none\">no figures measured for this plot</p>\n";
  const double gw = 150, H = 230, T = 15, B = 60, L = 10;
  double W = L + gw * groups.size() + 10;
  o += "<svg class=\"plot\" data-plot=\"" + HtmlEscape(name) + "\" data-points=\"" + std::to_string(points) +
       "\" width=\"" + F("%.0f", W) + "\" height=\"" + F("%.0f", H + 10 + 16 * paths.size()) + "\" viewBox=\"0 0 " +
       F("%.0f", W) + " " + F("%.0f", H + 10 + 16 * paths.size()) + "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n";
  for (size_t g = 0; g < groups.size(); ++g) {
    double gmax = 0;
    for (double x : v[g]) gmax = std::max(gmax, x);
    if (gmax <= 0) gmax = 1;
    double x0 = L + gw * g, bw = (gw - 30) / std::max<size_t>(1, paths.size());
    o += "<rect x=\"" + F("%.0f", x0) + "\" y=\"" + F("%.0f", T) + "\" width=\"" + F("%.0f", gw - 10) + "\" height=\"" +
         F("%.0f", H - T - B) + "\" fill=\"#fafafa\" stroke=\"#ccc\"/>";
    for (size_t p = 0; p < v[g].size(); ++p) {
      double h = v[g][p] / gmax * (H - T - B - 20);
      bool money = group_units[g] == "B/s";
      std::string val = money ? RateWords(v[g][p]) : F("%.4g", v[g][p]) + " " + group_units[g];
      o += "<rect class=\"pt\" x=\"" + F("%.1f", x0 + 10 + bw * p) + "\" y=\"" + F("%.1f", H - B - h) + "\" width=\"" +
           F("%.1f", bw - 4) + "\" height=\"" + F("%.1f", h) + "\" fill=\"" + kPalette[p % 8] + "\"><title>" +
           HtmlEscape(paths[p] + ": " + val) + "</title></rect>";
    }
    o += "<text x=\"" + F("%.0f", x0 + (gw - 10) / 2) + "\" y=\"" + F("%.0f", H - B + 15) + "\" text-anchor=\"middle\">" +
         HtmlEscape(groups[g]) + "</text>";
    o += "<text x=\"" + F("%.0f", x0 + (gw - 10) / 2) + "\" y=\"" + F("%.0f", H - B + 30) +
         "\" text-anchor=\"middle\" class=\"small\">max " +
         HtmlEscape(group_units[g] == "B/s" ? RateWords(gmax) : F("%.4g", gmax) + " " + group_units[g]) + "</text>\n";
  }
  for (size_t p = 0; p < paths.size(); ++p) {
    double ly = H + 2 + 16 * p;
    o += "<rect x=\"" + F("%.0f", L) + "\" y=\"" + F("%.0f", ly - 9) + "\" width=\"10\" height=\"10\" fill=\"" +
         kPalette[p % 8] + "\"/><text x=\"" + F("%.0f", L + 15) + "\" y=\"" + F("%.0f", ly) + "\">" +
         HtmlEscape(paths[p]) + "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

std::string Badge(Verdict v) {
  return std::string("<span class=\"v ") + ReportWord(v) + "\">" + ReportWord(v) + "</span>";
}

// The page head (style sheet included), the verdict, why, the notes.
std::string HeadHtml(const Report& r) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  // No resource may be fetched, even by accident (a path that looks like a URL).
  o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n";
  o += "<title>preflight accept: " + HtmlEscape(ReportWord(r.verdict)) + "</title>\n<style>\n"
       // Nothing may be wider than the page: a long hostlist, path, message
       // or command wraps anywhere, a table too wide even then scrolls in
       // its own box, a plot shrinks.
       "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}"
       ".scroll{max-width:100%;overflow-x:auto}li,p,pre{overflow-wrap:anywhere}pre{white-space:pre-wrap}"
       "svg.plot{max-width:100%;height:auto}"
       "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;"
       "overflow-wrap:anywhere}"
       "th{background:#eee;white-space:nowrap}.v{padding:1px 6px;border-radius:3px;font-weight:bold;color:#fff}"
       ".pass{background:#2a7d2a}.warn{background:#c08000}.fail{background:#b22222}.skip{background:#888}"
       "svg text{font-size:11px}svg .small{font-size:9px;fill:#555}code{font-size:90%;word-break:break-all}"
       ".none{color:#888;font-style:italic}\n</style></head><body>\n";
  o += "<h1>preflight accept " + Badge(r.verdict) + "</h1>\n<p>";
  o += std::to_string(r.nodes.size()) + " nodes, level " + HtmlEscape(r.level) + ", job " + HtmlEscape(r.job_id) +
       ", " + HtmlEscape(r.created) + ", preflight " + HtmlEscape(r.tool_version) + "</p>\n";
  if (!r.reasons.empty()) {
    o += "<h2>Findings</h2><ul>\n";
    for (const auto& why : r.reasons) o += "<li>" + HtmlEscape(why) + "</li>\n";
    o += "</ul>\n";
  }
  if (!r.notes.empty()) {
    o += "<h2>Notes</h2><ul>\n";
    for (const auto& n : r.notes) o += "<li>" + HtmlEscape(n) + "</li>\n";
    o += "</ul>\n";
  }
  return o;
}

// The stages and nodes tables.
std::string StagesHtml(const Report& r) {
  std::string o;
  o += "<h2>Stages</h2><div class=\"scroll\"><table><tr><th>stage</th><th>verdict</th><th>seconds</th><th>budget</th><th>notes</th></tr>\n";
  for (const auto& s : r.stages) {
    std::string notes;
    for (const auto& n : s.notes) notes += HtmlEscape(n) + "<br>";
    o += "<tr><td>" + HtmlEscape(s.name) + "</td><td>" + Badge(s.verdict) + "</td><td>" + F("%.1f", s.seconds) +
         "</td><td>" + F("%.0f", s.budget_seconds) + "</td><td>" + notes + "</td></tr>\n";
  }
  o += "</table></div>\n";

  o += "<h2>Nodes</h2><div class=\"scroll\"><table><tr><th>node</th><th>verdict</th><th>reasons</th></tr>\n";
  for (const auto& n : r.node_rows) {
    std::string why;
    for (const auto& w : n.reasons) why += HtmlEscape(w) + "<br>";
    if (why.empty()) why = "all figures within bounds";
    o += "<tr class=\"node " + std::string(ReportWord(n.verdict)) + "-row\"><td>" + HtmlEscape(n.node) + "</td><td>" +
         Badge(n.verdict) + "</td><td>" + why + "</td></tr>\n";
  }
  o += "</table></div>\n";
  return o;
}

// Collective: the words on scaling and the two busbw plots.
std::string CollectivePlotsHtml(const Report& r) {
  std::string o;
  o += "<h2>Collective</h2>\n<p>" + HtmlEscape(r.scaling_text) + "</p>\n";
  // One intra-node series, the node with the median figure (every node's is
  // in the table below): eight identical lines would hide the others.
  std::vector<const Curve*> shown;
  std::vector<const Curve*> intra;
  for (const auto& c : r.curves)
    if (c.nodes == 1 && c.error.empty() && !c.sizes.empty()) intra.push_back(&c);
  std::sort(intra.begin(), intra.end(), [](const Curve* a, const Curve* b) { return a->Busbw() < b->Busbw(); });
  if (!intra.empty()) shown.push_back(intra[intra.size() / 2]);
  for (const auto& c : r.curves)
    if (c.nodes > 1) shown.push_back(&c);
  std::vector<Series> by_size;
  std::vector<std::pair<double, std::string>> size_ticks;
  double smin = 1e300, smax = 0;
  for (const Curve* cp : shown) {
    const Curve& c = *cp;
    Series s;
    s.label = c.nodes == 1 ? "intra-node " + (c.node_names.empty() ? std::string() : c.node_names[0])
                           : std::to_string(c.nodes) + " nodes";
    for (const auto& p : c.sizes) {
      if (p.bytes == 0) continue;
      s.xy.push_back({std::log2(static_cast<double>(p.bytes)), p.busbw / 1e9});
      s.titles.push_back(s.label + ", " + SizeLabel(p.bytes) + ": " + RateWords(p.busbw) +
                         (p.wrong ? ", " + std::to_string(p.wrong) + " wrong" : ""));
      smin = std::min(smin, static_cast<double>(p.bytes));
      smax = std::max(smax, static_cast<double>(p.bytes));
    }
    if (!s.xy.empty()) by_size.push_back(s);
  }
  if (smax > 0)
    for (double b = smin; b <= smax * 1.01; b *= (smax / smin > 4096 ? 16 : 4)) size_ticks.push_back({std::log2(b), SizeLabel(b)});
  o += LinePlot("busbw_vs_size", "busbw versus message size, per node count", by_size, size_ticks, "busbw", 1, "GB/s");
  Series by_nodes;
  by_nodes.label = "busbw";
  std::vector<std::pair<double, std::string>> node_ticks;
  for (const Curve* cp : shown) {
    const Curve& c = *cp;
    if (!c.error.empty() || c.sizes.empty()) continue;
    by_nodes.xy.push_back({std::log2(static_cast<double>(c.nodes)), c.Busbw() / 1e9});
    std::string label = c.nodes == 1 ? "intra" : std::to_string(c.nodes);
    by_nodes.titles.push_back(label + ": " + RateWords(c.Busbw()));
    node_ticks.push_back({std::log2(static_cast<double>(c.nodes)), label});
  }
  std::vector<Series> nodes_series;
  if (!by_nodes.xy.empty()) nodes_series.push_back(by_nodes);
  o += LinePlot("busbw_vs_nodes", "busbw versus node count (largest size)", nodes_series, node_ticks, "busbw", 1, "GB/s");
  return o;
}

// Collective: every curve, and the ring pairs.
std::string CollectiveTablesHtml(const Report& r) {
  std::string o;
  o += "<div class=\"scroll\"><table><tr><th>nodes</th><th>busbw</th><th>backend</th><th>profile</th><th>reproduce</th></tr>\n";
  for (const auto& c : r.curves) {
    std::string prof = c.profile.empty() ? "none applies" + (c.threshold_source.empty() ? "" : " (" + c.threshold_source + ")")
                                         : c.profile + ": " + RateWords(c.profile_threshold);
    o += "<tr><td>" + (c.nodes == 1 ? std::string("intra-node ") + HtmlEscape(c.node_names.empty() ? "" : c.node_names[0])
                                    : std::to_string(c.nodes)) +
         "</td><td>" + (c.error.empty() ? HtmlEscape(RateWords(c.Busbw())) : "failed: " + HtmlEscape(c.error)) +
         "</td><td>" + HtmlEscape(c.backend) + "</td><td>" + HtmlEscape(prof) + "</td><td><code>" +
         HtmlEscape(c.reproduce) + "</code></td></tr>\n";
  }
  o += "</table></div>\n";
  if (!r.op_curves.empty()) {
    o += "<h3>Other collectives</h3><div class=\"scroll\"><table><tr><th>operation</th><th>nodes</th><th>busbw</th>"
         "<th>reproduce</th></tr>\n";
    for (const auto& c : r.op_curves)
      o += "<tr><td>" + HtmlEscape(c.op) + "</td><td>" + std::to_string(c.nodes) + "</td><td>" +
           (c.error.empty() ? HtmlEscape(RateWords(c.Busbw())) : "failed: " + HtmlEscape(c.error)) + "</td><td><code>" +
           HtmlEscape(c.reproduce) + "</code></td></tr>\n";
    o += "</table></div>\n";
  }
  if (!r.pairs.empty()) {
    o += "<h3>Ring pairs</h3><div class=\"scroll\"><table><tr><th>pair</th><th>busbw</th><th>verdict</th></tr>\n";
    for (const auto& p : r.pairs) {
      bool slow = std::find(r.stragglers.begin(), r.stragglers.end(), p.a) != r.stragglers.end() ||
                  std::find(r.stragglers.begin(), r.stragglers.end(), p.b) != r.stragglers.end();
      o += "<tr><td>" + HtmlEscape(p.a + " - " + p.b) + "</td><td>" + HtmlEscape(RateWords(p.busbw)) + "</td><td>" +
           Badge(!p.pass ? Verdict::kFail : slow ? Verdict::kWarn : Verdict::kPass) + "</td></tr>\n";
    }
    o += "</table></div>\n";
    if (!r.straggler_text.empty()) o += "<pre>" + HtmlEscape(r.straggler_text) + "</pre>\n";
  }
  return o;
}

// Storage: the one-node figures of every path side by side, then the table.
std::string StorageHtml(const Report& r) {
  std::string o;
  o += "<h2>Storage</h2>\n";
  std::vector<std::string> paths;
  std::vector<const StorageFigures*> one;
  for (const auto& s : r.storage)
    if (s.scope == "one node" && s.error.empty()) { paths.push_back(s.path); one.push_back(&s); }
  std::vector<std::string> groups = {"seq write", "seq read", "ckpt write", "rand 4K read", "create", "stat"};
  std::vector<std::string> units = {"B/s", "B/s", "B/s", "IOPS", "files/s", "ops/s"};
  std::vector<std::vector<double>> vals(groups.size());
  for (const auto* s : one) {
    vals[0].push_back(s->seq_write);
    vals[1].push_back(s->seq_read);
    vals[2].push_back(s->ckpt_write);
    vals[3].push_back(s->rand_read_iops);
    vals[4].push_back(s->create_per_s);
    vals[5].push_back(s->stat_per_s);
  }
  o += BarPlot("storage_tiers", "storage tiers side by side (one node alone)", groups, paths, vals, units);
  o += "<div class=\"scroll\"><table><tr><th>path</th><th>scope</th><th>node</th><th>seq write</th><th>seq read</th><th>rand 4K</th>"
       "<th>ckpt write</th><th>create</th><th>read files</th><th>stat</th></tr>\n";
  for (const auto& s : r.storage) {
    o += "<tr><td>" + HtmlEscape(s.path) + "</td><td>" + HtmlEscape(s.scope) + "</td><td>" + HtmlEscape(s.node) + "</td>";
    if (!s.error.empty()) {
      o += "<td colspan=\"7\">" + Badge(Verdict::kFail) + " " + HtmlEscape(s.error) + "</td></tr>\n";
      continue;
    }
    o += "<td>" + HtmlEscape(RateWords(s.seq_write)) + "</td><td>" + HtmlEscape(RateWords(s.seq_read)) + "</td><td>" +
         F("%.0f", s.rand_read_iops) + " IOPS</td><td>" + HtmlEscape(RateWords(s.ckpt_write)) + "</td><td>" +
         F("%.0f", s.create_per_s) + "/s</td><td>" + F("%.0f", s.read_files_per_s) + "/s</td><td>" +
         F("%.0f", s.stat_per_s) + "/s</td></tr>\n";
  }
  o += "</table></div>\n";
  return o;
}

// Every figure with its verdict, threshold and command.
// The training run: step rate over time, a line per node (past 12 nodes the
// 8 slowest, the median and the fastest; every node is in the table).
std::string TrainHtml(const Report& r) {
  const TrainRun& t = r.train;
  std::string o = "<h2>Training</h2>\n";
  if (t.command.empty()) return o + "<p class=\"none\">" + HtmlEscape(t.error.empty() ? "not run" : t.error) + "</p>\n";
  o += "<p><code>" + HtmlEscape(t.command) + "</code> on every node at once for " + F("%.0f", t.seconds) + " s" +
       (t.resume_seconds > 0 ? ", stopped at the bound like a preemption (checkpoint) and resumed" : "") +
       (t.tier.empty() ? "" : ", its checkpoints made durable on the shared tier <code>" + HtmlEscape(t.tier) + "</code>") +
       ".</p>\n";
  std::vector<const TrainNode*> shown;
  for (const auto& n : t.nodes) shown.push_back(&n);
  std::sort(shown.begin(), shown.end(), [](const TrainNode* a, const TrainNode* b) { return a->median_rate < b->median_rate; });
  if (shown.size() > 12) shown = {shown[0], shown[1], shown[2], shown[3], shown[4], shown[5], shown[6], shown[7],
                                  shown[shown.size() / 2], shown.back()};
  std::vector<Series> series;
  double tmax = 0;
  for (const TrainNode* n : shown) {
    Series s;
    s.label = n->node;
    for (const auto& [x, y] : n->rate) {
      s.xy.emplace_back(x, y);
      s.titles.push_back(n->node + ": " + F("%.2f", y) + " steps/s at " + F("%.0f", x) + " s");
      tmax = std::max(tmax, x);
    }
    series.push_back(s);
  }
  std::vector<std::pair<double, std::string>> ticks;
  for (int i = 0; i <= 4; ++i) ticks.emplace_back(tmax * i / 4, F("%.0f s", tmax * i / 4));
  o += LinePlot("train-rate", "Step rate over time", series, ticks, "step rate", 1, "steps/s");
  o += "<div class=\"scroll\"><table><tr><th>node</th><th>verdict</th><th>steps/s</th><th>last step</th>"
       "<th>loss</th><th>end</th><th>GPU util</th><th>power</th><th>checkpoint round trip</th><th>reason</th></tr>\n";
  for (const auto& n : t.nodes) {
    const Figure *f = nullptr, *c = nullptr;
    for (const auto& x : r.figures)
      if (x.stage == "train" && x.node == n.node) (x.name == "checkpoint resume" ? c : f) = &x;
    std::string trip = !c ? "-"
                       : n.ckpt.saved.empty() || n.ckpt.resume_step < 0 || c->verdict == Verdict::kFail
                           ? HtmlEscape(c->reason.substr(std::min(c->reason.size(), n.node.size() + 2)))
                           : HtmlEscape(n.ckpt.saved) + " &rarr; step " + std::to_string(n.ckpt.resume_step);
    if (c) trip = Badge(c->verdict) + " " + trip;
    o += "<tr><td>" + HtmlEscape(n.node) + "</td><td>" + (f ? Badge(f->verdict) : std::string()) + "</td><td>" +
         F("%.2f", n.median_rate) + "</td><td>" + (n.last_step < 0 ? std::string("none") : std::to_string(n.last_step)) +
         "</td><td>" + (!n.loss_finite ? std::string("not finite") : n.has_loss ? F("%.3g", n.last_loss) : "-") +
         "</td><td>" + HtmlEscape(n.end.empty() ? "never ended" : n.end) + "</td><td>" +
         (n.gpus > 0 ? F("%.0f%%", n.gpu_util) + " of " + std::to_string(n.gpus) : HtmlEscape(n.gpu_note)) + "</td><td>" +
         (n.gpus > 0 ? F("%.0f W", n.gpu_power_w) : std::string("-")) + "</td><td>" + trip + "</td><td>" +
         HtmlEscape(f ? f->reason.substr(std::min(f->reason.size(), n.node.size() + 2)) : "") +
         "</td></tr>\n";
  }
  return o + "</table></div>\n";
}

std::string FiguresHtml(const Report& r) {
  std::string o;
  o += "<h2>Every figure</h2><div class=\"scroll\"><table><tr><th>stage</th><th>figure</th><th>where</th><th>verdict</th><th>reason</th>"
       "<th>threshold</th><th>reproduce</th></tr>\n";
  for (const auto& f : r.figures) {
    std::string where = f.node + (f.node.empty() || f.path.empty() ? "" : " ") + f.path;
    std::string th = f.threshold > 0 ? (f.unit == "B/s" ? RateWords(f.threshold) : F("%.4g", f.threshold)) + " (" +
                                           f.threshold_source + ")"
                                     : f.threshold_source;
    o += "<tr><td>" + HtmlEscape(f.stage) + "</td><td>" + HtmlEscape(f.name) + "</td><td>" + HtmlEscape(where) +
         "</td><td>" + Badge(f.verdict) + "</td><td>" + HtmlEscape(f.reason) + "</td><td>" + HtmlEscape(th) +
         "</td><td><code>" + HtmlEscape(f.reproduce) + "</code></td></tr>\n";
  }
  o += "</table></div>\n</body></html>\n";
  return o;
}

}  // namespace

std::string ReportHtml(const Report& r) {
  return HeadHtml(r) + StagesHtml(r) + CollectivePlotsHtml(r) + CollectiveTablesHtml(r) + StorageHtml(r) + TrainHtml(r) +
         FiguresHtml(r);
}

}  // namespace preflight::accept
