#!/usr/bin/env bash
# The contributor's loop: what a change to a codec is checked with in minutes, from the files
# the repository holds and nothing else — no oracle, no recording, no qemu, no download but
# crates. The committed fixtures already hold the real tools' outputs (CPython 3.15.2's
# vectors and replay outputs, gperftools', Austin's, pstats'), so this is the same unit,
# vector, golden-output and property tests the test command runs, without the steps that run
# the real tools again. Under 5 minutes warm on the project's 2-core VM (docs/testing.md);
# bash scripts/test-all.sh before a change lands.
#
#   bash scripts/quick.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
START=$(date +%s)
step() { printf '\n==> %s   [%ds]\n' "$*" $(($(date +%s) - START)); }
CORE_FEATURES=alloc,zstd,gperftools,mojo,transport,marshal

step "format"
cargo fmt --all -- --check

step "core without features (no alloc, no zstd)"
cargo test -q -p tachyon-core

step "core with every codec, the std layer and the command: unit, robustness, property, golden-output and CLI tests"
cargo test -q -p tachyon-core -p tachyon --features "$(sed "s/[a-z]*/tachyon-core\/&/g" <<<"$CORE_FEATURES")"

step "CPython 3.15.2's vectors (decoded and written as CPython did) and the writers under injected faults"
cargo test -q -p qemu-tests --lib --test vectors --test fault_injection

step "saved fuzz crashes and seeds replayed (fuzz/tests/replay.rs)"
cargo test -q --manifest-path fuzz/Cargo.toml

step "no_std: core for thumbv6m-none-eabi (no alloc, no zstd)"
grep -qx thumbv6m-none-eabi <<<"$(rustup target list --installed)" || rustup target add thumbv6m-none-eabi
cargo build -q -p tachyon-core --target thumbv6m-none-eabi

step "passed in $(($(date +%s) - START)) s"
