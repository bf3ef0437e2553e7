#!/usr/bin/env bash
# What forwarding costs the daemon: examples/loadgen's storm mix against `toolsize serve`
# alone, then with `--forward` to rotel-agent (PyPI `rotel`, blackhole exporter) over OTLP/gRPC
# and over OTLP/HTTP, one after the other in this one run. Prints the daemon's CPU per accepted
# span in each and the ratios against the run without forwarding.
#
#   scripts/bench-forward.sh [SECONDS] [CONNECTIONS] [RATE]
#
# RATE paces the load (spans/s; 0, the default, is unpaced). Unpaced, the load generator, the
# daemon and rotel-agent share the two cores and the upstream falls behind (its queue drops
# requests, counted): the paced rows are the fair comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
connections=${2:-4}
rate=${3:-0}
. scripts/rotel.sh
start_rotel

run() {
  "$loadgen" --mix storm --seconds "$seconds" --connections "$connections" --rate "$rate" "$@"
}
alone=$(run)
echo "== toolsize serve"; echo "$alone"
to_grpc=$(run --forward "grpc://127.0.0.1:$rotel_grpc")
echo "== toolsize serve --forward grpc://rotel-agent"; echo "$to_grpc"
to_http=$(run --forward "http://127.0.0.1:$rotel_http")
echo "== toolsize serve --forward http://rotel-agent"; echo "$to_http"

per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
python3 - "$(per "$alone")" "$(per "$to_grpc")" "$(per "$to_http")" <<'PY'
import sys
alone, grpc, http = map(float, sys.argv[1:4])
print(f"daemon CPU per accepted span: alone {alone:.3f} µs; forwarding over gRPC {grpc:.3f} µs "
      f"(×{grpc / alone:.2f}); over HTTP {http:.3f} µs (×{http / alone:.2f})")
PY
