#!/usr/bin/env bash
# Builds every release artifact of toolsize from a clone into target/dist/, with SHA256SUMS:
#
#   toolsize-<v>-x86_64-unknown-linux-musl.tar.gz   static binary, LICENSE-*, README, systemd
#                                                   unit, shell completions, man pages
#   toolsize-<v>-py3-none-<tags>.whl               `pip install` / `pipx` / `uvx`: the binary on PATH
#   toolsize-<v>.tgz, toolsize-linux-x64-<v>.tgz    npm: the launcher and its platform package
#   toolsize_<v>_amd64.deb                          the service, user, conffile, completions, man
#   toolsize-<v>-image.oci.tar                      OCI image (FROM scratch), `podman load -i`
#   kubernetes/toolsize.yaml, kubernetes/sidecar.yaml   manifests naming that image
#
#   scripts/dist.sh                  install the build tools (below), then build
#   TOOLSIZE_SKIP_INSTALL=1          do not install (the tools are already there)
#
# One cargo build: maturin compiles the musl binary (x86_64-unknown-linux-musl, features
# collector,tls, stripped) while it makes the wheel, and every other artifact packs that same
# file. A static musl binary runs on any x86-64 Linux, so one build serves pip users on glibc
# and musl distributions, npm, the .deb and the image alike.
#
# Tools, and why each:
#   maturin (PyPI, pinned): the wheel builder of Rust command-line tools on PyPI (ruff, uv,
#     rotel); `bindings = "bin"` (pyproject.toml) puts the binary in the wheel's scripts, so
#     installing it puts `toolsize` on PATH. It drives cargo itself, hence it makes the build.
#   wheel (PyPI, pinned): `wheel tags` adds a musllinux tag to the manylinux ones maturin gives
#     the static binary (it checks the binary links no system library, and takes the lowest
#     manylinux tag): pip on Alpine and other musl systems takes only musllinux wheels.
#   npm pack (npm, with node): the two tarballs npm itself would publish.
#   dpkg-deb (Debian's dpkg): the .deb from a staged tree and three maintainer scripts
#     (dist/deb/), no debhelper: the package holds one static binary and its files.
#   buildah (Debian): builds dist/container/Containerfile without a daemon and writes the OCI
#     archive; it runs no container (FROM scratch has no RUN step), so it works where podman
#     cannot start one.
#   musl-tools (Debian): musl-gcc, the C compiler for the C parts of the static build (mimalloc,
#     ring).
#   cargo-dist was not taken: it drives its own CI and installers, builds neither a .deb nor an
#     image, and would add a second build per format.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

TARGET=x86_64-unknown-linux-musl
FEATURES=collector,tls
# Added to the wheel's manylinux tags: the static binary needs no libc of the system either.
WHEEL_MUSLLINUX=musllinux_1_1_x86_64
MATURIN_VERSION=1.16.0
WHEEL_VERSION=0.48.0
TOOLS=target/dist-tools
OUT=target/dist
STAGE=target/dist-stage

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
# Reproducible archives: every timestamp is the last commit's.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH

install_tools() {
  local missing=()
  command -v musl-gcc >/dev/null 2>&1 || missing+=(musl-tools)
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
  [ -x "$TOOLS/bin/python" ] || python3 -m venv "$TOOLS"
  log "pip install maturin==$MATURIN_VERSION wheel==$WHEEL_VERSION ($TOOLS)"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin==$MATURIN_VERSION" "wheel==$WHEEL_VERSION"
}

if [ "${TOOLSIZE_SKIP_INSTALL:-0}" != 1 ]; then
  install_tools
fi

started=$(date +%s)
rm -rf "$OUT" "$STAGE"
mkdir -p "$OUT" "$STAGE"

log "maturin build: the static binary and the wheel ($TARGET, $FEATURES)"
# The features come from pyproject.toml ([tool.maturin]).
"$TOOLS/bin/maturin" build --release --strip --target "$TARGET" --out "$STAGE/wheel"
BIN="target/$TARGET/release/toolsize"
file "$BIN" | grep -Eq 'static(ally|-pie) linked' || {
  echo "$BIN is not statically linked: $(file "$BIN")" >&2
  exit 1
}
"$BIN" --version

log "wheel tags: + $WHEEL_MUSLLINUX"
"$TOOLS/bin/wheel" tags --remove --platform-tag "+$WHEEL_MUSLLINUX" "$STAGE"/wheel/*.whl >/dev/null
mv "$STAGE"/wheel/*.whl "$OUT/"

log "completions, man pages, configuration"
"$BIN" generate-assets "$STAGE/assets" >/dev/null
"$BIN" gen-config >"$STAGE/config.toml"

# A tar with no owner, mode or time of this machine in it.
reproducible_tar() { tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" "$@"; }

log "static tarball"
name="toolsize-$VERSION-$TARGET"
tree="$STAGE/$name"
mkdir -p "$tree"
install -m 0755 "$BIN" "$tree/toolsize"
install -m 0644 LICENSE-MIT LICENSE-APACHE README.md CHANGELOG.md dist/systemd/toolsize.service "$tree/"
cp -r "$STAGE/assets/completions" "$STAGE/assets/man" "$tree/"
reproducible_tar -C "$STAGE" -cf - "$name" | gzip -9n >"$OUT/$name.tar.gz"

log "npm packages"
npm_stage() { # $1: package directory under dist/npm/
  local dir="$STAGE/npm/$1"
  mkdir -p "$dir"
  cp -r "dist/npm/$1/." "$dir/"
  cp LICENSE-MIT LICENSE-APACHE "$dir/"
  # The version of Cargo.toml, in the package and in the optional dependency on the binary's.
  node -e '
    const fs = require("fs"), [file, version] = process.argv.slice(1);
    const p = JSON.parse(fs.readFileSync(file, "utf8"));
    p.version = version;
    for (const d of Object.keys(p.optionalDependencies || {})) p.optionalDependencies[d] = version;
    fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");
  ' "$dir/package.json" "$VERSION"
  echo "$dir"
}
dir=$(npm_stage linux-x64)
install -D -m 0755 "$BIN" "$dir/bin/toolsize"
npm pack --silent --pack-destination "$OUT" "./$dir" >/dev/null
dir=$(npm_stage toolsize)
cp README.md "$dir/"
npm pack --silent --pack-destination "$OUT" "./$dir" >/dev/null

log ".deb"
root="$STAGE/deb"
install -D -m 0755 "$BIN" "$root/usr/bin/toolsize"
# The unit of dist/systemd/, pointed at the packaged binary and configuration.
mkdir -p "$root/usr/lib/systemd/system"
sed -e 's|/usr/local/bin/toolsize|/usr/bin/toolsize|g' \
  -e 's|/etc/toolsize/toolsize.toml|/etc/toolsize/config.toml|g' \
  -e '/^# Install (docs/,/^#   sudo systemctl/c\# Installed by the toolsize .deb (enabled and started where systemd runs).' \
  dist/systemd/toolsize.service >"$root/usr/lib/systemd/system/toolsize.service"
install -D -m 0644 "$STAGE/config.toml" "$root/etc/toolsize/config.toml"
install -D -m 0644 "$STAGE/assets/completions/toolsize.bash" \
  "$root/usr/share/bash-completion/completions/toolsize"
install -D -m 0644 "$STAGE/assets/completions/_toolsize" "$root/usr/share/zsh/vendor-completions/_toolsize"
install -D -m 0644 "$STAGE/assets/completions/toolsize.fish" \
  "$root/usr/share/fish/vendor_completions.d/toolsize.fish"
mkdir -p "$root/usr/share/man/man1"
for page in "$STAGE"/assets/man/*.1; do
  gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
done
mkdir -p "$root/usr/share/doc/toolsize"
{
  printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
  printf 'Upstream-Name: toolsize\n\nFiles: *\nCopyright: The toolsize developers\n'
  printf 'License: MIT or Apache-2.0\n On Debian systems the Apache License 2.0 is in\n'
  printf ' /usr/share/common-licenses/Apache-2.0. The MIT license:\n .\n'
  sed -e 's/^$/./' -e 's/^/ /' LICENSE-MIT
} >"$root/usr/share/doc/toolsize/copyright"
gzip -9n <CHANGELOG.md >"$root/usr/share/doc/toolsize/changelog.gz"
mkdir -p "$root/DEBIAN"
install -m 0755 dist/deb/postinst dist/deb/prerm dist/deb/postrm "$root/DEBIAN/"
printf '/etc/toolsize/config.toml\n' >"$root/DEBIAN/conffiles"
sed -e "s/@VERSION@/$VERSION/" -e "s/@INSTALLED_SIZE@/$(du -sk --exclude=DEBIAN "$root" | cut -f1)/" \
  dist/deb/control >"$root/DEBIAN/control"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --build "$root" "$OUT/toolsize_${VERSION}_amd64.deb" >/dev/null

log "OCI image (buildah)"
context="$STAGE/image"
mkdir -p "$context/data"
install -m 0755 "$BIN" "$context/toolsize"
image="localhost/toolsize:$VERSION"
# vfs storage and chroot isolation: no overlay mount or user namespace needed on the build
# machine; the image has no RUN step, so nothing is run in it.
buildah_() { buildah --storage-driver vfs "$@"; }
buildah_ build --quiet --isolation chroot --timestamp "$SOURCE_DATE_EPOCH" --build-arg "VERSION=$VERSION" \
  -f dist/container/Containerfile -t "$image" "$context" >/dev/null
buildah_ push --quiet "$image" "oci-archive:$OUT/toolsize-$VERSION-image.oci.tar:toolsize:$VERSION"
buildah_ rmi "$image" >/dev/null

log "Kubernetes manifests"
mkdir -p "$OUT/kubernetes"
for m in dist/kubernetes/*.yaml; do
  sed "s/@VERSION@/$VERSION/g" "$m" >"$OUT/kubernetes/$(basename "$m")"
done

(cd "$OUT" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum >SHA256SUMS)
log "target/dist/ in $(($(date +%s) - started)) s:"
(cd "$OUT" && ls -l --time-style=+ . kubernetes | sed 1d)
