#!/usr/bin/env bash
# Installs every artifact scripts/release.sh made into a fresh prefix or virtual environment
# and runs the README's main job with it (a flame graph and `info` of examples/stdlib_work.pyb),
# whose output must be the cargo-built command's byte for byte:
#
#   bash scripts/release-check.sh OUT
#
# - SHA256SUMS holds every artifact and `sha256sum -c` accepts it;
# - the static binary's archive, unpacked: no dynamic section needs anything (ldd: statically
#   linked), and it runs under `env -i` (no PATH, no HOME, nothing);
# - the C tarball, unpacked anywhere: capi/tests/installed/check.sh on it (C and C++ with
#   pkg-config --define-prefix and CMake, shared and static, read by CPython 3.15.2);
# - the wheel and the sdist, each pip-installed into a fresh virtual environment of Debian's
#   Python 3.11: the main job with their `tachyon`, then python/tests/test_command.py;
# - the crates, unpacked: the command built from them alone (tachyon-core patched in from
#   its .crate, nothing from the repository), then the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
[ $# -eq 1 ] || { printf 'usage: bash scripts/release-check.sh OUT\n' >&2; exit 2; }
OUT=$(cd "$1" && pwd)
ROOT=$PWD
fail() { printf 'release check: %s: %s\n' "$1" "$2" >&2; exit 1; }
step() { printf -- '--> %s\n' "$*"; }
V=$CAPI_VERSION
C=${TACHYON_PYTHON_CACHE:-$HOME/.cache/tachyon-python}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
EXAMPLE=$ROOT/examples/stdlib_work.pyb

step "SHA256SUMS"
(cd "$OUT" && sha256sum -c --quiet SHA256SUMS) || fail SHA256SUMS "a checksum does not match"
for f in "tachyon-$V-x86_64-unknown-linux-musl.tar.gz" "tachyon-c-$V-x86_64-linux-gnu.tar.gz" \
  "tachyon_profiles-$V.tar.gz" "tachyon-core-$V.crate" "tachyon-$V.crate"; do
  grep -q "  $f\$" "$OUT/SHA256SUMS" || fail SHA256SUMS "$f is not listed"
done
WHEEL=$(cd "$OUT" && ls tachyon_profiles-"$V"-cp39-abi3-*.whl) || fail wheel "no abi3 wheel in $OUT"
grep -q "  $WHEEL\$" "$OUT/SHA256SUMS" || fail SHA256SUMS "$WHEEL is not listed"

# The main job's outputs from the cargo-built command, which every artifact must reproduce.
release_build || fail "reference" "the release build"
mkdir -p "$W/reference"
target/release/tachyon convert "$EXAMPLE" --to flamegraph -o "$W/reference/flame.svg"
target/release/tachyon info "$EXAMPLE" >"$W/reference/info.txt"
main_job() { # main_job LABEL COMMAND...: the README's main job with COMMAND, compared
  local label=$1
  shift
  mkdir -p "$W/$label"
  (cd "$W/$label" && "$@" convert "$EXAMPLE" --to flamegraph -o flame.svg && "$@" info "$EXAMPLE" >info.txt) \
    || fail "$label" "the main job failed"
  cmp -s "$W/reference/flame.svg" "$W/$label/flame.svg" || fail "$label" "flame.svg differs from the cargo-built command's"
  cmp -s "$W/reference/info.txt" "$W/$label/info.txt" || fail "$label" "info differs from the cargo-built command's"
  printf '    %s: the main job, flame.svg and info identical to the cargo-built command'"'"'s\n' "$label"
}

# pip_env NAME ARTIFACT: a fresh virtual environment of 3.11 with ARTIFACT pip-installed; the
# sdist builds with the pinned maturin and the shared target folder's registry crates.
echo "maturin==${MATURIN_VERSION:-1.16.0}" >"$W/constraints.txt"
pip_env() {
  rm -rf "$W/$1-env"
  /usr/bin/python3.11 -m venv "$W/$1-env" || fail "$1" "cannot make a virtual environment"
  PIP_CONSTRAINT="$W/constraints.txt" CARGO_TARGET_DIR="$ROOT/target" timed build "$W/$1-env/bin/pip" install -q "$2" \
    || fail "$1" "pip install $2 failed"
  main_job "$1" "$W/$1-env/bin/tachyon"
  local out
  out=$("$W/$1-env/bin/python" python/tests/test_command.py 2>&1) || { printf '%s\n' "$out"; fail "$1" "test_command.py"; }
  printf '    %s: python/tests/test_command.py: %s\n' "$1" "$(tail -1 <<<"$out")"
}
# The sdist builds the whole command from its sources (about a minute, its fat-LTO link on one
# core): it runs beside the other checks, none of which builds in target/release.
background "$W/logs" sdist pip_env sdist "$OUT/tachyon_profiles-$V.tar.gz"

step "the static tachyon command: unpacked, run with an empty environment"
mkdir -p "$W/musl"
tar -C "$W/musl" -xzf "$OUT/tachyon-$V-x86_64-unknown-linux-musl.tar.gz"
BIN=$W/musl/tachyon-$V-x86_64-unknown-linux-musl/tachyon
[ -x "$BIN" ] || fail "static binary" "no tachyon in the archive"
! readelf -d "$BIN" 2>/dev/null | grep -q NEEDED || fail "static binary" "it needs shared libraries: $(readelf -d "$BIN" | grep NEEDED)"
# A static position-independent executable (Rust's default for musl, which keeps address
# randomisation): ldd says "statically linked"; a static one without PIE would be "not a
# dynamic executable".
ldd_says=$(ldd "$BIN" 2>&1 || true)
grep -Eq 'statically linked|not a dynamic executable' <<<"$ldd_says" || fail "static binary" "ldd: $ldd_says"
printf '    ldd: %s\n' "$(tr -s ' \t' ' ' <<<"$ldd_says" | sed 's/^ //')"
main_job static-binary env -i "$BIN"
env -i "$BIN" --version | grep -qx "tachyon $V" || fail "static binary" "--version is not tachyon $V"

step "the C tarball: unpacked into a fresh folder, used as a prefix by C and C++ programs"
mkdir -p "$W/c"
tar -C "$W/c" -xzf "$OUT/tachyon-c-$V-x86_64-linux-gnu.tar.gz"
bash capi/tests/installed/check.sh "$W/c/tachyon-c-$V-x86_64-linux-gnu" || fail "C tarball" "see above"

step "the abi3 wheel, pip-installed into a fresh virtual environment"
pip_env wheel "$OUT/$WHEEL"

step "the crates: the command built from the two .crate files alone"
mkdir -p "$W/crates"
tar -C "$W/crates" -xzf "$OUT/tachyon-core-$V.crate"
tar -C "$W/crates" -xzf "$OUT/tachyon-$V.crate"
# As from crates.io, with tachyon-core's registry source replaced by its unpacked .crate. The
# registry's crates come from the shared target folder (the verify build made them).
CARGO_TARGET_DIR="$ROOT/target" cargo build -q --manifest-path "$W/crates/tachyon-$V/Cargo.toml" --bin tachyon \
  --config "patch.crates-io.tachyon-core.path=\"$W/crates/tachyon-core-$V\"" || fail crates "cargo build of the unpacked crates failed"
main_job crates "$ROOT/target/debug/tachyon"

step "the sdist, pip-installed into a fresh virtual environment (built from its sources, beside the checks above)"
background_wait sdist || fail sdist "see above"
