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
ROTEL_VERSION=0.0.1a15

if ! python3 -c "import rotel" 2>/dev/null; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
    --root-user-action=ignore --pre "rotel==$ROTEL_VERSION"
fi
agent="$(python3 -c 'import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')"
cargo build -q --release --features collector --bin toolsize --example loadgen
loadgen=target/release/examples/loadgen

free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http=$(free)
grpc=$(free)
"$agent" start --otlp-http-endpoint "127.0.0.1:$http" --otlp-grpc-endpoint "127.0.0.1:$grpc" \
  --exporter blackhole --pid-file "$(mktemp -u)" >/dev/null 2>&1 &
rotel=$!
trap 'kill $rotel 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null && break
  sleep 0.1
done

run() {
  "$loadgen" --mix storm --seconds "$seconds" --connections "$connections" --rate "$rate" "$@"
}
alone=$(run)
echo "== toolsize serve"; echo "$alone"
to_grpc=$(run --forward "grpc://127.0.0.1:$grpc")
echo "== toolsize serve --forward grpc://rotel-agent"; echo "$to_grpc"
to_http=$(run --forward "http://127.0.0.1:$http")
echo "== toolsize serve --forward http://rotel-agent"; echo "$to_http"

per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
python3 - "$(per "$alone")" "$(per "$to_grpc")" "$(per "$to_http")" <<'PY'
import sys
alone, grpc, http = map(float, sys.argv[1:4])
print(f"daemon CPU per accepted span: alone {alone:.3f} µs; forwarding over gRPC {grpc:.3f} µs "
      f"(×{grpc / alone:.2f}); over HTTP {http:.3f} µs (×{http / alone:.2f})")
PY
