#!/usr/bin/env bash
# Makes every release artifact of the version in Cargo.toml into OUT:
#
#   bash scripts/release.sh OUT
#
#   tachyon-V-x86_64-unknown-linux-musl.tar.gz   the tachyon command, linked statically (runs
#                                                with nothing installed), README, CHANGELOG
#   tachyon-c-V-x86_64-linux-gnu.tar.gz          the C library as scripts/capi-install.sh
#                                                installs it: lib/ (static, shared),
#                                                include/tachyon.h, lib/pkgconfig/ (relocatable
#                                                with pkg-config --define-prefix),
#                                                lib/cmake/tachyon/ (tachyon::tachyon)
#   tachyon_profiles-V-cp39-abi3-*.whl           the Python package, every CPython from 3.9
#   tachyon_profiles-V.tar.gz                    its sdist (builds with a Rust toolchain)
#   tachyon-core-V.crate, tachyon-V.crate        the crates, as `cargo package` makes and
#                                                verifies them
#   SHA256SUMS                                   sha256sum -c reads it
#
# The archives are reproducible: names sorted, owner root, every time the last commit's.
# Needs the Python step's maturin (scripts/python.sh --prepare makes it) and musl-tools (as
# root it installs them); says which artifact failed. scripts/release-check.sh installs each
# artifact afresh and runs the README's main job with it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
[ $# -eq 1 ] || { printf 'usage: bash scripts/release.sh OUT\n' >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
ROOT=$PWD
fail() { printf 'release: %s: %s\n' "$1" "$2" >&2; exit 1; }
step() { printf -- '--> %s\n' "$*"; }
V=$CAPI_VERSION
MUSL=x86_64-unknown-linux-musl
MATURIN=${TACHYON_PYTHON_CACHE:-$HOME/.cache/tachyon-python}/maturin/bin/maturin
[ -x "$MATURIN" ] || bash scripts/python.sh --prepare >/dev/null || fail maturin "scripts/python.sh --prepare failed"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
rm -f "$OUT"/tachyon-*.tar.gz "$OUT"/tachyon_profiles-* "$OUT"/*.crate "$OUT"/SHA256SUMS

# Reproducible archives: the last commit's time on every file (SOURCE_DATE_EPOCH if set).
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
archive() { # archive DIR NAME: OUT/NAME.tar.gz of DIR/NAME
  tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" -cf - "$2" \
    | gzip -n -9 >"$OUT/$2.tar.gz"
}

step "the tachyon command for $MUSL, linked statically (built in the background, in target/musl)"
if ! command -v musl-gcc >/dev/null; then
  [ "$(id -u)" = 0 ] || fail "musl" "musl-gcc is missing and this is not root (apt-get install musl-tools)"
  DEBIAN_FRONTEND=noninteractive timed download apt-get install -y -qq --no-install-recommends musl-tools >/dev/null \
    || fail "musl" "apt-get install musl-tools failed"
fi
grep -qx "$MUSL" <<<"$(rustup target list --installed)" || timed download rustup target add "$MUSL" \
  || fail "musl" "rustup target add $MUSL failed"
# zstd's and ring's C sources are compiled with musl-gcc (the cc crate's choice for the target).
# The release profile's fat LTO links on one core for about a minute: the build runs beside
# the other artifacts' (whose own LTO link is the same), in a target folder of its own, since
# cargo locks target/release for a build with --target too.
background "$W/logs" static-command env CARGO_TARGET_DIR="$ROOT/target/musl" \
  bash -c '. scripts/harness.sh && cargo build --release --locked -q -p tachyon --bin tachyon --target "$1"' _ "$MUSL"

step "the C library for x86_64-linux-gnu, as scripts/capi-install.sh installs it"
D=$W/tachyon-c-$V-x86_64-linux-gnu
# Installed for /usr/local and staged; the files find their prefix from where they are.
bash scripts/capi-install.sh --prefix /usr/local --destdir "$W/c" >/dev/null || fail "C library" "scripts/capi-install.sh failed"
mv "$W/c/usr/local" "$D"
cp README.md CHANGELOG.md docs/c-api.md "$D/"
archive "$W" "tachyon-c-$V-x86_64-linux-gnu"

step "the abi3 wheel and the sdist (maturin)"
(cd python && CARGO_TARGET_DIR="$ROOT/target" timed build "$MATURIN" build --release --locked --out "$W/wheels" \
  -i /usr/bin/python3.11) >/dev/null || fail "wheel" "maturin build failed"
(cd python && timed build "$MATURIN" sdist --out "$W/wheels") >/dev/null 2>&1 || fail "sdist" "maturin sdist failed"
cp "$W"/wheels/tachyon_profiles-"$V"-cp39-abi3-*.whl "$W/wheels/tachyon_profiles-$V.tar.gz" "$OUT/" \
  || fail "wheel" "no abi3 wheel or sdist of version $V"

step "the crates (cargo package, each verified by a build from its packaged sources)"
# cargo package verifies tachyon against the tachyon-core it packaged, through a local
# registry. cargo takes a registry's crate of a given version to be immutable: it unpacks it
# under $CARGO_HOME/registry/src/-HASH/ once per version and registry path, and does not
# build it again in target/debug. An earlier run's tachyon-core of the same version (another
# commit's sources; the build cache keeps target/ between runs) would then be verified
# against instead of this one: both are removed first. (crates.io's folders are index.*.)
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/tachyon-core-"$V" target/debug/.fingerprint/tachyon-core-*
cargo package --locked -q -p tachyon-core -p tachyon || fail "crates" "cargo package failed"
cp "target/package/tachyon-core-$V.crate" "target/package/tachyon-$V.crate" "$OUT/"

background_wait static-command || fail "musl" "cargo build failed"
D=$W/tachyon-$V-$MUSL
mkdir -p "$D"
install -m 755 "target/musl/$MUSL/release/tachyon" "$D/tachyon"
strip "$D/tachyon"
cp README.md CHANGELOG.md "$D/"
archive "$W" "tachyon-$V-$MUSL"

(cd "$OUT" && sha256sum -- *.tar.gz *.whl *.crate >SHA256SUMS) || fail "SHA256SUMS" "sha256sum failed"
step "in $OUT:"
(cd "$OUT" && ls -l --time-style=+ -- *.tar.gz *.whl *.crate SHA256SUMS | awk '{print "    " $5 "\t" $NF}')
