#!/bin/sh
# A fake DCGM `dcgmi` for tests: `dcgmi diag -r N -j` prints one of the
# outputs in tests/fixtures/dcgm (README.md there says where each format
# comes from), chosen by PREFLIGHT_FAKE_DCGMI: pass (default), fail,
# noconnect, hang (never answers). Anything but `diag` is refused.
here=$(cd "$(dirname "$0")" && pwd)
fix=${PREFLIGHT_FAKE_DCGMI_DIR:-$here/../fixtures/dcgm}
[ "$1" = diag ] || { echo "fake dcgmi: only 'diag' is faked" >&2; exit 2; }
case ${PREFLIGHT_FAKE_DCGMI:-pass} in
  pass) cat "$fix/pass-r1.json" ;;
  fail) cat "$fix/fail-r1.json"; exit 1 ;;  # dcgmi exits non-zero when a test fails
  noconnect) cat "$fix/noconnect.txt"; exit 1 ;;
  hang) exec sleep 3600 ;;
  *) echo "fake dcgmi: unknown case '$PREFLIGHT_FAKE_DCGMI'" >&2; exit 2 ;;
esac
