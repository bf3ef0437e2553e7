#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time, each from its seed corpus in fuzz/corpus/,
# and prints executions and findings per target. Needs a nightly toolchain and cargo-fuzz:
#
#   rustup toolchain install nightly && cargo install cargo-fuzz
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# The seeds stay as they are: new interesting inputs go to fuzz/corpus-run/<target>/ (not
# committed, kept between runs). A crash is saved under fuzz/artifacts/<target>/ and makes the
# script exit 1. Copy it into fuzz/corpus/<target>/ once
# fixed: `cargo test --all-features --test fuzz_corpus` replays every corpus on stable.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-60}"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "needs: rustup toolchain install nightly && cargo install cargo-fuzz" >&2
  exit 2
fi
status=0
for target in otlp_protobuf otlp_json config args_hash; do
  log="$(mktemp)"
  mkdir -p "corpus-run/$target"
  if cargo +nightly fuzz run -O "$target" "corpus-run/$target" "corpus/$target" -- \
      -max_total_time="$secs" -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see fuzz/artifacts/$target/)"
    status=1
    tail -40 "$log" >&2
  fi
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  corpus=$(ls "corpus-run/$target" | wc -l)
  printf '%-14s %ss  %s executions  %s new inputs kept  %s\n' "$target" "$secs" "${execs:-?}" "$corpus" "$result"
  rm -f "$log"
done
exit "$status"
