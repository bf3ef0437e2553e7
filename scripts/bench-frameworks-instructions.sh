#!/usr/bin/env bash
# Instructions each framework wrapper adds per call, against `run_text`, counted by valgrind's
# callgrind on benches/frameworks.rs: deterministic where the timed bench is not (the rmcp client's
# round trip, a shared machine's load). Each side of each case runs LOW and then HIGH calls
# (`--calls`); the setup being the same, (HIGH count - LOW count) / (HIGH - LOW) is the side's
# instructions per call, and measured minus bare what the wrapper adds. Under valgrind the args
# hash's SHA-1 runs its portable code (no SHA extensions): about 3,200 instructions of every hashing
# case, the same in each. The callgrind files stay in target/callgrind-frameworks/ (one per case,
# side and count) for `callgrind_annotate --inclusive=yes`. Needs valgrind (Debian: valgrind).
#
#   scripts/bench-frameworks-instructions.sh [LOW HIGH]     # default 200 1200
#
# RESULT_BYTES=N makes every case's result N bytes of text in place of the bench's 4,095 (how the
# cost of a wrapper that measures the result's wire form grows with it); CASES="run_text,rmcp
# server" counts only those cases (run_text first: the ratios divide by it). CACHE_SIM=1 also
# simulates the caches and branch predictor (callgrind's --cache-sim and --branch-sim, with this
# machine's cache sizes) and adds, per call added: first-level instruction cache misses, data
# cache misses (reads and writes) and mispredicted branches (conditional and indirect): what
# makes a case's time grow more than its instructions do.
set -euo pipefail
cd "$(dirname "$0")/.."
low=${1:-200} high=${2:-1200}
bin=$(scripts/frameworks-bench-bin.sh)
out=target/callgrind-frameworks
mkdir -p "$out"
count() { # case calls [--bare]
  local file
  file="$out/$(echo "$1" | tr -c 'a-z0-9\n' '_').${RESULT_BYTES:+r$RESULT_BYTES.}${3:+bare.}$2"
  valgrind --tool=callgrind ${CACHE_SIM:+--cache-sim=yes --branch-sim=yes} \
    --callgrind-out-file="$file" "$bin" --bench --profile-time 1 \
    --case "$1" --calls "$2" ${RESULT_BYTES:+--result-bytes "$RESULT_BYTES"} ${3:-} 2>&1 |
    sed -n 's/.*Collected : //p'
}
# Event N (1-based) of a "Collected" line: Ir, then with CACHE_SIM Dr Dw I1mr D1mr D1mw ILmr
# DLmr DLmw Bc Bcm Bi Bim.
event() { echo "$1" | awk -v n="$2" '{ print $n }'; }
# What a case adds per call of the events numbered $@, summed: the measured side's runs (m1, m2)
# less the bare side's (b1, b2), over span calls.
added_of() {
  local n sum=0
  for n in "$@"; do
    sum=$((sum + $(event "$m2" "$n") - $(event "$m1" "$n") - $(event "$b2" "$n") + $(event "$b1" "$n")))
  done
  echo $((sum / span))
}
printf '%-22s %10s %10s %10s %12s' case bare measured added "÷ run_text"
[ -n "${CACHE_SIM:-}" ] && printf ' %9s %9s %9s' "I1 misses" "D1 misses" mispredicts
printf '\n'
base=
IFS=, read -ra cases <<<"${CASES:-run_text,rig tool,rig tool (rig span),rig set,rmcp server,rmcp client,swiftide tool,run (MCP result)}"
for c in "${cases[@]}"; do
  m1=$(count "$c" "$low") m2=$(count "$c" "$high")
  b1=$(count "$c" "$low" --bare) b2=$(count "$c" "$high" --bare)
  span=$((high - low))
  bare=$((($(event "$b2" 1) - $(event "$b1" 1)) / span))
  measured=$((($(event "$m2" 1) - $(event "$m1" 1)) / span))
  added=$((measured - bare))
  base=${base:-$added}
  printf '%-22s %10d %10d %10d %11s×' "$c" "$bare" "$measured" "$added" \
    "$(awk -v a="$added" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
  [ -n "${CACHE_SIM:-}" ] && printf ' %9d %9d %9d' "$(added_of 4)" "$(added_of 5 6)" "$(added_of 11 13)"
  printf '\n'
done
