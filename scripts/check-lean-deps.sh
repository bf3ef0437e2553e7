#!/usr/bin/env bash
# Fails when `toolsize` as `cargo add toolsize` gives it (default features), or with
# `default-features = false`, would pull a server or network crate.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tonic|axum|hdrhistogram|hyper|hyper-util|h2|reqwest|tokio|opentelemetry-proto|prometheus-client) '
for flags in "" "--no-default-features"; do
  # shellcheck disable=SC2086 # the empty string means no flag
  tree=$(cargo tree -e normal,build $flags --prefix none --format '{p}' | sort -u)
  if bad=$(printf '%s\n' "$tree" | grep -E "$forbidden"); then
    printf 'toolsize %s pulls server crates:\n%s\n' "${flags:-with its default features}" "$bad" >&2
    exit 1
  fi
  printf 'lean: %d crates (%s), none of them a server crate\n' \
    "$(printf '%s\n' "$tree" | wc -l)" "${flags:-default features}"
done
