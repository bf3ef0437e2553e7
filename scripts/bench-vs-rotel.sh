#!/usr/bin/env bash
# toolsize against a plain OTLP receiver, on the same request bytes: rotel-agent (PyPI package
# `rotel`) exporting to its blackhole, then `toolsize serve`, each loaded by examples/loadgen with
# the storm mix, one after the other in this one run. Prints each receiver's CPU per accepted
# span (or log record, with SIGNAL=logs: Claude Code `tool_result` records) and the ratio.
#
#   scripts/bench-vs-rotel.sh [SECONDS] [CONNECTIONS] [traces|logs] [RATE] [ROUNDS]
#
# RATE paces the offered load (spans or records per second over all connections; 0, the
# default, is unpaced): at a fixed rate both receivers do the same work, and their fixed costs
# (timers, wake-ups) show. Paced requests arrive evenly spread (ARRIVALS=lockstep: every
# connection at once; see the load generator's --arrivals). ROUNDS (default 1): the two
# receivers take turns that many times and the ratio is taken between their medians.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-4}
signal=${3:-traces}
rate=${4:-0}
rounds=${5:-1}
. scripts/rotel.sh
start_rotel

load() {
  "$loadgen" --mix storm --seconds "$seconds" --connections "$connections" --signal "$signal" \
    --rate "$rate" --arrivals "${ARRIVALS:-spread}" "$@"
}
per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
rows=()
for r in $(seq "$rounds"); do
  echo "== round $r: rotel-agent $("$agent" --version | awk '{print $2}') (blackhole exporter)"
  rotel_out=$(load --target "127.0.0.1:$rotel_http" --pid "$rotel")
  echo "$rotel_out"
  echo "== round $r: toolsize serve"
  toolsize_out=$(load)
  echo "$toolsize_out"
  rows+=("$(per "$rotel_out") $(per "$toolsize_out")")
done

python3 - "$signal" "${rows[@]}" <<'PY'
import statistics, sys
signal, rows = sys.argv[1], [tuple(map(float, r.split())) for r in sys.argv[2:]]
if len(rows) > 1:
    for i, (rotel, toolsize) in enumerate(rows, 1):
        print(f"round {i}: toolsize {toolsize:.3f} µs, rotel-agent {rotel:.3f} µs: ×{toolsize / rotel:.2f}")
rotel, toolsize = (statistics.median(c) for c in zip(*rows))
of = f"medians of {len(rows)} rounds, " if len(rows) > 1 else ""
print(f"CPU per accepted {signal} item ({of}one run): toolsize {toolsize:.3f} µs, "
      f"rotel-agent {rotel:.3f} µs: toolsize ×{toolsize / rotel:.2f} of rotel")
PY
