#!/usr/bin/env bash
# Proves each artifact that scripts/dist.sh wrote into target/dist/ installs and runs where no
# Rust is installed: every toolsize run below has cargo, rustup and ~/.cargo stripped from PATH.
#
#   scripts/dist-test.sh            install what the checks need (below), then check
#   TOOLSIZE_SKIP_INSTALL=1         do not install
#
#   SHA256SUMS      every file matches
#   static binary   `file` and `ldd` say static; from an empty directory with an empty
#                   environment: --version, then `serve` answers /healthz (the time to the
#                   first answer is printed) and stops with exit 0 on SIGTERM
#   wheel           pip install into a fresh venv (--no-index: nothing fetched); `toolsize` on
#                   PATH; --version; `demo` serves /healthz and fires its alert
#                   (/api/v1/alerts), exit 0 on SIGTERM
#   npm             both tarballs into a fresh prefix (--offline); the same through the
#                   launcher (which passes SIGTERM on)
#   .deb            dpkg -i on this machine: user, state directory, conffile, unit
#                   (systemd-analyze verify), completions, man pages; the unit's command run as
#                   the toolsize user writes its snapshot into /var/lib/toolsize; dpkg --purge
#                   removes every file, the directories and the user
#   image           the OCI archive's config (non-root, volume, ports, all-interface addresses)
#                   and its rootfs, exported; the entrypoint run from that rootfs (chroot, as
#                   uid 65532, in a network namespace of its own: loopback only) answers /healthz
#                   and writes its snapshot into the volume; `podman load` takes the archive.
#                   Running the image itself needs a container runtime, and podman's crun
#                   cannot start one where the sandbox forbids its setrlimit calls (here:
#                   "crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission
#                   denied"); the rootfs run checks everything but the runtime's isolation.
#   Kubernetes      kubernetes-validate --strict (offline schemas, Kubernetes 1.29 and the
#                   newest), the ServiceMonitor against the Prometheus Operator's schema, and the
#                   manifests' cross-references (tests/dist/k8s_check.py)
#
# With CI=true a missing tool is a failure (every check needs its tool); the script stops at
# the first failing check and, whatever happens, leaves the .deb purged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }
fail() { printf 'dist-test: FAILED: %s\n' "$*" >&2; exit 1; }

KUBERNETES_VALIDATE_VERSION=1.37.0
TOOLS=target/dist-tools
OUT=target/dist
ROOT=$(pwd)
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
DEMO_ALERT=ToolResultOverCeiling

install_tools() {
  # file: reads the binary's linkage; systemd-analyze (systemd): verifies the packaged unit;
  # unshare, setpriv (util-linux) and ip (iproute2): the image's entrypoint in a network
  # namespace of its own, as its user; adduser: the .deb's maintainer scripts.
  local missing=()
  command -v file >/dev/null 2>&1 || missing+=(file)
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
  { command -v unshare && command -v setpriv; } >/dev/null 2>&1 || missing+=(util-linux)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v adduser >/dev/null 2>&1 || missing+=(adduser)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  #   podman: loads the image archive (it runs no container here).
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [ -x "$TOOLS/bin/python" ] || python3 -m venv "$TOOLS"
  log "pip install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION ($TOOLS)"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  log "npm ci (tests/dist/servicemonitor: the Prometheus Operator's schemas)"
  (cd tests/dist/servicemonitor && npm ci --no-audit --no-fund --loglevel=error)
}

if [ "${TOOLSIZE_SKIP_INSTALL:-0}" != 1 ]; then
  install_tools
fi
[ -f "$OUT/SHA256SUMS" ] || fail "no $OUT/SHA256SUMS: run scripts/dist.sh first"
started=$(date +%s)

# PATH without Rust: every entry naming cargo or rustup goes, and so does a toolsize on it.
NORUST_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -e cargo -e rustup | paste -sd: -)
if PATH=$NORUST_PATH command -v cargo >/dev/null 2>&1 || PATH=$NORUST_PATH command -v rustc >/dev/null 2>&1; then
  fail "cargo or rustc is still on the stripped PATH ($NORUST_PATH)"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/toolsize-dist-test.XXXXXX")
deb_installed=0
cleanup() {
  if [ "$deb_installed" = 1 ]; then
    dpkg --purge toolsize >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
# One check passed.
pass() { passed=$((passed + 1)); }
# Runs "$@" (after the label), failing with the label if it fails, its output indented.
indent() {
  local label=$1 out
  shift
  out=$("$@") || fail "$label"
  printf '%s\n' "$out" | sed "s/^/    $label: /"
}
# Runs "$@" with PATH stripped of Rust.
norust() { env PATH="$NORUST_PATH" "$@"; }
# `toolsize --version` of the command "$@" prints this release's version.
check_version() {
  local said
  said=$(norust "$@" --version) || fail "$* --version failed"
  case "$said" in *"$VERSION"*) ;; *) fail "$* --version said '$said', not $VERSION" ;; esac
  printf '    toolsize --version: %s\n' "$(printf '%s' "$said" | head -n1)"
}
# The demo of the command "$@" on free loopback ports: /healthz, its alert, exit 0 on SIGTERM.
check_demo() {
  local data="$work/demo-data-$RANDOM"
  indent "demo" norust python3 tests/dist/smoke.py --alert "$DEMO_ALERT" -- "$@" demo \
    --otlp-grpc-addr '{grpc}' --otlp-http-addr '{http}' --admin-addr '{admin}' --data-dir "$data"
}

log "SHA256SUMS"
(cd "$OUT" && sha256sum --quiet -c SHA256SUMS) || fail "a checksum does not match"

pass
log "static binary"
tarball="$OUT/toolsize-$VERSION-x86_64-unknown-linux-musl.tar.gz"
mkdir -p "$work/tar" "$work/empty"
tar -xzf "$tarball" -C "$work/tar"
tree="$work/tar/toolsize-$VERSION-x86_64-unknown-linux-musl"
for f in toolsize LICENSE-MIT LICENSE-APACHE README.md toolsize.service completions/toolsize.bash \
  completions/_toolsize completions/toolsize.fish man/toolsize.1 man/toolsize-serve.1; do
  [ -e "$tree/$f" ] || fail "the tarball has no $f"
done
bin="$tree/toolsize"
linkage=$(file -b "$bin")
case "$linkage" in *"statically linked"* | *"static-pie linked"*) ;; *) fail "file: $linkage" ;; esac
case "$linkage" in *"not stripped"*) fail "not stripped: $linkage" ;; esac
ldd_said=$(ldd "$bin" 2>&1 || true)
case "$ldd_said" in *"not a dynamic executable"* | *"statically linked"*) ;; *) fail "ldd: $ldd_said" ;; esac
size=$(stat -c %s "$bin")
printf '    %s\n    ldd: %s\n    size: %s bytes (%s MiB), stripped\n' "$linkage" "$ldd_said" "$size" \
  "$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')"
# From an empty directory with an empty environment: no config, no HOME, nothing on PATH.
(cd "$work/empty" && env -i "$bin" --version) | grep -q "$VERSION" || fail "--version from an empty directory"
python=$(command -v python3)
# shellcheck disable=SC2016 # expanded by the inner shell
indent "serve from an empty directory" sh -c 'cd "$1" && shift && exec env -i "$@"' sh "$work/empty" \
  "$python" "$ROOT/tests/dist/smoke.py" -- "$bin" serve \
  --otlp-grpc-addr '{grpc}' --otlp-http-addr '{http}' --admin-addr '{admin}' --data-dir data
[ -z "$(ls -A "$work/empty" | grep -v '^data$')" ] || fail "serve left files beside its data dir: $(ls -A "$work/empty")"

pass
log "wheel (fresh venv, no index)"
wheel=$(ls "$OUT"/toolsize-"$VERSION"-*.whl)
case "$(basename "$wheel")" in
  *-py3-none-manylinux*_x86_64.*musllinux_1_1_x86_64.whl) ;;
  *) fail "wheel tags: $(basename "$wheel")" ;;
esac
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
[ "$(PATH="$work/venv/bin:$NORUST_PATH" command -v toolsize)" = "$work/venv/bin/toolsize" ] ||
  fail "the wheel put no toolsize on the venv's PATH"
check_version env PATH="$work/venv/bin:$NORUST_PATH" toolsize
check_demo env PATH="$work/venv/bin:$NORUST_PATH" toolsize

pass
log "npm (fresh prefix, offline)"
npm install -g --offline --no-audit --no-fund --silent --prefix "$work/npm" \
  "$ROOT/$OUT/toolsize-linux-x64-$VERSION.tgz" "$ROOT/$OUT/toolsize-$VERSION.tgz"
[ "$(PATH="$work/npm/bin:$NORUST_PATH" command -v toolsize)" = "$work/npm/bin/toolsize" ] ||
  fail "npm put no toolsize on the prefix's PATH"
check_version env PATH="$work/npm/bin:$NORUST_PATH" toolsize
check_demo env PATH="$work/npm/bin:$NORUST_PATH" toolsize

pass
log ".deb (dpkg -i, then purge)"
deb="$OUT/toolsize_${VERSION}_amd64.deb"
[ "$(dpkg-deb --field "$deb" Version)" = "$VERSION" ] || fail "the .deb's version"
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$' >"$work/deb-files"
if getent passwd toolsize >/dev/null; then fail "a toolsize user exists before the .deb is installed"; fi
# dpkg takes its lock or fails at once; wait for another install to finish first.
for _ in $(seq 60); do
  if dpkg -i "$deb" >"$work/dpkg.log" 2>&1; then
    deb_installed=1
    break
  fi
  grep -q 'lock' "$work/dpkg.log" || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
  sleep 5
done
[ "$deb_installed" = 1 ] || fail "dpkg lock held for 5 minutes"
getent passwd toolsize >/dev/null || fail "no toolsize user"
[ "$(stat -c '%U:%G %a' /var/lib/toolsize)" = "toolsize:toolsize 750" ] ||
  fail "/var/lib/toolsize is $(stat -c '%U:%G %a' /var/lib/toolsize)"
[ "$(stat -c '%U:%G %a' /etc/toolsize/config.toml)" = "root:toolsize 640" ] ||
  fail "/etc/toolsize/config.toml is $(stat -c '%U:%G %a' /etc/toolsize/config.toml)"
dpkg-query -W -f='${Conffiles}\n' toolsize | grep -q '/etc/toolsize/config.toml' ||
  fail "/etc/toolsize/config.toml is not a conffile"
unit=/usr/lib/systemd/system/toolsize.service
for f in /usr/bin/toolsize "$unit" /usr/share/bash-completion/completions/toolsize \
  /usr/share/zsh/vendor-completions/_toolsize /usr/share/fish/vendor_completions.d/toolsize.fish \
  /usr/share/man/man1/toolsize.1.gz /usr/share/doc/toolsize/copyright; do
  [ -e "$f" ] || fail "the .deb installed no $f"
done
grep -q '^ExecStart=/usr/bin/toolsize serve --config /etc/toolsize/config.toml' "$unit" ||
  fail "the unit's ExecStart: $(grep ExecStart "$unit")"
verify=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $verify"
case "$verify" in *toolsize.service:*) fail "systemd-analyze verify: $verify" ;; esac
echo "    systemd-analyze verify $unit: clean"
check_version /usr/bin/toolsize
# The unit's command as the unit runs it (user, configuration, state directory), on free ports.
indent "the unit's command as toolsize" norust python3 tests/dist/smoke.py -- \
  setpriv --reuid toolsize --regid toolsize --init-groups \
  env TOOLSIZE_OTLP_GRPC_ADDR='{grpc}' TOOLSIZE_OTLP_HTTP_ADDR='{http}' TOOLSIZE_ADMIN_ADDR='{admin}' \
  /usr/bin/toolsize serve --config /etc/toolsize/config.toml --data-dir /var/lib/toolsize
[ -n "$(find /var/lib/toolsize -type f -user toolsize)" ] || fail "no snapshot written in /var/lib/toolsize"
dpkg --purge toolsize >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg --purge"; }
deb_installed=0
left=$(while read -r f; do if [ -e "$f" ]; then echo "$f"; fi; done <"$work/deb-files")
[ -z "$left" ] || fail "files left after purge: $left"
for d in /etc/toolsize /var/lib/toolsize; do [ ! -e "$d" ] || fail "$d left after purge"; done
if getent passwd toolsize >/dev/null; then fail "the toolsize user is left after purge"; fi
if getent group toolsize >/dev/null; then fail "the toolsize group is left after purge"; fi
echo "    purged: $(wc -l <"$work/deb-files") files, /etc/toolsize, /var/lib/toolsize and the user gone"

pass
log "image (OCI archive: config, rootfs, entrypoint)"
image="$OUT/toolsize-$VERSION-image.oci.tar"
mkdir -p "$work/rootfs"
python3 tests/dist/oci_rootfs.py "$image" "$work/rootfs" >"$work/image-config.json"
python3 - "$work/image-config.json" "$VERSION" <<'EOF' || fail "the image's config"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
env = dict(e.split("=", 1) for e in c["Env"])
checks = {
    "non-root user": c.get("User") == "65532:65532",
    "volume /var/lib/toolsize": "/var/lib/toolsize" in c.get("Volumes", {}),
    "ports 4317 4318 9464": set(c.get("ExposedPorts", {})) == {"4317/tcp", "4318/tcp", "9464/tcp"},
    "all interfaces": all(env.get(k, "").startswith("0.0.0.0:") for k in
                          ("TOOLSIZE_OTLP_GRPC_ADDR", "TOOLSIZE_OTLP_HTTP_ADDR", "TOOLSIZE_ADMIN_ADDR")),
    "data dir": env.get("TOOLSIZE_DATA_DIR") == "/var/lib/toolsize",
    "entrypoint": c.get("Entrypoint") == ["/usr/bin/toolsize"] and c.get("Cmd") == ["serve"],
    "version label": c.get("Labels", {}).get("org.opencontainers.image.version") == sys.argv[2],
}
bad = [k for k, ok in checks.items() if not ok]
print("    config: " + ", ".join(checks) + (": ok" if not bad else f"; WRONG: {bad}"))
sys.exit(1 if bad else 0)
EOF
files=$(cd "$work/rootfs" && find . -mindepth 1 | sort | paste -sd' ' -)
[ "$files" = "./usr ./usr/bin ./usr/bin/toolsize ./var ./var/lib ./var/lib/toolsize" ] ||
  fail "the rootfs holds: $files"
[ "$(stat -c '%u:%g' "$work/rootfs/var/lib/toolsize")" = "65532:65532" ] || fail "the volume's owner"
echo "    rootfs: $files"
# The entrypoint with the image's environment, as its user, chrooted into its rootfs, in a
# network namespace of its own (its 0.0.0.0 is that namespace's loopback only).
image_env=$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["config"]["Env"]))' \
  "$work/image-config.json")
# shellcheck disable=SC2086 # the image's variables, one word each
# shellcheck disable=SC2016 # expanded by the inner shell
indent "entrypoint from the rootfs" norust unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh \
  python3 tests/dist/smoke.py --admin 127.0.0.1:9464 -- \
  env -i $image_env chroot --userspec=65532:65532 "$work/rootfs" /usr/bin/toolsize serve
[ -n "$(find "$work/rootfs/var/lib/toolsize" -type f -uid 65532)" ] || fail "no snapshot in the volume"
# podman loads the archive into a store of its own (loading needs no container runtime).
podman_() { podman --root "$work/podman/root" --runroot "$work/podman/run" --storage-driver vfs "$@"; }
podman_ load -q -i "$image" >/dev/null || fail "podman load"
loaded=$(podman_ image inspect --format '{{.Config.User}} {{index .Config.Labels "org.opencontainers.image.version"}}' \
  "toolsize:$VERSION") || fail "podman has no toolsize:$VERSION"
[ "$loaded" = "65532:65532 $VERSION" ] || fail "podman inspect: $loaded"
echo "    podman load: toolsize:$VERSION, user 65532:65532"

pass
log "Kubernetes manifests"
# Kubernetes 1.29: the first with native sidecars (sidecar.yaml); the package's newest.
for k in 1.29.0 "$KUBERNETES_VALIDATE_VERSION"; do
  # The ServiceMonitor is a custom resource these schemas do not have: checked below.
  said=$("$TOOLS/bin/kubernetes-validate" --strict -k "$k" "$OUT"/kubernetes/*.yaml 2>&1) ||
    fail "kubernetes-validate --strict -k $k: $said"
  printf '%s\n' "$said" | grep -v "find schema for kind ServiceMonitor" |
    sed "s/^/    kubernetes-validate --strict -k $k: /"
done
indent "cross-references" "$TOOLS/bin/python" tests/dist/k8s_check.py "$VERSION" \
  "$work/servicemonitors.json" "$OUT"/kubernetes/*.yaml
indent "schema" node tests/dist/servicemonitor/check.mjs "$work/servicemonitors.json"

pass
log "every artifact checked in $(($(date +%s) - started)) s"
echo "$passed passed, 0 failed"
