#!/usr/bin/env bash
# Runs every test of the project, installing first what the tests need.
#
#   scripts/test.sh            install peers, then fmt, clippy (which also compiles the benches and
#                              examples), the dependency check, the test suite, and the release
#                              artifacts built and proven (scripts/dist.sh, scripts/dist-test.sh)
#   TOOLSIZE_SKIP_INSTALL=1    do not install (the peers are already there)
#
# Where it installs: the Debian packages of the peers system-wide with apt-get (as root; only
# those missing, waiting up to 10 minutes for a held apt lock); every Python package into
# virtualenvs under target/ (target/python-venv, which the tests run, and the frameworks'
# target/frameworks-venv*), never into the system Python; npm packages under tests/.
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
  #   tmux: runs `toolsize top` in a terminal and reads its screen (tests/cli_top.rs);
  #   openssl: makes the CA and certificates of the TLS tests (tests/tls_auth.rs,
  #     tests/alerts_https.rs);
  #   curl: reads an https Alertmanager's API with the test CA (tests/alerts_https.rs);
  #   systemd-analyze (package systemd): verifies dist/systemd/toolsize.service
  #     (tests/systemd_unit.rs);
  #   nodejs, npm: run @modelcontextprotocol/server-everything behind `toolsize mcp` and the MCP
  #     Inspector's CLI in front of it (tests/mcp_proxy.rs, tests/mcp_http.rs), installed from
  #     tests/npm/package-lock.json below.
  local missing=()
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
  { command -v prometheus-alertmanager && command -v amtool; } >/dev/null 2>&1 ||
    missing+=(prometheus-alertmanager)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v tmux >/dev/null 2>&1 || missing+=(tmux)
  #   node, npm: the Vercel AI SDK agent of tests/collector_frameworks.rs; node also drives
  #     Chromium over DevTools in tests/status_page.rs (tests/pages/type_token.mjs).
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
  #   unshare (util-linux), ip (iproute2): the coding agents of tests/coding_agents.rs run in a
  #     network namespace of their own, loopback only.
  command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Python packages: the real OpenTelemetry SDK and OTLP exporters, used as clients, in the
  # tests' own virtualenv (tests/support/cli.rs `python3()` runs its python3 when it exists).
  log "pip install -r tests/requirements.txt (target/python-venv)"
  [ -x target/python-venv/bin/python3 ] || python3 -m venv target/python-venv
  target/python-venv/bin/python3 -m pip install -q --disable-pip-version-check \
    -r tests/requirements.txt
  # Agent frameworks (tests/collector_frameworks.rs), in a virtualenv of their own.
  log "pip install -r tests/requirements-frameworks.txt (target/frameworks-venv)"
  [ -x target/frameworks-venv/bin/python ] || python3 -m venv target/frameworks-venv
  target/frameworks-venv/bin/python -m pip install -q --disable-pip-version-check \
    -r tests/requirements-frameworks.txt
  # OpenLLMetry, Strands and Google ADK pin OpenTelemetry differently: a second virtualenv, from
  # a full `pip freeze` so pip resolves nothing.
  log "pip install -r tests/requirements-frameworks2.txt (target/frameworks-venv2)"
  [ -x target/frameworks-venv2/bin/python ] || python3 -m venv target/frameworks-venv2
  target/frameworks-venv2/bin/python -m pip install -q --disable-pip-version-check \
    -r tests/requirements-frameworks2.txt
  log "npm ci (tests/frameworks)"
  npm ci --prefix tests/frameworks --no-audit --no-fund --silent
  # npm packages: the MCP reference server and the MCP Inspector, pinned by the committed lockfile.
  log "npm ci (tests/npm)"
  (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
  # The coding agents (tests/coding_agents.rs): Claude Code, Codex, Gemini CLI, Qwen Code, opencode
  # and GitHub Copilot CLI, pinned by the committed lockfile.
  # `npm install`, not `npm ci`: opencode and Copilot list optional packages for other platforms
  # that the lockfile (made on linux-x64) does not hold, and `npm ci` refuses such a lockfile as
  # out of sync. `npm install` takes the locked versions and leaves the lockfile as it is.
  log "npm install (tests/agents/npm)"
  (cd tests/agents/npm && npm install --no-audit --no-fund --loglevel=error)
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
# A fresh clone builds everything once: incremental caches would only add gigabytes to its disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
log "disk before the build: $(df -h --output=avail . | tail -1 | tr -d ' ') free"

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --all-targets --all-features -- -D warnings

log "dependency check: the library without default features compiles no server crates"
scripts/check-lean-deps.sh

log "cargo test --all-features"
cargo test --all-features --no-fail-fast

# The dashboard and rules tests once more against a Prometheus with native histograms, where it
# keeps the native histograms instead of the classic buckets (the queries' `or` forms).
log "cargo test (dashboard and rules, Prometheus with native histograms)"
TOOLSIZE_PROMETHEUS_NATIVE=1 cargo test --all-features --no-fail-fast \
  --test dashboard_live --test alerts_rules --test collector_metrics
# The release artifacts, each installed and run with Rust off PATH (the wheel, the npm packages,
# the static tarball, the .deb, the image's rootfs, the Kubernetes manifests): one musl release
# build, about 3.5 minutes on an idle 2-core machine. TOOLSIZE_SKIP_INSTALL=1 skips their tools'
# installs too.
log "release artifacts: scripts/dist.sh, then scripts/dist-test.sh"
scripts/dist.sh
scripts/dist-test.sh
log "disk after the tests: $(df -h --output=avail . | tail -1 | tr -d ' ') free, target/ $(du -sh target 2>/dev/null | cut -f1)"
