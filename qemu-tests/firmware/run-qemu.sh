#!/bin/bash
# Cargo runner: runs the firmware ELF ($1) under qemu-system-arm (mps2-an386 for thumbv7em,
# mps2-an385 for thumbv6m), in target/firmware/: semihosting writes <target>.ram.pyb there,
# UART0 goes to <target>.uart.bin, UART1 (the sample stream) to <target>.stream.bin, defmt's
# frames to <target>.defmt. Deterministic time
# (-icount), a time limit, QEMU's exit status (the firmware's) as ours.
set -euo pipefail
ELF=$(realpath "$1"); shift
case "$ELF" in
  *thumbv6m*) MACH=mps2-an385; CPU=cortex-m3; TARGET=thumbv6m-none-eabi ;;
  *) MACH=mps2-an386; CPU=cortex-m4; TARGET=thumbv7em-none-eabihf ;;
esac
OUT=$(cd "$(dirname "$0")/../.." && pwd)/target/firmware
mkdir -p "$OUT"
cd "$OUT"
rm -f "$TARGET.ram.pyb" "$TARGET.uart.bin" "$TARGET.stream.bin" "$TARGET.defmt"
timeout "${FIRMWARE_TIMEOUT:-120}" qemu-system-arm -cpu "$CPU" -machine "$MACH" -nographic -monitor none \
  -icount shift=3,align=off,sleep=off -serial "file:$TARGET.uart.bin" -serial "file:$TARGET.stream.bin" \
  -semihosting-config enable=on,target=native -kernel "$ELF" "$@" > "$TARGET.defmt"
