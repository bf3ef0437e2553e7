#!/usr/bin/env bash
# toolsize against a plain OTLP receiver, on the same request bytes: rotel-agent (PyPI package
# `rotel`) exporting to its blackhole, then `toolsize serve`, each loaded by examples/loadgen,
# one after the other in this one run, on every mix of the load generator. Prints each
# receiver's CPU per accepted span (or log record) per mix and round, then per mix the medians
# and their ratio, the worst mix first.
#
#   scripts/bench-vs-rotel.sh [SECONDS] [CONNECTIONS] [MIXES] [RATE] [ROUNDS]
#
# MIXES: `all` (the default) is traces:storm traces:storm-utf8 traces:large logs:storm
# logs:large; `traces` and `logs` are traces:storm and logs:storm alone; or a comma-separated
# list of SIGNAL:MIX (the load generator's --signal and --mix).
# RATE paces the offered load (spans or records per second over all connections; 0, the
# default, is unpaced): at a fixed rate both receivers do the same work, and their fixed costs
# (timers, wake-ups) show. Paced requests arrive evenly spread (ARRIVALS=lockstep: every
# connection at once; see the load generator's --arrivals). ROUNDS (default 1): in each round
# every mix runs once on each receiver, rotel-agent first, so the mixes and receivers take
# turns; the ratio of a mix is taken between its two medians.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-4}
mixes=${3:-all}
rate=${4:-0}
rounds=${5:-1}
case "$mixes" in
  all) mixes="traces:storm traces:storm-utf8 traces:large logs:storm logs:large" ;;
  traces | logs) mixes="$mixes:storm" ;;
  *) mixes=${mixes//,/ } ;;
esac
for m in $mixes; do
  case "$m" in
    traces:storm | traces:quiet | traces:storm-utf8 | traces:large) ;;
    logs:storm | logs:quiet | logs:storm-utf8 | logs:large) ;;
    *)
      echo "bench-vs-rotel: a mix is SIGNAL:MIX, SIGNAL traces or logs, MIX storm, quiet," \
        "storm-utf8 or large; not $m" >&2
      exit 2
      ;;
  esac
done
. scripts/rotel.sh
start_rotel

load() {
  local signal=${1%%:*} mix=${1#*:}
  shift
  "$loadgen" --mix "$mix" --seconds "$seconds" --connections "$connections" --signal "$signal" \
    --rate "$rate" --arrivals "${ARRIVALS:-spread}" "$@"
}
per() { grep -o '[0-9.]* µs per accepted span' <<<"$1" | head -1 | awk '{print $1}'; }
refused() { grep -o 'spans refused: *[0-9]*' <<<"$1" | awk '{print $3}'; }
rows=()
for r in $(seq "$rounds"); do
  for m in $mixes; do
    echo "== round $r, $m: rotel-agent $("$agent" --version | awk '{print $2}') (blackhole exporter)"
    rotel_out=$(load "$m" --target "127.0.0.1:$rotel_http" --pid "$rotel")
    echo "$rotel_out"
    echo "== round $r, $m: toolsize serve"
    toolsize_out=$(load "$m")
    echo "$toolsize_out"
    rows+=("$m $r $(per "$rotel_out") $(per "$toolsize_out") $(refused "$rotel_out") $(refused "$toolsize_out")")
  done
done

python3 - "$rate" "${rows[@]}" <<'PY'
import statistics, sys
rate, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
by_mix = {}
for mix, rnd, rotel, toolsize, rotel_refused, toolsize_refused in rows:
    by_mix.setdefault(mix, []).append(
        (int(rnd), float(rotel), float(toolsize), int(rotel_refused), int(toolsize_refused)))
pace = "unpaced" if rate == "0" else f"{int(rate):,} items/s"
summary = []
for mix, rs in by_mix.items():
    rotel = statistics.median(r[1] for r in rs)
    toolsize = statistics.median(r[2] for r in rs)
    rounds = ", ".join(f"×{r[2] / r[1]:.2f}" for r in rs)
    refused = sum(r[3] + r[4] for r in rs)
    summary.append((toolsize / rotel, mix, toolsize, rotel, len(rs), rounds, refused))
print(f"CPU per accepted item, {pace}, medians of each mix's rounds (one run), worst mix first:")
for ratio, mix, toolsize, rotel, n, rounds, refused in sorted(summary, reverse=True):
    print(f"  {mix:<18} toolsize {toolsize:.3f} µs, rotel-agent {rotel:.3f} µs: toolsize ×{ratio:.2f} "
          f"of rotel ({n} rounds: {rounds}; refused {refused})")
PY
