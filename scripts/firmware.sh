#!/usr/bin/env bash
# The firmware proof (issue 12): builds qemu-tests/firmware for thumbv7em-none-eabihf and
# thumbv6m-none-eabi, runs each under qemu-system-arm (mps2-an386, mps2-an385) with a time
# limit, checks its exit status, decodes its defmt log with defmt-decoder 1.2.0 (the library
# defmt-print is a front for: qemu-tests/firmware/defmt-log), puts the UART stream
# back together with `tachyon receive`, checks it is the RAM file byte for byte and that
# `tachyon top` counts the capture as it grows (cut at each quarter) as receive salvages it, and has
# CPython 3.15.2's reader read both. Leaves in target/firmware/: <target>.ram.pyb,
# <target>.uart.pyb, <target>.uart.bin (the raw capture), <target>.defmt and <target>.log.
# Installs what it needs on a fresh Debian machine (as root); says which step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
ROOT=$PWD
OUT="$ROOT/target/firmware"
fail() { printf 'FIRMWARE FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf '  firmware: %s\n' "$*"; }

command -v qemu-system-arm >/dev/null || {
  [ "$(id -u)" = 0 ] || fail "qemu-system-arm is missing and this is not root"
  log "installing qemu-system-arm"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-arm >/dev/null \
    || fail "apt-get install qemu-system-arm"
}
command -v size >/dev/null || {
  [ "$(id -u)" = 0 ] || fail "size (binutils) is missing and this is not root"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils >/dev/null || fail "apt-get install binutils"
}
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  grep -qx "$target" <<<"$(rustup target list --installed)" || rustup target add "$target" || fail "rustup target add $target"
done
# The log decoder, a host program in a workspace of its own (built from here, where the
# firmware's thumb-only .cargo/config.toml does not apply).
DL=(--manifest-path qemu-tests/firmware/defmt-log/Cargo.toml)
cargo fmt --check "${DL[@]}" || fail "cargo fmt --check (qemu-tests/firmware/defmt-log)"
# Linted and built in one compile: clippy-driver compiles the decoder's own crate (what
# `cargo clippy -- -D warnings` runs; the registry's crates get --cap-lints allow, as under
# clippy), so its tree of about 110 crates compiles once, where `cargo clippy` and then
# `cargo build` compiled it twice, as metadata and as code (57 s + 61 s from empty caches,
# 2026-11-28). A dev build: it decodes a few lines per run, and its tree built in 23 s
# instead of 41 s (from empty caches, alone; 2026-11-27).
CLIPPY_DRIVER=$(rustup which clippy-driver) || fail "clippy-driver (rustup component add clippy)"
RUSTC_WORKSPACE_WRAPPER=$CLIPPY_DRIVER RUSTFLAGS="-D warnings" cargo build -q --locked "${DL[@]}" \
  --target-dir "$ROOT/target/defmt-log" || fail "linting (clippy -D warnings) and building qemu-tests/firmware/defmt-log"
DEFMT_LOG="$ROOT/target/defmt-log/debug/defmt-log"

mkdir -p "$OUT"
cd qemu-tests/firmware
cargo fmt --check || fail "cargo fmt --check (the firmware crate)"
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  log "$target: clippy and build"
  cargo clippy -q --release --target "$target" -- -D warnings || fail "$target: cargo clippy"
  cargo build -q --release --target "$target" || fail "$target: cargo build"
done
# The command, to put the UART streams back together: built last, because the test command
# builds it in the background from its set-up on and this waits for it (cargo's lock on
# target/release) — the firmware's own builds, in their own target folders, go on meanwhile.
(cd "$ROOT" && release_build) || fail "building the tachyon command"
TACHYON="$ROOT/target/release/tachyon"
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  elf="$PWD/target/$target/release/tachyon-firmware"
  log "$target: run under qemu-system-arm"
  FIRMWARE_TIMEOUT=120 ./run-qemu.sh "$elf" || fail "$target: the firmware exited with status $? (log: $OUT/$target.defmt)"
  "$DEFMT_LOG" "$elf" < "$OUT/$target.defmt" > "$OUT/$target.log" || fail "$target: decoding its defmt log"
  sed 's/^/    /' "$OUT/$target.log"
  grep -q "INFO  done" "$OUT/$target.log" || fail "$target: the log does not end with done"
  "$TACHYON" receive "$OUT/$target.uart.bin" -o "$OUT/$target.uart.pyb" || fail "$target: tachyon receive"
  cmp "$OUT/$target.ram.pyb" "$OUT/$target.uart.pyb" || fail "$target: the UART file is not the RAM file"
  log "$target: the UART file is the RAM file, $(stat -c %s "$OUT/$target.ram.pyb") bytes"
  # The capture as the host has it while the firmware runs (cut at a quarter, half, three
  # quarters): `tachyon top` counts what `tachyon receive` salvages from it, and the whole
  # capture counts every sample the firmware wrote.
  capture="$OUT/$target.uart.bin"
  size=$(stat -c %s "$capture")
  before=0
  for quarter in 1 2 3 4; do
    cut="$OUT/$target.cut.bin"
    head -c $((size * quarter / 4)) "$capture" > "$cut"
    "$TACHYON" receive "$cut" -o "$OUT/$target.cut.pyb" 2>/dev/null || fail "$target: tachyon receive of the capture's first $quarter/4"
    live=$("$TACHYON" top --once --json "$cut") || fail "$target: tachyon top on the capture's first $quarter/4"
    [ "$live" = "$("$TACHYON" top --once --json "$OUT/$target.cut.pyb")" ] \
      || fail "$target: top on the capture's first $quarter/4 does not count what receive salvages from it"
    total=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["total"])' <<<"$live")
    [ "$total" -gt "$before" ] || fail "$target: the capture's first $quarter/4 counts $total samples, no more than before"
    before=$total
  done
  written=$(sed -n 's/.* \([0-9]*\) written.*/\1/p' "$OUT/$target.log")
  [ "$total" = "$written" ] || fail "$target: top counts $total samples in the capture, the firmware wrote $written"
  rm -f "$OUT/$target.cut.bin" "$OUT/$target.cut.pyb"
  log "$target: top counts the capture as it grows: at each quarter what receive salvages, in all $total samples"
done

# Flash (what is loaded: vector table, code, read-only data, initialised data) and RAM
# (zeroed and initialised data) of each build, from the ELF's sections.
sections() {
  size -A "$1" | awk '/^\.vector_table|^\.text|^\.rodata|^\.data/ {f += $2} /^\.bss|^\.data/ {r += $2} END {print f, r}'
}
{
  printf '%-22s %-16s %8s %8s\n' target build flash RAM
  for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
    read -r base_flash base_ram < <(sections "target/$target/release/size_baseline")
    read -r enc_flash enc_ram < <(sections "target/$target/release/size_encoder")
    read -r fw_flash fw_ram < <(sections "target/$target/release/tachyon-firmware")
    printf '%-22s %-16s %8d %8d\n' "$target" "encoder alone" $((enc_flash - base_flash)) $((enc_ram - base_ram))
    printf '%-22s %-16s %8d %8d\n' "$target" "whole firmware" "$fw_flash" "$fw_ram"
  done
} > "$OUT/sizes.txt"
sed 's/^/    /' "$OUT/sizes.txt"

log "CPython 3.15.2 reads them"
manifest="$OUT/cpython.tsv"
: > "$manifest"
for f in "$OUT"/*.ram.pyb "$OUT"/*.uart.pyb; do printf '%s\t%s\n' "$f" "${f%.pyb}.cpython.jsonl" >> "$manifest"; done
"$ROOT/scripts/oracle-python.sh" amd64 "$ROOT/qemu-tests/oracle/cpython_batch.py" dump "$manifest" \
  || fail "CPython's reader failed on a firmware file"
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cmp "$OUT/$target.ram.cpython.jsonl" "$OUT/$target.uart.cpython.jsonl" || fail "$target: CPython reads the two differently"
  written=$(sed -n 's/.* \([0-9]*\) written.*/\1/p' "$OUT/$target.log")
  # The first line is the file's info; then one line per sample.
  read_back=$(($(wc -l < "$OUT/$target.ram.cpython.jsonl") - 1))
  [ "$read_back" = "$written" ] || fail "$target: CPython read $read_back samples, the firmware wrote $written"
  log "$target: CPython reads $read_back samples, as the firmware wrote"
done
