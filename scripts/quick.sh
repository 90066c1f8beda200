#!/usr/bin/env bash
# The contributor's loop: what a change to a codec is checked with in minutes, from the files
# the repository holds and nothing else — no oracle, no recording, no qemu, no download but
# crates. The committed fixtures already hold the real tools' outputs (CPython 3.15.2's
# vectors and replay outputs, gperftools', Austin's, pstats'), so these are the unit, vector,
# golden-output and property tests the test command runs, without the steps that run the real
# tools again. After a one-line change to core it took 60-75 s on the project's 2-core VM
# (docs/testing.md); run `bash scripts/test-all.sh` before a change lands.
#
#   bash scripts/quick.sh
#
# Builds in the checked profile (Cargo.toml: dev's debug assertions and overflow checks at
# opt-level 1, incremental as dev is) and runs with cargo-nextest where it is installed (test
# binaries side by side; the machine's image has it), else with cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
START=$(date +%s)
step() { printf '\n==> %s   [%ds]\n' "$*" $(($(date +%s) - START)); }
CORE_FEATURES=tachyon-core/alloc,tachyon-core/zstd,tachyon-core/gperftools,tachyon-core/mojo,tachyon-core/transport,tachyon-core/stream,tachyon-core/marshal
# The tests of qemu-tests that read what the test command records (gperftools, Austin,
# firmware runs: its `recorded` program) are left out; the rest of the workspace's tests but
# the oracle's run.

step "format"
cargo fmt --all -- --check

# tests ARGS...: the selected tests, side by side under nextest where it is installed.
tests() {
  if command -v cargo-nextest >/dev/null; then
    cargo nextest run --cargo-profile checked --no-fail-fast --status-level fail --final-status-level fail "$@"
  else
    cargo test -q --profile checked "$@"
  fi
}

step "core without features (no alloc, no zstd)"
tests -p tachyon-core

step "core with every codec, the std layer and the command (unit, robustness, property, golden-output, CLI and bad-input tests); CPython 3.15.2's vectors decoded and written as CPython did; the writers under injected faults"
if command -v cargo-nextest >/dev/null; then
  tests -p tachyon-core -p tachyon -p qemu-tests --features "$CORE_FEATURES" \
    -E "not (package(qemu-tests) & binary(recorded))"
else
  tests -p tachyon-core -p tachyon --features "$CORE_FEATURES"
  tests -p qemu-tests --test vectors --test fault_injection
fi

step "documentation tests"
cargo test -q --profile checked --doc -p tachyon-core -p tachyon --features "$CORE_FEATURES"

step "saved fuzz crashes and seeds replayed (fuzz/tests/replay.rs)"
cargo test -q --manifest-path fuzz/Cargo.toml --test replay

step "no_std: core for thumbv6m-none-eabi (no alloc, no zstd)"
grep -qx thumbv6m-none-eabi <<<"$(rustup target list --installed)" || rustup target add thumbv6m-none-eabi
cargo build -q -p tachyon-core --target thumbv6m-none-eabi

step "passed in $(($(date +%s) - START)) s"
