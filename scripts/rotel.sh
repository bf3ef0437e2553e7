# Sourced by the benchmark scripts that run toolsize beside rotel-agent (PyPI `rotel`, the
# version tests/requirements.txt pins), a plain OTLP receiver with a blackhole exporter.
#
#   start_rotel     installs rotel if needed, builds the release daemon and load generator,
#                   starts rotel-agent on free loopback ports and waits for it; sets $agent,
#                   $loadgen, $rotel (its pid), $rotel_http and $rotel_grpc (its ports), and
#                   stops it when the script exits.

ROTEL_VERSION=0.0.1a15

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_rotel() {
  if ! python3 -c "import rotel" 2>/dev/null; then
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
      --root-user-action=ignore --pre "rotel==$ROTEL_VERSION"
  fi
  agent="$(python3 -c 'import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')"
  cargo build -q --release --features collector --bin toolsize --example loadgen
  loadgen=target/release/examples/loadgen
  rotel_http=$(free_port)
  rotel_grpc=$(free_port)
  "$agent" start --otlp-http-endpoint "127.0.0.1:$rotel_http" \
    --otlp-grpc-endpoint "127.0.0.1:$rotel_grpc" \
    --exporter blackhole --pid-file "$(mktemp -u)" >/dev/null 2>&1 &
  rotel=$!
  trap 'kill $rotel 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$rotel_http") 2>/dev/null && break
    sleep 0.1
  done
}
