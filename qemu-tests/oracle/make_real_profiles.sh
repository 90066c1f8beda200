#!/usr/bin/env bash
# Records real profiles with CPython 3.15.2's own sampler (x86_64, in a chroot of the oracle's
# unpacked root, /proc and /dev bind-mounted while it runs; needs root).
#   make_real_profiles.sh OUTDIR [SECONDS]   the short set: each workload runs SECONDS (default 1)
#   make_real_profiles.sh --long OUTDIR      the long set the benchmarks read: 300k+ samples each
# Writes OUTDIR/NAME.pyb for each configuration below. The sampler reads the target's memory,
# which does not work under qemu-user, so profiles come from x86_64 only.
set -euo pipefail
long=0
if [ "${1:-}" = --long ]; then
  long=1
  shift
fi
out=$1
seconds=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
R=$A/root-amd64
[ -f "$A/ready" ] || { echo "real profiles: oracle not set up (scripts/oracle.sh)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "real profiles: chroot and bind mounts need root" >&2; exit 1; }
mkdir -p "$out"
. "$here/chroot_mounts.sh"
oracle_chroot "$R"
cp "$here"/workloads/*.py "$R/work/"

record() {
  local name=$1 script=$2
  shift 2
  rm -f "$R/work/$name.pyb"
  env -i PATH=/usr/bin:/bin LC_ALL=C WORKLOAD_SECONDS="${WORKLOAD_SECONDS:-$seconds}" /usr/sbin/chroot "$R" /usr/bin/python3.15 -m profiling.sampling run \
    "$@" --binary -o "/work/$name.pyb" "/work/$script" >"$out/$name.log" 2>&1 \
    || { echo "real profiles: $name failed, see $out/$name.log" >&2; exit 1; }
  cp "$R/work/$name.pyb" "$out/$name.pyb"
}

# Records a long profile again (twice at most) while it has fewer than 300,000 samples: the
# sampler keeps up with 50 kHz only on an otherwise idle machine, and a busy one loses samples
# (one recording here during a build had 185,000). A profile still short is kept, with a note.
record_long() {
  local name=$1 tries=0 samples
  while :; do
    record "$@"
    samples=$(sed -n 's/.*written to .* (\([0-9]*\) samples).*/\1/p' "$out/$name.log")
    tries=$((tries + 1))
    [ "${samples:-0}" -ge 300000 ] && return 0
    [ "$tries" -ge 3 ] && { echo "real profiles: $name has only ${samples:-?} samples (machine busy?)" >&2; return 0; }
  done
}

if [ "$long" = 1 ]; then
  # RLE-heavy: 24 idle pool threads and a mostly sleeping main thread, sampled at 5 kHz
  # (about 500,000 thread samples in 4 s, nearly all in REPEAT runs).
  WORKLOAD_SECONDS=4 record_long idle_pool_raw idle_pool.py -a -r 5khz --compression none
  WORKLOAD_SECONDS=4 record_long idle_pool_zstd idle_pool.py -a -r 5khz --compression zstd
  # Deep and varied: recursive evaluation of random trees, 20–200 frames, two threads, at
  # 50 kHz (the sampler reaches 30,000–45,000 samples a second here: 300,000+ in 12 s).
  WORKLOAD_SECONDS=12 record_long deep_varied_raw deep_varied.py -a -r 50khz --compression none
  WORKLOAD_SECONDS=12 record_long deep_varied_zstd deep_varied.py -a -r 50khz --compression zstd
  ls "$out"/*.pyb
  exit 0
fi

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
