#!/bin/bash
# report.html in a real browser: the fixture report (accept/test/
# fixture_report.h: 8 nodes, n5 slow, /slow storage, a path holding markup)
# rendered by accept_render_fixture and opened in Debian's headless chromium.
# Passes when the page logs no console message (a CSP violation, a blocked
# fetch, a script error all log one), every plot (svg[data-plot]) holds as
# many points (.pt) as it states and at least one, no <script> element made
# it into the DOM, and the slow node and path are named. Then the wide
# fixture (200 long node names, long unbroken messages, a long hostlist in a
# finding) must fit an 800-pixel window: a copy of its page with a script
# added (the report's own CSP forbids one) records the root element's
# scrollWidth and clientWidth, and the first may not exceed the second. The
# screenshots stay in the build tree: BUILD/tests/accept_html/report.png,
# wide/report.png.
#   accept_html.sh BUILD_DIR
set -euo pipefail
build=$1
out=$build/tests/accept_html
rm -rf "$out"; mkdir -p "$out"
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "FAIL: no chromium (scripts/deps installs it)"; exit 1; }
"$build/accept/accept_render_fixture" "$out" slow
run_browser() {  # ARGS...: headless, private profile, bounded
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$out/profile" \
    --enable-logging=stderr --v=0 "$@"
}
run_browser --dump-dom "file://$out/report.html" >"$out/dom.html" 2>"$out/console.log"
run_browser --window-size=1200,2600 --screenshot="$out/report.png" "file://$out/report.html" >/dev/null 2>>"$out/console.log"
fail=0
if grep -E ':CONSOLE[:(]' "$out/console.log"; then echo "FAIL: the page logged console messages"; fail=1; fi
[ -s "$out/report.png" ] || { echo "FAIL: no screenshot"; fail=1; }
python3 - "$out/dom.html" <<'PY' || fail=1
import sys
from html.parser import HTMLParser

class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.plots = []      # [name, stated, counted]
        self.depth = 0       # inside an svg.plot
        self.scripts = 0
        self.text = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "svg" and "data-plot" in a:
            self.plots.append([a["data-plot"], int(a.get("data-points", "0")), 0])
            self.depth = 1
        elif self.depth:
            if tag not in ("br",): self.depth += 1
            if "pt" in (a.get("class") or "").split():
                self.plots[-1][2] += 1
    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
    def handle_data(self, d):
        self.text.append(d)

p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
ok = True
want = {"busbw_vs_size", "busbw_vs_nodes", "storage_tiers", "train-rate"}
got = {name for name, _, _ in p.plots}
if got != want:
    print("FAIL: plots", sorted(got), "expected", sorted(want)); ok = False
for name, stated, counted in p.plots:
    if counted == 0 or counted != stated:
        print(f"FAIL: plot {name}: {counted} points drawn, {stated} stated"); ok = False
    else:
        print(f"plot {name}: {counted} points")
if p.scripts:
    print("FAIL: a <script> element reached the DOM"); ok = False
text = "".join(p.text)
for needle in ("straggler", "n5", "/slow", "the curve broke between 4 and 8 nodes", "/scratch/<b>x</b>&'\"",
               "step-300 \u2192 step 301"):
    if needle not in text:
        print("FAIL: the page does not say:", needle); ok = False
sys.exit(0 if ok else 1)
PY
# The wide page: no horizontal overflow, and its findings grouped.
mkdir -p "$out/wide"
"$build/accept/accept_render_fixture" "$out/wide" wide
grep -v 'Content-Security-Policy' "$out/wide/report.html" |
  sed 's|</body></html>|<script>var e=document.documentElement;document.body.setAttribute("data-width",e.scrollWidth+" "+e.clientWidth)</script></body></html>|' \
  >"$out/wide/measure.html"
run_browser --window-size=800,1000 --dump-dom "file://$out/wide/measure.html" >"$out/wide/dom.html" 2>"$out/wide/console.log"
run_browser --window-size=800,3000 --screenshot="$out/wide/report.png" "file://$out/wide/report.html" >/dev/null 2>>"$out/wide/console.log"
python3 - "$out/wide/dom.html" <<'PY' || fail=1
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'data-width="(\d+) (\d+)"', dom)
if not m:
    print("FAIL: the wide page was not measured"); sys.exit(1)
scroll, client = int(m.group(1)), int(m.group(2))
ok = True
if scroll > client:
    print(f"FAIL: the wide page overflows: scrollWidth {scroll} > clientWidth {client}"); ok = False
else:
    print(f"wide page: scrollWidth {scroll} <= clientWidth {client}")
# One line per finding: the 100 slow nodes of the path are one <li>.
finding = re.findall(r"<li>fail: [^<]*seq_write below [^<]* per node on gpu-node-rack[^<]*</li>", dom)
if len(finding) != 1:
    print("FAIL: expected one grouped seq_write finding, got", len(finding)); ok = False
sys.exit(0 if ok else 1)
PY
[ $fail = 0 ] && echo "accept html ok: no console message, every plot has its points, the wide page fits; screenshots $out/report.png, $out/wide/report.png"
exit $fail
