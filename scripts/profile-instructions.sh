#!/usr/bin/env bash
# Instructions the daemon executes per accepted span, and where: `toolsize serve` (BIN) runs
# under valgrind's callgrind while examples/loadgen offers a mix at RATE spans/s (or log records
# with SIGNAL=logs) for SECONDS, then the total is divided by the spans accepted and the
# functions with the most instructions, inclusive, are listed per accepted span. Counts of
# instructions do not move with the machine's load as CPU time does, so two builds can be
# compared by them while other work runs (what they do not show: cache misses, stalls, the
# kernel's side). Keep RATE low: under callgrind the daemon runs some fifty times slower, and a
# span refused is not counted. The total includes the daemon's start and its timers (about 2 %
# of a default run's). The callgrind file stays as target/callgrind-daemon.out for
# `callgrind_annotate --inclusive=yes` (or `--tree=caller`). Needs valgrind (Debian: valgrind).
#
#   scripts/profile-instructions.sh [BIN] [RATE] [SECONDS] [MIX] [SIGNAL]
#   # defaults: target/release/toolsize 5000 8 storm traces
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/toolsize} rate=${2:-5000} seconds=${3:-8} mix=${4:-storm}
signal=${5:-traces}
command -v valgrind >/dev/null || { echo "profile-instructions: needs valgrind" >&2; exit 2; }
[ -x "$bin" ] || { echo "profile-instructions: no executable $bin" >&2; exit 2; }
cargo build -q --release --features collector --example loadgen
out=$PWD/target/callgrind-daemon.out
wrapper=$(mktemp)
trap 'rm -f "$wrapper"' EXIT
# The load generator starts the daemon and reads its ready line from standard output;
# valgrind's own lines go to standard error.
printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s "$@" 2>/dev/null\n' \
  "$out" "$(realpath "$bin")" >"$wrapper"
chmod +x "$wrapper"
rm -f "$out"
report=$(target/release/examples/loadgen --mix "$mix" --signal "$signal" --seconds "$seconds" \
  --connections 4 --rate "$rate" --bin "$wrapper")
echo "$report"
accepted=$(awk '/spans accepted:/ {print $3}' <<<"$report")
for _ in $(seq 50); do [ -s "$out" ] && break; sleep 0.2; done
[ -s "$out" ] || { echo "profile-instructions: callgrind wrote no profile" >&2; exit 1; }
callgrind_annotate --inclusive=yes "$out" 2>/dev/null | python3 -c '
import re, sys
accepted = int(sys.argv[1])
rows, total = [], None
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)$", line)
    if not m:
        continue
    n, what = int(m.group(1).replace(",", "")), m.group(2)
    if what.startswith("PROGRAM TOTALS"):
        total = n
        continue
    name = re.sub(r" \[[^]]*\]$", "", what.split(":", 1)[-1])
    if name.startswith(("toolsize::collector::", "<toolsize::collector::", "aho_corasick::", "hdrhistogram::")):
        rows.append((n, name))
print(f"instructions: {total:,} in all, {total / accepted:,.0f} per accepted span ({accepted:,} accepted)")
print("the daemon'"'"'s functions by inclusive instructions per accepted span (callers include callees):")
seen = set()
for n, name in sorted(rows, reverse=True):
    if name in seen or len(seen) >= 25:
        continue
    seen.add(name)
    print(f"  {n / accepted:>9,.0f}  {name[:150]}")
' "$accepted"
