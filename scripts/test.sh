#!/usr/bin/env bash
# Runs every test of the project, installing first what the tests need.
#
#   scripts/test.sh            install peers, then fmt, clippy (which also compiles the benches and
#                              examples), the dependency check and the test suite
#   TOOLSIZE_SKIP_INSTALL=1    do not install (the peers are already there)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

install_peers() {
  # Debian packages for the peers the tests run, by the command each provides:
  #   python3: the Python OpenTelemetry SDK clients and the CPython comparisons;
  #   prometheus, promtool (package prometheus): checks /metrics and the alert rules, scrapes
  #     the daemons for the dashboard and fleet tests (tests/collector_metrics.rs,
  #     tests/alerts_rules.rs, tests/dashboard_live.rs, tests/fleet_p95.rs);
  #   prometheus-alertmanager, amtool (package prometheus-alertmanager): receives the daemon's
  #     alerts, checks alerts/alertmanager.example.yml (tests/collector_alerts.rs);
  #   chromium: renders the status page at / headless (tests/status_page.rs);
  #   nodejs, npm: run @modelcontextprotocol/server-everything behind `toolsize mcp`
  #     (tests/mcp_proxy.rs), installed from tests/npm/package-lock.json below.
  local missing=()
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
  { command -v prometheus-alertmanager && command -v amtool; } >/dev/null 2>&1 ||
    missing+=(prometheus-alertmanager)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  { command -v node && command -v npm; } >/dev/null 2>&1 || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Python packages: the real OpenTelemetry SDK and OTLP exporters, used as clients.
  log "pip install -r tests/requirements.txt"
  # (Debian's own python3 marks its site-packages as externally managed; this is a test machine.)
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
    --root-user-action=ignore -r tests/requirements.txt
  # npm packages: the MCP reference server, pinned by the committed lockfile.
  log "npm ci (tests/npm)"
  (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
}

if [ "${TOOLSIZE_SKIP_INSTALL:-0}" != 1 ]; then
  install_peers
fi

# fmt and clippy are rustup components a minimal toolchain may lack.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  log "rustup component add rustfmt clippy"
  rustup component add rustfmt clippy
fi

# The peers were installed above: a test that cannot find one fails rather than skips.
export CI="${CI:-true}"

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --all-targets --all-features -- -D warnings

log "dependency check: the library without default features compiles no server crates"
scripts/check-lean-deps.sh

log "cargo test --all-features"
cargo test --all-features --no-fail-fast
