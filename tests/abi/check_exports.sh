#!/bin/bash
# The plugin's dynamic symbol table holds exactly what Slurm looks up.
set -euo pipefail
so=$1
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
bad=$(grep -Ev '^(plugin_name|plugin_type|plugin_version|spank_plugin_version|slurm_spank_[a-z_]+)$' <<<"$syms" || true)
if [ -n "$bad" ]; then echo "unexpected exports in $so:"; echo "$bad"; exit 1; fi
for s in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init; do
  grep -qx "$s" <<<"$syms" || { echo "missing export $s in $so"; exit 1; }
done
echo "exports ok: $(tr '\n' ' ' <<<"$syms")"
