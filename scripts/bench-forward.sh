#!/usr/bin/env bash
# What forwarding costs the daemon: examples/loadgen's storm mix against `toolsize serve`
# alone, then with `--forward` to rotel-agent (PyPI `rotel`, blackhole exporter) over OTLP/gRPC
# and over OTLP/HTTP, one after the other in this one run. Prints the daemon's CPU per accepted
# span in each and the ratios against the run without forwarding, and rotel-agent's own CPU per
# forwarded span (it shares the machine's cores with the daemon). A fourth run per round sends
# the same requests from the load generator straight to rotel-agent over OTLP/HTTP and reads
# the load generator's own CPU per span: what a bare sender of these bytes pays (the requests
# are pre-encoded, so it is the kernel's loopback send and reading the answers), the floor of
# what relaying them can add to the daemon.
#
#   scripts/bench-forward.sh [SECONDS] [CONNECTIONS] [RATE] [ROUNDS]
#
# RATE paces the load (spans/s; 0, the default, is unpaced). Unpaced, the load generator, the
# daemon and rotel-agent share the two cores and the upstream falls behind (its queue drops
# requests, counted): the paced rows are the fair comparison. Paced requests arrive evenly
# spread; ARRIVALS=lockstep sends one per connection at the same instant (loadgen --arrivals).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
connections=${2:-4}
rate=${3:-0}
rounds=${4:-1}
. scripts/rotel.sh
start_rotel

# rotel-agent's CPU time so far, in clock ticks (it shares the two cores with the daemon and
# the load generator: its own cost per span is printed beside the daemon's).
ticks() { awk '{print $14 + $15}' "/proc/$rotel/stat"; }
hz=$(getconf CLK_TCK)
run() {
  local before out
  before=$(ticks)
  out=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" --rate "$rate" --arrivals "${ARRIVALS:-spread}" "$@")
  echo "$out"
  if [ $# -gt 0 ]; then
    python3 - "$(ticks)" "$before" "$hz" "$(awk '/spans accepted/ {print $3}' <<<"$out")" <<'PY'
import sys
after, before, hz, spans = (int(a) for a in sys.argv[1:5])
cpu = (after - before) / hz
print(f"  upstream CPU:           {cpu:.2f} s, {cpu * 1e6 / max(spans, 1):.3f} µs per forwarded span (rotel-agent)")
PY
  fi
}
per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
sender() { grep 'load generator CPU' <<<"$1" | grep -o '[0-9.]* µs per accepted span' | awk '{print $1}'; }
upstream() { grep -o '[0-9.]* µs per forwarded span' <<<"$1" | awk '{print $1}'; }
# ROUNDS rounds, the four runs taking turns in each: on a shared machine one run varies by tens
# of percent, so the ratios are taken between medians.
rows=()
for r in $(seq "$rounds"); do
  alone=$(run)
  echo "== round $r: toolsize serve"; echo "$alone"
  to_grpc=$(run --forward "grpc://127.0.0.1:$rotel_grpc")
  echo "== round $r: toolsize serve --forward grpc://rotel-agent"; echo "$to_grpc"
  to_http=$(run --forward "http://127.0.0.1:$rotel_http")
  echo "== round $r: toolsize serve --forward http://rotel-agent"; echo "$to_http"
  bare=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" --rate "$rate" \
    --arrivals "${ARRIVALS:-spread}" --target "127.0.0.1:$rotel_http" --pid "$rotel")
  echo "== round $r: the load generator straight to rotel-agent over HTTP (a bare sender)"; echo "$bare"
  rows+=("$(per "$alone") $(per "$to_grpc") $(per "$to_http") $(upstream "$to_grpc") $(upstream "$to_http") $(sender "$bare")")
done

python3 - "${rows[@]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[1:]]
alone, grpc, http, up_grpc, up_http, bare = (statistics.median(c) for c in zip(*rows))
for i, r in enumerate(rows, 1):
    print(f"round {i}: alone {r[0]:.3f} µs, over gRPC {r[1]:.3f} µs (×{r[1] / r[0]:.2f}), "
          f"over HTTP {r[2]:.3f} µs (×{r[2] / r[0]:.2f}); a bare sender {r[5]:.3f} µs "
          f"(floor ×{(r[0] + r[5]) / r[0]:.2f})")
print(f"daemon CPU per accepted span, medians of {len(rows)}: alone {alone:.3f} µs; forwarding "
      f"over gRPC {grpc:.3f} µs (×{grpc / alone:.2f}); over HTTP {http:.3f} µs (×{http / alone:.2f})")
print(f"rotel-agent CPU per forwarded span, medians: over gRPC {up_grpc:.3f} µs; over HTTP "
      f"{up_http:.3f} µs")
print(f"a bare sender of the same requests over OTLP/HTTP (the load generator's own CPU), median: "
      f"{bare:.3f} µs per span: relaying them adds at least about that, "
      f"×{(alone + bare) / alone:.2f} of the daemon alone")
PY
