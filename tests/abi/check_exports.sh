#!/bin/bash
# The plugin's dynamic symbol table holds exactly what Slurm looks up.
#   check_exports.sh PLUGIN.so SLURM_VERSION_NUMBER(hex, from the headers it was built with)
set -euo pipefail
so=$1 ver=$(($2))
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
bad=$(grep -Ev '^(plugin_name|plugin_type|plugin_version|spank_plugin_version|slurm_spank_[a-z_]+)$' <<<"$syms" || true)
if [ -n "$bad" ]; then echo "unexpected exports in $so:"; echo "$bad"; exit 1; fi
for s in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init; do
  grep -qx "$s" <<<"$syms" || { echo "missing export $s in $so"; exit 1; }
done
# Slurm 25.05+ reads slurm_spank_init_failure_mode (a failing init fails the
# job, not the node); older releases have no such symbol to declare.
if [ "$ver" -ge $(((25 << 16) | (5 << 8))) ]; then
  grep -qx slurm_spank_init_failure_mode <<<"$syms" || { echo "missing export slurm_spank_init_failure_mode (Slurm >= 25.05)"; exit 1; }
else
  ! grep -qx slurm_spank_init_failure_mode <<<"$syms" || { echo "slurm_spank_init_failure_mode exported for a Slurm < 25.05"; exit 1; }
fi
echo "exports ok: $(tr '\n' ' ' <<<"$syms")"
