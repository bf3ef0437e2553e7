#!/usr/bin/env bash
# Runs every test of the project, installing first what the tests need.
#
#   scripts/test.sh            install peers, then fmt, clippy, the test suite and the dependency check
#   TOOLSIZE_SKIP_INSTALL=1    do not install (the peers are already there)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

install_peers() {
  # Debian packages the tests start on loopback ports.
  # prometheus: its promtool checks /metrics (tests/collector_metrics.rs).
  local apt_pkgs=(python3 python3-pip prometheus)
  local missing=()
  for p in "${apt_pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # Python packages: the real OpenTelemetry SDK and OTLP exporters used as clients.
  if [ -f tests/requirements.txt ]; then
    log "pip install -r tests/requirements.txt"
    python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt
  fi
}

if [ "${TOOLSIZE_SKIP_INSTALL:-0}" != 1 ]; then
  install_peers
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --all-targets --all-features -- -D warnings

log "dependency check: the library without default features compiles no server crates"
scripts/check-lean-deps.sh

log "cargo test --all-features"
cargo test --all-features --no-fail-fast

log "benches compile"
cargo bench --all-features --no-run
