#!/bin/bash
# The shipped alert rules load (promtool check rules) and fire on exactly the
# series their unit tests expect (promtool test rules).
#   check_rules.sh SOURCE_DIR
# Skipped (77) where promtool is absent (Debian's `prometheus` package).
set -euo pipefail
src=$1
command -v promtool >/dev/null || { echo "SKIP: promtool not installed (apt-get install --no-install-recommends prometheus)"; exit 77; }
promtool --version 2>&1 | head -1
promtool check rules "$src/conf/prometheus/preflight.rules.yml"
promtool test rules "$src/tests/prometheus/preflight.rules.test.yml"
