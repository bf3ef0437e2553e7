#!/usr/bin/env bash
# Bytes each framework wrapper has copied per call by `memcpy` and `memmove`, against its bare
# call: the memory moved, which a count of instructions shows only as the copy loops'
# instructions, lumped with every other copy's. A counter of both functions, built here with gcc
# and loaded with LD_PRELOAD, counts the copies of each side of a case of benches/frameworks.rs
# over LOW and then HIGH calls; the difference divided by HIGH - LOW is the side's copies per
# call, and the copies of 512 bytes or more are listed by length. Needs gcc.
#
#   scripts/bench-frameworks-memcpy.sh [LOW HIGH]     # default 2000 12000
#
# CASES="run_text,rmcp server" (comma-separated) picks the cases; RESULT_BYTES=N passes
# `--result-bytes N`.
set -euo pipefail
cd "$(dirname "$0")/.."
low=${1:-2000} high=${2:-12000}
bin=$(scripts/frameworks-bench-bin.sh)
counter=target/memcpy-counter.so
cat >target/memcpy-counter.c <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#define LENGTHS 65536
static unsigned long long by_length[LENGTHS], calls, bytes;
static void *(*real_memcpy)(void *, const void *, size_t);
static void *(*real_memmove)(void *, const void *, size_t);
static void count(size_t n) {
  calls++;
  bytes += n;
  by_length[n < LENGTHS ? n : LENGTHS - 1]++;
}
void *memcpy(void *d, const void *s, size_t n) {
  if (!real_memcpy) real_memcpy = dlsym(RTLD_NEXT, "memcpy");
  count(n);
  return real_memcpy(d, s, n);
}
void *memmove(void *d, const void *s, size_t n) {
  if (!real_memmove) real_memmove = dlsym(RTLD_NEXT, "memmove");
  count(n);
  return real_memmove(d, s, n);
}
__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "COPIES %llu %llu\n", calls, bytes);
  for (int n = 512; n < LENGTHS; n++)
    if (by_length[n]) fprintf(stderr, "LENGTH %d %llu\n", n, by_length[n]);
}
EOF
gcc -O2 -shared -fPIC -o "$counter" target/memcpy-counter.c -ldl
# side calls [--bare]: "copies bytes" then "LENGTH n count" lines.
run() {
  LD_PRELOAD="$PWD/$counter" "$bin" --bench --profile-time 1 --case "$1" --calls "$2" \
    ${RESULT_BYTES:+--result-bytes "$RESULT_BYTES"} ${3:-} 2>&1 >/dev/null |
    grep -E '^(COPIES|LENGTH) '
}
# The per-call difference of two runs' reports.
per_call() {
  awk -v span=$((high - low)) '
    FNR == 1 { file++ }
    $1 == "COPIES" { c[file] = $2; b[file] = $3 }
    $1 == "LENGTH" { n[file, $2] = $3; lengths[$2] = 1 }
    END {
      printf "%.1f %.0f", (c[2] - c[1]) / span, (b[2] - b[1]) / span
      for (l in lengths) {
        per = (n[2, l] - n[1, l]) / span
        if (per >= 0.5) printf " %dx%.0f", l, per
      }
      printf "\n"
    }' "$@"
}
IFS=, read -ra cases <<<"${CASES:-run_text,rig tool,rig set,rmcp server,swiftide tool}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-16s %-9s %8s %9s  %s\n' case side copies bytes "copies of 512 B or more (length x per call)"
for c in "${cases[@]}"; do
  for side in measured bare; do
    flag=
    [ "$side" = bare ] && flag=--bare
    run "$c" "$low" $flag >"$tmp/low"
    run "$c" "$high" $flag >"$tmp/high"
    read -r copies bytes big <<<"$(per_call "$tmp/low" "$tmp/high") "
    printf '%-16s %-9s %8s %9s  %s\n' "$c" "$side" "$copies" "$bytes" "$big"
  done
done
