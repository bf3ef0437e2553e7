#!/usr/bin/env bash
# toolsize against a plain OTLP receiver, on the same request bytes: rotel-agent (PyPI package
# `rotel`) exporting to its blackhole, then `toolsize serve`, each loaded by examples/loadgen with
# the storm mix, one after the other in this one run. Prints each receiver's CPU per accepted
# span (or log record, with SIGNAL=logs: Claude Code `tool_result` records) and the ratio.
#
#   scripts/bench-vs-rotel.sh [SECONDS] [CONNECTIONS] [traces|logs] [RATE]
#
# RATE paces the offered load (spans or records per second over all connections; 0, the
# default, is unpaced): at a fixed rate both receivers do the same work, and their fixed costs
# (timers, wake-ups) show.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-4}
signal=${3:-traces}
rate=${4:-0}
. scripts/rotel.sh
start_rotel

echo "== rotel-agent $("$agent" --version | awk '{print $2}') (blackhole exporter)"
rotel_out=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" \
  --signal "$signal" --rate "$rate" --target "127.0.0.1:$rotel_http" --pid "$rotel")
echo "$rotel_out"
kill $rotel
echo "== toolsize serve"
toolsize_out=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" \
  --signal "$signal" --rate "$rate")
echo "$toolsize_out"

per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
python3 - "$(per "$rotel_out")" "$(per "$toolsize_out")" "$signal" <<'PY'
import sys
rotel, toolsize = map(float, sys.argv[1:3])
print(f"CPU per accepted {sys.argv[3]} item: toolsize {toolsize:.3f} µs, rotel-agent {rotel:.3f} µs: toolsize ×{toolsize / rotel:.2f} of rotel")
PY
