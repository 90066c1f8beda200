#!/usr/bin/env bash
# The checks that need no oracle and no test run: formatting, import cycles, clippy on every target kind,
# the no_std builds, every documentation build and the MSRV check. The test command runs
# them; run them alone before committing (a few minutes warm). Needs the rustup targets and
# the 1.81 toolchain (installs them when missing). The MSRV check copies the files git knows:
# `git add` new files first.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh

{

step() { printf '\n==> %s\n' "$*"; }
missing() { printf 'MISSING: %s\n' "$*" >&2; exit 1; }

NO_STD_TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)
installed_targets=$(rustup target list --installed)
for target in "${NO_STD_TARGETS[@]}"; do
  grep -qx "$target" <<<"$installed_targets" || rustup target add "$target" \
    || missing "rustup target $target (rustup could not download it)"
done

step "format"
cargo fmt --all -- --check
# The fuzz targets and the Python package are their own workspaces.
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo fmt --manifest-path python/Cargo.toml -- --check

step "the same versions in the three lockfiles (Cargo.lock, python/, fuzz/): each version python/ and fuzz/ lock is one Cargo.lock has"
# The Python package builds in the main target folder and reuses its builds only while the
# versions agree; a drift would cost the test command a second build of the tree. Cargo.lock
# may hold more versions of a crate (ring's getrandom 0.2, through the command's TLS).
python3 - <<'PY'
import re, sys
def versions(path):
    text = open(path).read()
    found = {}
    for name, version in re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', text):
        found.setdefault(name, set()).add(version)
    return found
main = versions("Cargo.lock")
bad = []
for other in ("python/Cargo.lock", "fuzz/Cargo.lock"):
    for name, vs in versions(other).items():
        if name in main and not vs <= main[name]:
            bad.append(f"{other}: {name} {', '.join(sorted(vs))} where Cargo.lock has {', '.join(sorted(main[name]))}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit("the lockfiles disagree: cargo update --manifest-path <workspace>/Cargo.toml -p NAME@VERSION --precise VERSION")
PY

step "module structure: no import cycle between the modules of any crate, no arrow up the std layer's layers (and the self-tests of the scripts that check it, count core-minutes and keep builds)"
python3 scripts/module-cycles.py --self-test
python3 scripts/cpu-account.py --self-test
python3 scripts/build-cache.py --self-test >/dev/null
python3 scripts/module-cycles.py

step "clippy: host, every target kind, all features and none"
cargo clippy --workspace --all-targets --all-features -- -D warnings
# What every feature leaves unlinted is the code for a feature turned off: core with none (no
# alloc, no zstd, no defmt; its tests too) and the std layer without its command, TLS and
# regular expressions, as the big-endian suites, the fuzz targets and the C library use it.
# Each crate alone: linted with the workspace, each would get the features its dependents
# ask for (core's from the std layer's), so the workspace's default features reached neither.
cargo clippy -p tachyon-core --all-targets -- -D warnings
cargo clippy -p tachyon --no-default-features --all-targets -- -D warnings
# The fuzz workspace and the Python package in the main target folder: the dependencies
# checked above are not checked again (in fuzz/'s own folder, a run from empty caches checked
# the whole tree a second time). PyO3's build finds Python 3.11 (Debian's); the wheel itself
# is built by scripts/python.sh.
# (The test command runs the fuzz workspace's beside its fuzz build, in the background, and
# sets TACHYON_FUZZ_CLIPPY_ELSEWHERE.)
if [ -z "${TACHYON_FUZZ_CLIPPY_ELSEWHERE:-}" ]; then
  CARGO_TARGET_DIR=$PWD/target cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
fi
CARGO_TARGET_DIR=$PWD/target cargo clippy --manifest-path python/Cargo.toml --locked --all-targets -- -D warnings

step "clippy and build: core on no_std targets (no alloc, no zstd; and with defmt, gperftools, mojo, transport, stream and marshal)"
for target in "${NO_STD_TARGETS[@]}"; do
  cargo clippy -p tachyon-core --target "$target" -- -D warnings
  cargo clippy -p tachyon-core --target "$target" --features defmt,gperftools,mojo,transport,stream,marshal -- -D warnings
  cargo build -p tachyon-core --target "$target" --release
done

step "clippy and build: the C API's no_std static library (thumbv7em, no std, no zstd)"
# Cargo notes that a cdylib cannot be built for a target without an OS; the staticlib is the
# product there.
cargo clippy -p tachyon-capi --target thumbv7em-none-eabihf --no-default-features -- -D warnings
cargo rustc -q -p tachyon-capi --lib --crate-type staticlib --release --target thumbv7em-none-eabihf --no-default-features

step "feature sets: tachyon-core with none, each alone and all, and the C API's no_std build (alone, with zstd), for the host, thumbv6m, riscv32imc (no atomic read-modify-write) and s390x"
bash scripts/feature-sets.sh

step "docs: host (all features, as docs.rs builds the published crates: --cfg docsrs) and no_std targets"
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --workspace --no-deps --all-features
RUSTDOCFLAGS="-D warnings" cargo doc -p tachyon-core --no-deps
RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR=$PWD/target cargo doc --manifest-path python/Cargo.toml --locked --no-deps
for target in "${NO_STD_TARGETS[@]}"; do
  RUSTDOCFLAGS="-D warnings" cargo doc -p tachyon-core --no-deps --target "$target" --features defmt,gperftools,mojo,transport,stream,marshal
done

step "MSRV: core, std layer and C API check on Rust 1.81 (MSRV-aware resolve in a scratch copy)"
MSRV=1.81.0
grep -q "^$MSRV" <<<"$(rustup toolchain list)" || timed download rustup toolchain install "$MSRV" --profile minimal \
  || missing "Rust $MSRV toolchain (rustup could not download it)"
# The scratch copy at a fixed path (target/msrv): the crates' paths are part of what the
# compiler cache keys on, and a new temporary folder each run missed it for our three crates
# (42 s in a warm run).
# Its builds (target/msrv-target) stay when the run's build cache keeps target/ (a link then).
scratch=$PWD/target/msrv
rm -rf "$scratch" && mkdir -p "$scratch"
[ -L target ] || rm -rf "$scratch-target"
trap 'rm -rf "$scratch"' EXIT
git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$scratch"
(
  cd "$scratch"
  # Test-only dependencies need newer Rust; resolve the rest to versions that support 1.81.
  CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo update -q
  export CARGO_TARGET_DIR="$PWD/../$(basename "$scratch")-target"
  # The newest cargo may see a release the registry has not yet shown Rust 1.81's cargo (its
  # index cache is its own): "failed to select a version for `NAME` (locked to V)". Such a
  # crate is taken back to the newest version 1.81's cargo lists, a few times at most.
  msrv_check() {
    local tries=0 out name older
    while ! out=$(cargo "+$MSRV" check -q "$@" 2>&1); do
      name=$(sed -n 's/.*failed to select a version for the requirement `\([^ ]*\) = .*/\1/p' <<<"$out")
      older=$(sed -n 's/.*candidate versions found which didn.t match: \([^,]*\),.*/\1/p' <<<"$out")
      name=${name%%$'\n'*} older=${older%%$'\n'*}
      tries=$((tries + 1))
      if [ -z "$name" ] || [ -z "$older" ] || [ "$tries" -gt 5 ]; then
        printf '%s\n' "$out" >&2
        return 1
      fi
      echo "MSRV: the registry has not shown Rust $MSRV's cargo $name's newest release yet: $name $older" >&2
      cargo update -q -p "$name" --precise "$older"
    done
  }
  # One invocation: each crate is checked once, the dependencies with the features all three
  # unify to (three invocations checked tachyon-core three times with three feature sets).
  msrv_check -p tachyon-core -p tachyon -p tachyon-capi \
    --features tachyon-core/alloc,tachyon-core/zstd,tachyon-core/defmt,tachyon-core/transport,tachyon-core/marshal
)
[ -L target ] || rm -rf "$scratch-target"

exit 0
}
