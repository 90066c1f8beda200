#!/usr/bin/env bash
# Miri over the unsafe code users' programs run through: the C API's Rust tests
# (capi/tests/api, every entry point of tachyon.h called as a C program calls it) and the std
# layer's tests of its own `unsafe`, interpreted for x86_64 and for s390x (big-endian: Miri
# interprets the target, no QEMU), under Stacked Borrows with strict provenance. First checks
# that every function tachyon.h declares is called by those tests, and that every declaration
# in the header has a comment. Installs the pinned nightly with Miri when missing (as root on
# a fresh machine: rustup reaches its own registry); says which step failed.
#
# What Miri cannot run is left out, each by a `cfg(miri)` naming why: zstd (C; the C API
# is built here without its zstd feature, and zstd is checked from C by scripts/capi.sh),
# sigaction/raise and atexit (libc calls Miri does not emulate), the modules of the process
# (its /proc/self/maps and ELF files: the interpreter's own under Miri), and the std layer's
# file mappings and page advice (mmap of a file, madvise).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
fail() { printf 'MIRI FAILED: %s\n' "$*" >&2; exit 1; }
begun=$(date +%s)
log() { printf '  miri: %s\n' "$*"; }

# The newest nightly the registry serves with Miri (2026-12-06), pinned: the same commit
# gives the same verdict on every machine.
NIGHTLY=nightly-2026-05-20
TARGETS=(x86_64-unknown-linux-gnu s390x-unknown-linux-gnu)

header=capi/include/tachyon.h
declared=$(grep -oE '\btachyon_[a-z0-9_]+\(' "$header" | tr -d '(' | sort -u)
[ "$(wc -l <<<"$declared")" -ge 40 ] || fail "found only $(wc -l <<<"$declared") functions in $header"
missing=$(while read -r f; do grep -qw "$f" capi/tests/api/*.rs || echo "$f"; done <<<"$declared")
[ -z "$missing" ] || fail "tachyon.h functions no Rust test calls: $(tr '\n' ' ' <<<"$missing")"
log "every one of the $(wc -l <<<"$declared") functions tachyon.h declares is called by capi/tests/api"
python3 scripts/header-comments.py "$header" || fail "a declaration in $header has no comment"

if ! rustup toolchain list | grep -q "^$NIGHTLY" || ! rustup +"$NIGHTLY" component list --installed | grep -q '^miri'; then
  timed download rustup toolchain install "$NIGHTLY" --profile minimal --component miri,rust-src \
    || fail "rustup toolchain install $NIGHTLY with miri and rust-src"
fi
for target in "${TARGETS[@]}"; do
  timed build cargo "+$NIGHTLY" miri setup --target "$target" >/dev/null || fail "$target: cargo miri setup"
done

# Files the tests write and read: isolation off. s390x's build scripts compile zstd's C
# (forced by the std layer) with the cross compiler the big-endian suite uses.
export MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-strict-provenance"
export CC_s390x_unknown_linux_gnu=s390x-linux-gnu-gcc
# cargo-miri runs each test program through its own runner, given for every target; the
# qemu-user runner .cargo/config.toml names for s390x would outrank it (a triple's runner
# beats a cfg's), so the triple's is set to cargo-miri's here.
CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER="$(rustup which --toolchain "$NIGHTLY" cargo-miri) runner"
export CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER
CAPI=(-p tachyon-capi --no-default-features --features std --test api)
STD=(-p tachyon --no-default-features --lib)
for target in "${TARGETS[@]}"; do
  started=$(date +%s)
  timed build cargo "+$NIGHTLY" miri test --no-run -q --target "$target" "${CAPI[@]}" \
    || fail "$target: building the C API's tests for Miri"
  timed run cargo "+$NIGHTLY" miri test -q --target "$target" "${CAPI[@]}" \
    || fail "$target: the C API's tests under Miri"
  # The std layer's own unsafe that is not a system call: the hash tables' prefetch (x86_64).
  timed run cargo "+$NIGHTLY" miri test -q --target "$target" "${STD[@]}" -- hash::tests::prefetching \
    || fail "$target: the std layer's tests of its unsafe under Miri"
  log "$target: passed in $(($(date +%s) - started)) s"
done
log "in all $(($(date +%s) - begun)) s (toolchain, sysroots, builds and runs)"
