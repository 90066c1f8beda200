#!/usr/bin/env bash
# Records real profiles with CPython 3.15.2's own sampler (x86_64, in a chroot of the oracle's
# unpacked root, /proc and /dev bind-mounted while it runs; needs root).
#   make_real_profiles.sh OUTDIR [SECONDS]   (each workload runs SECONDS, default 1)
# Writes OUTDIR/NAME.pyb for each configuration below. The sampler reads the target's memory,
# which does not work under qemu-user, so profiles come from x86_64 only.
set -euo pipefail
out=$1
seconds=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
R=$A/root-amd64
[ -f "$A/ready" ] || { echo "real profiles: oracle not set up (scripts/oracle.sh)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "real profiles: chroot and bind mounts need root" >&2; exit 1; }
mkdir -p "$out" "$R/proc" "$R/dev" "$R/work"
cleanup() {
  mountpoint -q "$R/proc" && umount "$R/proc" || true
  mountpoint -q "$R/dev" && umount "$R/dev" || true
}
trap cleanup EXIT
mountpoint -q "$R/proc" || mount --bind /proc "$R/proc"
mountpoint -q "$R/dev" || mount --bind /dev "$R/dev"
cp "$here"/workloads/*.py "$R/work/"

record() {
  local name=$1 script=$2
  shift 2
  rm -f "$R/work/$name.pyb"
  env -i PATH=/usr/bin:/bin LC_ALL=C WORKLOAD_SECONDS="$seconds" /usr/sbin/chroot "$R" /usr/bin/python3.15 -m profiling.sampling run \
    "$@" --binary -o "/work/$name.pyb" "/work/$script" >"$out/$name.log" 2>&1 \
    || { echo "real profiles: $name failed, see $out/$name.log" >&2; exit 1; }
  cp "$R/work/$name.pyb" "$out/$name.pyb"
}

record threads_wall_zstd threads.py -a --compression zstd
record threads_cpu_raw threads.py -a --mode cpu --compression none
record recursion_deep_raw recursion.py --compression none
record opcodes_native_zstd threads.py -a --opcodes --native --compression zstd
record mixed_gil_raw mixed.py -a --mode gil --compression none
record mixed_exception_zstd mixed.py -a --mode exception --compression zstd
record mixed_wall_blocking_raw mixed.py -a --blocking --compression none
if [ "${TACHYON_STDLIB_WORK:-0}" = 1 ]; then
  record stdlib_work stdlib_work.py -a --compression zstd
fi
ls "$out"/*.pyb
