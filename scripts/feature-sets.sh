#!/usr/bin/env bash
# Every feature set of tachyon-core (none, each feature alone, all) and of the C API's
# no_std build (no features; zstd) checked for the host, thumbv6m-none-eabi and
# riscv32imc-unknown-none-elf (neither has atomic read-modify-write) and s390x (big-endian).
# A feature that cannot work on a target must be refused at compile time with its reason:
# zstd on bare metal (target_os = "none") is checked to fail with that message, not with a
# missing C compiler. Run by scripts/static-checks.sh; needs the s390x cross compiler
# (zstd's C) that the big-endian suite installs.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
fail() { printf 'FEATURE SETS FAILED: %s\n' "$*" >&2; exit 1; }

TARGETS=(x86_64-unknown-linux-gnu thumbv6m-none-eabi riscv32imc-unknown-none-elf s390x-unknown-linux-gnu)
FEATURES=(alloc zstd gperftools mojo transport stream marshal defmt)
installed=$(rustup target list --installed)
for target in "${TARGETS[@]}"; do
  grep -qx "$target" <<<"$installed" || rustup target add "$target" || fail "rustup target add $target"
done
export CC_s390x_unknown_linux_gnu=${CC_s390x_unknown_linux_gnu:-s390x-linux-gnu-gcc}
# A folder of its own: these sets would otherwise rebuild the dependencies other steps share.
DIR=(--target-dir target/features)
all=$(IFS=,; echo "${FEATURES[*]}")
checked=0
for target in "${TARGETS[@]}"; do
  bare=
  if [[ $target == *-none-* ]]; then bare=1; fi
  for set in "" "${FEATURES[@]}" "$all"; do
    features=(--no-default-features ${set:+--features "$set"})
    if [ -n "$bare" ] && [[ ",$set," == *,zstd,* ]]; then
      # Refused, and saying why.
      out=$(cargo check -q -p tachyon-core "${features[@]}" --target "$target" "${DIR[@]}" 2>&1) \
        && fail "tachyon-core with '$set' built for $target, where zstd has no C library"
      grep -q "does not have: leave it off there" <<<"$out" \
        || fail "tachyon-core with '$set' on $target failed without saying why: $(head -5 <<<"$out")"
    else
      cargo check -q -p tachyon-core "${features[@]}" --target "$target" "${DIR[@]}" \
        || fail "tachyon-core with '${set:-no features}' for $target"
    fi
    checked=$((checked + 1))
  done
  # The C API without std (what a firmware links), and with zstd where there is a C library.
  # (Cargo says a cdylib cannot be made without an operating system: the staticlib is.)
  cargo check -q -p tachyon-capi --lib --no-default-features --target "$target" "${DIR[@]}" \
    2> >(grep -v "dropping unsupported crate type" >&2) || fail "tachyon-capi without features for $target"
  if [ -z "$bare" ]; then
    cargo check -q -p tachyon-capi --lib --no-default-features --features zstd --target "$target" "${DIR[@]}" \
      || fail "tachyon-capi with zstd for $target"
  fi
  checked=$((checked + 1))
done
printf '  feature sets: %d checked for %d targets\n' "$checked" "${#TARGETS[@]}"
