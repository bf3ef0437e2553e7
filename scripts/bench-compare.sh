#!/usr/bin/env bash
# Daemon builds side by side: each BIN (a `toolsize` binary) is loaded by examples/loadgen with
# the storm mix at RATE spans/s (0: unpaced) for SECONDS, the binaries taking turns for ROUNDS
# rounds in this one run; prints each run's CPU per accepted span, each binary's median and its
# ratio to the first binary's median, then the median of its per-round ratios (each round's
# figure over the first binary's in the same round, so a slow minute weighs on both sides)
# with the least and greatest. On a shared machine single runs vary by tens of percent:
# compare medians of interleaved rounds, never runs made apart.
#
#   scripts/bench-compare.sh RATE SECONDS ROUNDS BIN [BIN...]
#   FORWARD=grpc|http scripts/bench-compare.sh ...   # each daemon forwarding everything to
#                                                     # rotel-agent (blackhole) over that protocol
#   ARRIVALS=lockstep scripts/bench-compare.sh ...    # paced requests sent together, not spread
#   MIX=storm-utf8 SIGNAL=traces scripts/bench-compare.sh ...   # another mix of the load
#                                                     # generator (default storm, traces)
#   CPU=exact scripts/bench-compare.sh ...            # the daemon's threads' run time in ns
#                                                     # (default: its CPU time in 10 ms ticks)
#   e.g. cp target/release/toolsize /tmp/before; (change, build); \
#        scripts/bench-compare.sh 100000 6 5 /tmp/before target/release/toolsize
set -euo pipefail
cd "$(dirname "$0")/.."
rate=$1 seconds=$2 rounds=$3
shift 3
cargo build -q --release --features collector --example loadgen
extra=()
case ${FORWARD:-} in
  "") ;;
  grpc | http)
    . scripts/rotel.sh
    start_rotel
    port=$rotel_http
    [ "$FORWARD" = grpc ] && port=$rotel_grpc
    extra=(--forward "$FORWARD://127.0.0.1:$port")
    ;;
  *) echo "FORWARD must be grpc or http" >&2; exit 2 ;;
esac
declare -A runs
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    out=$(target/release/examples/loadgen --mix "${MIX:-storm}" --signal "${SIGNAL:-traces}" \
      --seconds "$seconds" --connections 4 \
      --rate "$rate" --arrivals "${ARRIVALS:-spread}" --bin "$bin" "${extra[@]}")
    line="receiver CPU"
    [ "${CPU:-}" = exact ] && line="receiver run time"
    us=$(awk -v l="$line" 'index($0, l) {for (i = 1; i <= NF; i++) if ($i == "µs") print $(i - 1)}' <<<"$out")
    refused=$(awk '/spans refused/ {print $3}' <<<"$out")
    echo "round $r  $bin  $us µs per accepted span, $refused refused"
    runs[$bin]="${runs[$bin]:-} $us"
  done
done
first=""
for bin in "$@"; do
  med=$(tr ' ' '\n' <<<"${runs[$bin]}" | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
  first=${first:-$med}
  python3 -c "import sys; m, f = map(float, sys.argv[1:3]); print(f'median {m:.3f} µs per accepted span  ×{m / f:.2f} of the first  {sys.argv[3]}')" "$med" "$first" "$bin"
done
for bin in "${@:2}"; do
  python3 -c "
import statistics, sys
first, other = ([float(x) for x in a.split()] for a in sys.argv[1:3])
r = sorted(o / f for o, f in zip(other, first))
print(f'per-round ratio to the first: median ×{statistics.median(r):.3f}, least ×{r[0]:.3f}, greatest ×{r[-1]:.3f}  {sys.argv[3]}')
" "${runs[$1]}" "${runs[$bin]}" "$bin"
done
