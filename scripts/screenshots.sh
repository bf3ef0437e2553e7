#!/usr/bin/env bash
# The screenshots of docs/ (status-page.png, tool-page.png), taken from `toolsize demo` after
# real minutes of history: the built-in agent runs MINUTES minutes (default 6), the daemon keeps
# windows of 1 and 30 minutes (history slots of 12 s, a fifth of the shortest window), and the
# deploy (search_orders' results growing about 13 times) happens halfway.
#
#   scripts/screenshots.sh [MINUTES]
#
# Then the first-run page, img/status-unrecognised.png: a daemon that has heard only spans that
# are no tool call (a chat span), its status page saying so.
#
# Needs chromium and curl. TOOLSIZE_BIN picks the binary (default: a release build made here);
# OUT the directory (default docs). With optipng (Debian: optipng), the images are recompressed
# losslessly.
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
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }

work=$(mktemp -d)
pid='' plain=''
trap 'kill $pid $plain 2>/dev/null || true; rm -rf "$work"' EXIT

# The admin address of the daemon whose ready line is in $1.
admin_of() {
  for _ in $(seq 50); do
    [ -s "$1" ] && break
    sleep 0.1
  done
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' \
    "$1" "${2:-admin}"
}
RUST_LOG=error "$bin" demo --window 1m --window 30m --deploy-after "$((minutes * 30))s" \
  --otlp-grpc-addr 127.0.0.1:0 --otlp-http-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 \
  >"$work/listening" &
pid=$!
admin=$(admin_of "$work/listening")
echo "demo on http://$admin/ for $minutes minutes"
sleep "$((minutes * 60))"

shot() {
  chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile-$1" --virtual-time-budget=5000 --window-size=1280,"$3" \
    --screenshot="$out/$1" "$2" 2>/dev/null
  if command -v optipng >/dev/null; then
    optipng -quiet -strip all -o2 "$out/$1"
  fi
  echo "wrote $out/$1 ($(wc -c <"$out/$1") bytes)"
}
shot status-page.png "http://$admin/?window=30m" 1100
shot tool-page.png "http://$admin/tools/search_orders?service=demo-agent" 1400

RUST_LOG=error "$bin" serve --otlp-grpc-addr 127.0.0.1:0 --otlp-http-addr 127.0.0.1:0 \
  --admin-addr 127.0.0.1:0 >"$work/plain" &
plain=$!
first=$(admin_of "$work/plain")
otlp=$(admin_of "$work/plain" otlp_http)
now=$(date +%s%N)
curl -sf -H 'content-type: application/json' "http://$otlp/v1/traces" -d '{"resourceSpans":[{
  "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"chatty-agent"}}]},
  "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",
  "spanId":"eee19b7ec3c1b174","name":"chat gpt-4o","kind":3,
  "startTimeUnixNano":"'"$now"'","endTimeUnixNano":"'"$now"'","attributes":[
  {"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
  {"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}}]}]}]}]}' >/dev/null
shot img/status-unrecognised.png "http://$first/" 620
