#!/usr/bin/env bash
# The published crates' API against its recorded baseline (qemu-tests/fixtures/semver/, the
# crates of 0.1.0 as `cargo package` made them): cargo-semver-checks, every feature, reports
# what a compatible release may not do (a public item removed or renamed, a signature
# changed, a trait bound added ...) and fails on it.
#
#   bash scripts/semver.sh           builds the checker if needed, then checks
#   bash scripts/semver.sh --build   only builds the checker (the test command starts this early)
#
# cargo-semver-checks (pinned) is built once into ~/.cache/tachyon-tools/. A release that
# means to break the API bumps the version and records a new baseline: `bash
# scripts/release.sh OUT`, then OUT's .crate files go into qemu-tests/fixtures/semver/ (its
# README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
fail() { printf 'semver: %s\n' "$*" >&2; exit 1; }
SEMVER_CHECKS_VERSION=0.51.0
T=${TACHYON_TOOLS_CACHE:-$HOME/.cache/tachyon-tools}/cargo-semver-checks-$SEMVER_CHECKS_VERSION
BASELINE_VERSION=0.1.0
CRATES=(tachyon-core tachyon)

if [ ! -x "$T/bin/cargo-semver-checks" ]; then
  printf 'building cargo-semver-checks %s (once; cached in %s)\n' "$SEMVER_CHECKS_VERSION" "$T"
  rm -rf "$T"
  # Its own target folder, removed after: its tree shares nothing with the workspace's. Its
  # release profile's fat LTO and one codegen unit per crate are turned off: both keep
  # compiling on one core, for a tool whose check spends its time in rustdoc.
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 timed build cargo install -q --locked --root "$T" --target-dir "$T.build" "cargo-semver-checks@$SEMVER_CHECKS_VERSION" \
    || fail "cargo install cargo-semver-checks@$SEMVER_CHECKS_VERSION failed"
  rm -rf "$T.build"
fi
[ "${1:-}" = --build ] && exit 0

# The baseline as crates.io would give it: the .crate files unpacked into one workspace, with
# tachyon-core's registry source replaced by its unpacked crate (it is not published).
W=$(mktemp -d)
# The patch below also reaches this workspace's own resolution, which records it in Cargo.lock
# as unused: the lock is put back as it was.
cp Cargo.lock "$W/Cargo.lock.tree"
trap 'cmp -s "$W/Cargo.lock.tree" Cargo.lock || cp "$W/Cargo.lock.tree" Cargo.lock; rm -rf "$W"' EXIT
members=()
for crate in "${CRATES[@]}"; do
  f=qemu-tests/fixtures/semver/$crate-$BASELINE_VERSION.crate
  [ -f "$f" ] || fail "no baseline $f"
  tar -C "$W" -xzf "$f"
  members+=("\"$crate-$BASELINE_VERSION\"")
done
cat >"$W/Cargo.toml" <<EOF
[workspace]
resolver = "2"
members = [$(IFS=,; echo "${members[*]}")]

[patch.crates-io]
tachyon-core = { path = "tachyon-core-$BASELINE_VERSION" }
EOF
# cargo-semver-checks builds each crate in a placeholder project of its own: the patch reaches
# those through the cargo configuration of the folder it runs in (cargo reads the working
# directory's .cargo/, not the manifest's).
mkdir -p "$W/.cargo"
printf '[patch.crates-io]\ntachyon-core = { path = "%s" }\n' "$W/tachyon-core-$BASELINE_VERSION" >"$W/.cargo/config.toml"
# The baseline resolves as this workspace does (the lock of the current tree).
cp Cargo.lock "$W/Cargo.lock"

args=()
for crate in "${CRATES[@]}"; do args+=(-p "$crate"); done
# "minor": the next release is meant to be compatible with the baseline (for 0.y.z, Cargo
# treats z as the compatible part).
ROOT=$PWD
(cd "$W" && timed run "$T/bin/cargo-semver-checks" semver-checks --manifest-path "$ROOT/Cargo.toml" "${args[@]}" \
  --baseline-root "$W" --all-features --release-type minor) || fail "the public API broke against $BASELINE_VERSION (see above), or the check could not run"
