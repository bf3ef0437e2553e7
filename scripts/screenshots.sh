#!/usr/bin/env bash
# The screenshots of docs/ (status-page.png, tool-page.png), taken from `toolsize demo` after
# real minutes of history: the built-in agent runs MINUTES minutes (default 6), the daemon keeps
# windows of 1 and 30 minutes (history slots of 12 s, a fifth of the shortest window), and the
# deploy (search_orders' results growing about 13 times) happens halfway.
#
#   scripts/screenshots.sh [MINUTES]
#
# Needs chromium. TOOLSIZE_BIN picks the binary (default: a release build made here); OUT the
# directory (default docs).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-6}
out=${OUT:-docs}
bin=${TOOLSIZE_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --features collector --bin toolsize
  bin=target/release/toolsize
fi
command -v chromium >/dev/null || { echo "chromium is needed" >&2; exit 2; }

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
RUST_LOG=error "$bin" demo --window 1m --window 30m --deploy-after "$((minutes * 30))s" \
  --otlp-grpc-addr 127.0.0.1:0 --otlp-http-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 \
  >"$work/listening" &
pid=$!
for _ in $(seq 50); do
  [ -s "$work/listening" ] && break
  sleep 0.1
done
admin=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["admin"])' \
  "$work/listening")
echo "demo on http://$admin/ for $minutes minutes"
sleep "$((minutes * 60))"

shot() {
  chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile-$1" --virtual-time-budget=5000 --window-size=1280,"$3" \
    --screenshot="$out/$1" "$2" 2>/dev/null
  echo "wrote $out/$1"
}
shot status-page.png "http://$admin/?window=30m" 1100
shot tool-page.png "http://$admin/tools/search_orders?service=demo-agent" 1400
