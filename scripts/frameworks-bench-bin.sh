#!/usr/bin/env bash
# Builds benches/frameworks.rs (release profile, the features its cases need) and prints the
# path of its binary: what scripts/bench-frameworks-instructions.sh and
# scripts/bench-frameworks-memcpy.sh run their cases with.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cargo bench --features rig,rmcp,swiftide --bench frameworks --no-run 2>&1 |
  sed -n 's/.*(\(target\/release\/deps\/frameworks-[0-9a-f]*\)).*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "no frameworks bench binary built" >&2; exit 1; }
echo "$bin"
