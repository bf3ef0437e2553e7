#!/usr/bin/env bash
# How long an oversized result of a new tool takes to reach a real Alertmanager while the storm
# mix flows at a steady rate: starts prometheus-alertmanager on a loopback port, then
# examples/loadgen with --alertmanager (one probe every 250 ms), and prints p50/p99/max.
#
#   scripts/bench-alerts.sh [SPANS_PER_S] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-100000}
seconds=${2:-20}
command -v prometheus-alertmanager >/dev/null || {
  echo "prometheus-alertmanager is needed (apt-get install prometheus-alertmanager)" >&2
  exit 2
}
cargo build -q --release --features collector --bin toolsize --example loadgen
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n' >"$dir/am.yml"
prometheus-alertmanager --config.file="$dir/am.yml" --storage.path="$dir/data" \
  --web.listen-address="127.0.0.1:$port" --cluster.listen-address= >/dev/null 2>&1 &
am=$!
trap 'kill $am 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
target/release/examples/loadgen --mix storm --rate "$rate" --seconds "$seconds" --connections 4 \
  --alertmanager "http://127.0.0.1:$port"
