#!/usr/bin/env bash
# toolsize against a plain OTLP receiver, on the same request bytes: rotel-agent (PyPI package
# `rotel`) exporting to its blackhole, then `toolsize serve`, each loaded by examples/loadgen with
# the storm mix, one after the other in this one run. Prints each receiver's CPU per accepted
# span (or log record, with SIGNAL=logs: Claude Code `tool_result` records) and the ratio.
#
#   scripts/bench-vs-rotel.sh [SECONDS] [CONNECTIONS] [traces|logs]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-4}
signal=${3:-traces}
ROTEL_VERSION=0.0.1a15

if ! python3 -c "import rotel" 2>/dev/null; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
    --root-user-action=ignore --pre "rotel==$ROTEL_VERSION"
fi
agent="$(python3 -c 'import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')"
cargo build -q --release --features collector --bin toolsize --example loadgen
loadgen=target/release/examples/loadgen

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
grpc=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$agent" start --otlp-http-endpoint "127.0.0.1:$port" --otlp-grpc-endpoint "127.0.0.1:$grpc" \
  --exporter blackhole --pid-file "$(mktemp -u)" >/dev/null 2>&1 &
rotel=$!
trap 'kill $rotel 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

echo "== rotel-agent $("$agent" --version | awk '{print $2}') (blackhole exporter)"
rotel_out=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" \
  --signal "$signal" --target "127.0.0.1:$port" --pid "$rotel")
echo "$rotel_out"
kill $rotel
echo "== toolsize serve"
toolsize_out=$("$loadgen" --mix storm --seconds "$seconds" --connections "$connections" \
  --signal "$signal")
echo "$toolsize_out"

per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
python3 - "$(per "$rotel_out")" "$(per "$toolsize_out")" "$signal" <<'PY'
import sys
rotel, toolsize = map(float, sys.argv[1:3])
print(f"CPU per accepted {sys.argv[3]} item: toolsize {toolsize:.3f} µs, rotel-agent {rotel:.3f} µs: toolsize ×{toolsize / rotel:.2f} of rotel")
PY
