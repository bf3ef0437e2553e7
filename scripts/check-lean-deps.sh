#!/usr/bin/env bash
# Fails when `toolsize` built with `default-features = false` would pull a server crate.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tonic|axum|hdrhistogram|hyper|hyper-util|h2|reqwest|tokio|opentelemetry-proto|prometheus-client) '
tree=$(cargo tree -e normal,build --no-default-features --prefix none --format '{p}' | sort -u)
if bad=$(printf '%s\n' "$tree" | grep -E "$forbidden"); then
  printf 'default-features = false pulls server crates:\n%s\n' "$bad" >&2
  exit 1
fi
printf 'lean: %d crates without default features, none of them a server crate\n' "$(printf '%s\n' "$tree" | wc -l)"
