#!/usr/bin/env bash
# The firmware proof (issue 12): builds qemu-tests/firmware for thumbv7em-none-eabihf and
# thumbv6m-none-eabi, runs each under qemu-system-arm (mps2-an386, mps2-an385) with a time
# limit, checks its exit status, decodes its defmt log with defmt-decoder 1.2.0 (the library
# defmt-print is a front for: qemu-tests/firmware/defmt-log), puts the UART stream
# back together with `tachyon receive`, and the sample stream on UART1 (the streaming
# encoder, `tachyon_core::stream`) written as a file by it; checks both are the RAM file byte
# for byte and that `tachyon top` counts each capture as it grows (cut at each quarter) as
# receive salvages it, and has CPython 3.15.2's reader read all three. Prints the sizes (the
# stream encoder's against its goals: flash ≤ 6 KiB, RAM ≤ 2 KiB besides its transmit
# buffer) and the cost per sample. Leaves in target/firmware/: <target>.ram.pyb,
# <target>.uart.pyb and <target>.stream.pyb, <target>.uart.bin and <target>.stream.bin (the
# raw captures), <target>.defmt and <target>.log, sizes.txt and per-sample.txt.
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
# The capture as the host has it while the firmware runs (cut at a quarter, half, three
# quarters): `tachyon top` counts what `tachyon receive` salvages from it, more at each cut,
# and the whole capture counts every sample the firmware wrote.
counts_as_it_grows() {
  local target=$1 capture=$2 written=$3 size before=0 quarter cut live total
  size=$(stat -c %s "$capture")
  for quarter in 1 2 3 4; do
    cut="$OUT/$target.cut.bin"
    head -c $((size * quarter / 4)) "$capture" > "$cut"
    "$TACHYON" receive "$cut" -o "$OUT/$target.cut.pyb" 2>/dev/null || fail "$target: tachyon receive of $(basename "$capture")'s first $quarter/4"
    live=$("$TACHYON" top --once --json "$cut") || fail "$target: tachyon top on $(basename "$capture")'s first $quarter/4"
    [ "$live" = "$("$TACHYON" top --once --json "$OUT/$target.cut.pyb")" ] \
      || fail "$target: top on $(basename "$capture")'s first $quarter/4 does not count what receive salvages from it"
    total=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["total"])' <<<"$live")
    [ "$total" -gt "$before" ] || fail "$target: $(basename "$capture")'s first $quarter/4 counts $total samples, no more than before"
    before=$total
  done
  [ "$total" = "$written" ] || fail "$target: top counts $total samples in $(basename "$capture"), the firmware wrote $written"
  rm -f "$OUT/$target.cut.bin" "$OUT/$target.cut.pyb"
  log "$target: top counts $(basename "$capture") as it grows: at each quarter what receive salvages, in all $total samples"
}

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
  "$TACHYON" receive "$OUT/$target.stream.bin" -o "$OUT/$target.stream.pyb" || fail "$target: tachyon receive of the sample stream"
  cmp "$OUT/$target.ram.pyb" "$OUT/$target.stream.pyb" || fail "$target: the sample stream's file is not the RAM file"
  log "$target: the sample stream's file is the RAM file"
  written=$(sed -n 's/.* \([0-9]*\) written.*/\1/p' "$OUT/$target.log")
  for capture in "$OUT/$target.uart.bin" "$OUT/$target.stream.bin"; do
    counts_as_it_grows "$target" "$capture" "$written"
  done
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
    read -r stream_flash stream_ram < <(sections "target/$target/release/size_stream")
    read -r fw_flash fw_ram < <(sections "target/$target/release/tachyon-firmware")
    printf '%-22s %-16s %8d %8d\n' "$target" "encoder alone" $((enc_flash - base_flash)) $((enc_ram - base_ram))
    printf '%-22s %-16s %8d %8d\n' "$target" "stream encoder" $((stream_flash - base_flash)) $((stream_ram - base_ram))
    printf '%-22s %-16s %8d %8d\n' "$target" "whole firmware" "$fw_flash" "$fw_ram"
  done
} > "$OUT/sizes.txt"
sed 's/^/    /' "$OUT/sizes.txt"
# The stream encoder's goals (issue 70): its RAM apart from the transmit buffer the caller
# gives it (size_stream's STREAM_TX, 256 bytes, found by its symbol).
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  read -r stream_flash stream_ram < <(awk -v t="$target" '$1 == t && $2 == "stream" {print $4, $5}' "$OUT/sizes.txt")
  # (nm gives 257 bytes: the buffer and the flag of `singleton!`.)
  tx=$(nm -S "target/$target/release/size_stream" | awk '/STREAM_TX/ {print $2}')
  [ -n "$tx" ] && [ $((16#$tx)) -ge 256 ] || fail "$target: size_stream's transmit buffer (STREAM_TX) not found"
  tx=256
  ram=$((stream_ram - tx))
  log "$target: stream encoder alone: flash $stream_flash B, RAM $ram B (+ $tx B transmit buffer)"
  [ "$stream_flash" -le 6144 ] || fail "$target: the stream encoder takes $stream_flash B of flash, over 6 KiB"
  [ "$ram" -le 2048 ] || fail "$target: the stream encoder takes $ram B of RAM besides its transmit buffer, over 2 KiB"
done
# Per sample: each writer's instructions (the firmware's log) and each link's bytes.
{
  printf '%-22s %8s %11s %11s %11s %10s %10s\n' target samples "RAM instr" "UART instr" "stream instr" "UART B/s" "stream B/s"
  for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
    written=$(sed -n 's/.* \([0-9]*\) written.*/\1/p' "$OUT/$target.log")
    read -r ram_i uart_i stream_i < <(sed -n 's/.*RAM writer \([0-9]*\) instructions, UART writer \([0-9]*\) instructions, stream \([0-9]*\) instructions.*/\1 \2 \3/p' "$OUT/$target.log")
    [ -n "$stream_i" ] || fail "$target: no cost per sample in the log"
    printf '%-22s %8d %11d %11d %11d %10s %10s\n' "$target" "$written" "$ram_i" "$uart_i" "$stream_i" \
      "$(python3 -c "print(f'{$(stat -c %s "$OUT/$target.uart.bin") / $written:.2f}')")" \
      "$(python3 -c "print(f'{$(stat -c %s "$OUT/$target.stream.bin") / $written:.2f}')")"
  done
} > "$OUT/per-sample.txt"
sed 's/^/    /' "$OUT/per-sample.txt"

log "CPython 3.15.2 reads them"
manifest="$OUT/cpython.tsv"
: > "$manifest"
for f in "$OUT"/*.ram.pyb "$OUT"/*.uart.pyb "$OUT"/*.stream.pyb; do printf '%s\t%s\n' "$f" "${f%.pyb}.cpython.jsonl" >> "$manifest"; done
"$ROOT/scripts/oracle-python.sh" amd64 "$ROOT/qemu-tests/oracle/cpython_batch.py" dump "$manifest" \
  || fail "CPython's reader failed on a firmware file"
for target in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  cmp "$OUT/$target.ram.cpython.jsonl" "$OUT/$target.uart.cpython.jsonl" || fail "$target: CPython reads the two differently"
  cmp "$OUT/$target.ram.cpython.jsonl" "$OUT/$target.stream.cpython.jsonl" || fail "$target: CPython reads the stream's file differently"
  written=$(sed -n 's/.* \([0-9]*\) written.*/\1/p' "$OUT/$target.log")
  # The first line is the file's info; then one line per sample.
  read_back=$(($(wc -l < "$OUT/$target.ram.cpython.jsonl") - 1))
  [ "$read_back" = "$written" ] || fail "$target: CPython read $read_back samples, the firmware wrote $written"
  log "$target: CPython reads $read_back samples, as the firmware wrote"
done
