#!/usr/bin/env bash
# Records real pstats files for the tests, with Python 3.11 (Debian's) and CPython 3.15.2
# (the oracle), on workload.py:
#   c311, p311          python3.11 -m cProfile / -m profile (profile puts a code object in a key)
#   c311_long           cProfile on a copy under a long, non-ASCII directory (absolute path)
#   d311                pstats.Stats(c311).dump_stats (3.11's marshal of a loaded dict)
#   m311                pstats.Stats(c311).add(c311_long).dump_stats
#   c315, t315          3.15's cProfile and profiling.tracing
#   s315, r315          profiling.sampling run --pstats, and replay --pstats of the same run's
#                       --binary file (in a chroot of the oracle's root: the sampler reads the
#                       child's memory, so root is needed)
# Usage: record.sh OUT
set -euo pipefail
OUT=$(mkdir -p "${1:?usage: record.sh OUT}" && cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
R=$A/root-amd64
fail() { echo "pstats record: FAILED: $*" >&2; exit 1; }
PY311=/usr/bin/python3.11
[ -x "$PY311" ] || fail "python3.11 is missing (scripts/viewer-tools.sh installs it)"
[ -f "$A/ready" ] || fail "the CPython 3.15.2 oracle is not set up (scripts/oracle.sh)"
PY315() { "$ROOT/scripts/oracle-python.sh" amd64 "$@"; }

rm -rf "$OUT"/*.pstats "$OUT/work" "$OUT/long"
mkdir -p "$OUT/work"
cp "$HERE/workload.py" "$OUT/work/"
LONG="$OUT/long/données d'été $(printf 'répertoire%.0s' 1 2 3 4 5 6 7 8 9 10 11 12)/ünïcödé"
mkdir -p "$LONG"
cp "$HERE/workload.py" "$LONG/"

cd "$OUT/work"
$PY311 -m cProfile -o "$OUT/c311.pstats" workload.py >/dev/null || fail "3.11 cProfile"
$PY311 -m profile -o "$OUT/p311.pstats" workload.py >/dev/null || fail "3.11 profile"
$PY311 -m cProfile -o "$OUT/c311_long.pstats" "$LONG/workload.py" >/dev/null || fail "3.11 cProfile, long path"
$PY311 -c 'import pstats, sys; pstats.Stats(sys.argv[1]).dump_stats(sys.argv[2])' \
  "$OUT/c311.pstats" "$OUT/d311.pstats" || fail "3.11 dump_stats"
$PY311 -c 'import pstats, sys; pstats.Stats(sys.argv[1]).add(sys.argv[2]).dump_stats(sys.argv[3])' \
  "$OUT/c311.pstats" "$OUT/c311_long.pstats" "$OUT/m311.pstats" || fail "3.11 add + dump_stats"
PY315 -m cProfile -o "$OUT/c315.pstats" workload.py >/dev/null || fail "3.15 cProfile"
PY315 -m profiling.tracing -o "$OUT/t315.pstats" workload.py >/dev/null || fail "3.15 profiling.tracing"

[ "$(id -u)" = 0 ] || fail "the sampler's recording needs root (chroot)"
. "$HERE/../chroot_mounts.sh"
oracle_chroot "$R"
cp "$HERE/workload.py" "$R/work/pstats_workload.py"
sample() {
  env -i PATH=/usr/bin:/bin LC_ALL=C PSTATS_REPEAT=15 /usr/sbin/chroot "$R" /usr/bin/python3.15 -m profiling.sampling run \
    -r 10khz "$@" /work/pstats_workload.py >"$OUT/sampling.log" 2>&1
}
sample --pstats -o /work/s315.pstats || fail "3.15 profiling.sampling run --pstats (log: $OUT/sampling.log)"
cp "$R/work/s315.pstats" "$OUT/s315.pstats"
sample --binary -o /work/s315.pyb || fail "3.15 profiling.sampling run --binary (log: $OUT/sampling.log)"
cp "$R/work/s315.pyb" "$OUT/s315.pyb"
PY315 -m profiling.sampling replay --pstats -o "$OUT/r315.pstats" "$OUT/s315.pyb" >/dev/null \
  || fail "3.15 profiling.sampling replay --pstats"
for f in "$OUT"/*.pstats; do printf '%s: %s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"; done
