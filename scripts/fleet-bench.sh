#!/usr/bin/env bash
# The fleet merge benchmark (docs/fleet.md): `tachyon merge --to pprof` against
# `go tool pprof -proto`, both given the same 200 and 2,000 pprof files, whole command
# against whole command; wall time (median of RUNS) and peak memory (GNU time's maximum
# resident set). The files: the committed real wall-clock CPython 3.15.2 profiles, made into
# 2,000 by qemu-tests' fleet_files (shifted thread ids and times), written as pprof by it (the
# same conversion as `tachyon convert --to pprof`). Prints a markdown table.
#
# Then real deep profiles, which the fleet's re-encodings of four small files are not:
# DEEP_COPIES copies (300 by default) of CPython 3.15.2's sampler on deep_varied.py (20–200
# frames, two threads; the committed recording, qemu-tests/fixtures/recorded/), and the
# committed wall-mode recordings of CPython's sampler (that one and those of
# qemu-tests/fixtures/real-3.15.2/), VARIED_COPIES times (10) each; and SMALL_COPIES copies
# (3,000) of a small one (examples/stdlib_work.pyb: a rotated period of a quiet process, where
# the merge's cost per file shows) — each file written once as pprof by `tachyon convert
# --to pprof`. Here ours runs on one thread (`-j 1`) and on
# every core; both must write the same bytes. All inputs are the repository's, so the figures
# of two machines are of the same files.
#
#   RUNS=5 bash scripts/fleet-bench.sh > table.md
#
# Needs go and /usr/bin/time (scripts/viewer-tools.sh, scripts/fleet.sh install them).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
RUNS=${RUNS:-3}
fail() { printf 'fleet benchmark failed: %s\n' "$*" >&2; exit 1; }
release_build || fail "build"
T=$PWD/target/release/tachyon
W=$PWD/target/fleet-bench
rm -rf "$W" && mkdir -p "$W/pb2000" "$W/pb200"
R=qemu-tests/fixtures/real-3.15.2
# The fleet's files as pprof, written by one process (a `tachyon convert` per file took
# about half the smoke run).
target/release/fleet_files --pprof "$W/pb2000" 2000 "$R/mixed_wall_blocking_raw.pyb" "$R/recursion_deep_raw.pyb" \
  "$R/threads_wall_zstd.pyb" "$R/opcodes_native_zstd.pyb" || fail "fleet_files"
for f in $(ls "$W/pb2000" | head -200); do ln -s "$W/pb2000/$f" "$W/pb200/$f"; done

# One timed run: "seconds KiB". The wall time is read to the millisecond around GNU time,
# whose own %e gives hundredths: a tenth of a merge of 0.1 s.
measure() {
  local start end kib
  start=$(date +%s%N)
  kib=$(/usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1)
  end=$(date +%s%N)
  awk -v ns=$((end - start)) -v kib="$kib" 'BEGIN{printf "%.3f %s\n", ns / 1e9, kib}'
}
# Median seconds of RUNS runs, and the largest peak: "seconds KiB".
bench() {
  local times=() peak=0 t m
  for _ in $(seq "$RUNS"); do
    read -r t m < <(measure "$@")
    times+=("$t")
    [ "$m" -gt "$peak" ] && peak=$m
  done
  printf '%s %s\n' "$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" "$peak"
}

# The sum of a merged profile's samples' value COLUMN (1: the counts, 2: the nanoseconds), as
# go pprof prints them: raw_total FILE COLUMN.
raw_total() {
  go tool pprof -raw "$1" 2>/dev/null |
    awk -v c="$2" '/^Samples:/{s=1;next} /^Locations/{s=0} s && $1 ~ /^[0-9]+$/ {n+=$c} END{printf "%.0f", n}'
}
# How many times faster B seconds are than A: ratio A B.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f×", a/(b>0?b:0.005)}'; }

echo "| files | \`go tool pprof -proto\` | peak | \`tachyon merge --to pprof\` | peak | speed-up | \`tachyon merge --to pprof --threads\` | peak | speed-up |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in 200 2000; do
  read -r gs gm < <(bench sh -c "go tool pprof -proto $W/pb$n/*.pb.gz > $W/go.pb.gz")
  read -r ts tm < <(bench "$T" --quiet merge "$W/pb$n" --to pprof -o "$W/t.pb.gz")
  read -r hs hm < <(bench "$T" --quiet merge "$W/pb$n" --to pprof --threads -o "$W/th.pb.gz")
  # The same samples: go's merged profile and ours hold the same total.
  g=$(raw_total "$W/go.pb.gz" 1)
  t=$(raw_total "$W/t.pb.gz" 1)
  [ "$g" = "$t" ] || fail "$n files: go pprof's merged profile has $g samples, ours $t"
  sp=$(ratio "$gs" "$ts")
  sh=$(ratio "$gs" "$hs")
  echo "| $n | ${gs} s | $((gm / 1024)) MiB | ${ts} s | $((tm / 1024)) MiB | $sp | ${hs} s | $((hm / 1024)) MiB | $sh |"
done
echo
echo "(median of $RUNS runs; $(nproc) cores; $(date -u +%Y-%m-%d); same samples checked with go tool pprof -raw)"

DEEP=qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb
mkdir -p "$W/one" "$W/deep" "$W/varied" "$W/small"
"$T" --quiet convert "$DEEP" --to pprof -o "$W/one/deep_varied.pb.gz" || fail "convert deep_varied"
for i in $(seq "${DEEP_COPIES:-300}"); do ln -s "$W/one/deep_varied.pb.gz" "$W/deep/$i.pb.gz"; done
"$T" --quiet convert examples/stdlib_work.pyb --to pprof -o "$W/one/small.pb.gz" || fail "convert stdlib_work"
for i in $(seq "${SMALL_COPIES:-3000}"); do ln -s "$W/one/small.pb.gz" "$W/small/$i.pb.gz"; done
wall=0
for f in "$DEEP" "$R"/*.pyb; do
  "$T" info --json "$f" | grep -q '"mode_name": *"wall"' || continue
  wall=$((wall + 1))
  "$T" --quiet convert "$f" --to pprof -o "$W/one/$wall.pb.gz" || fail "convert $f"
  for i in $(seq "${VARIED_COPIES:-10}"); do ln -s "$W/one/$wall.pb.gz" "$W/varied/$wall-$i.pb.gz"; done
done
[ "$wall" -gt 0 ] || fail "no wall-mode recording among $DEEP and $R"
echo
echo "| files | \`go tool pprof -proto\` | peak | \`tachyon merge --to pprof -j 1\` | peak | speed-up | \`tachyon merge --to pprof\` ($(nproc) threads) | peak | speed-up |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
# The small files first: go's merge of the deep ones takes 3 GiB, and for seconds after it
# the kernel taking that memory back slowed what ran next by up to a fifth (measured).
for set in small deep varied; do
  n=$(ls "$W/$set" | wc -l)
  read -r gs gm < <(bench sh -c "go tool pprof -proto $W/$set/*.pb.gz > $W/go.pb.gz")
  read -r ts tm < <(bench "$T" --quiet merge "$W/$set" --to pprof -j 1 -o "$W/t1.pb.gz")
  read -r hs hm < <(bench "$T" --quiet merge "$W/$set" --to pprof -o "$W/t.pb.gz")
  cmp -s "$W/t1.pb.gz" "$W/t.pb.gz" || fail "$set: the merge on one thread and on $(nproc) wrote different bytes"
  # The same time: the recordings' intervals differ (20 µs to 1 ms), and go adds their counts
  # as they are where ours counts in units of the intervals' greatest common divisor, so the
  # nanoseconds (the second value) are compared.
  g=$(raw_total "$W/go.pb.gz" 2)
  t=$(raw_total "$W/t.pb.gz" 2)
  [ "$g" = "$t" ] && [ "$g" != 0 ] || fail "$set: go pprof's merged profile holds $g ns, ours $t"
  case $set in
    deep) what="$n copies of the deep recording" ;;
    small) what="$n copies of a small recording ($(stat -c %s "$W/one/small.pb.gz") bytes)" ;;
    *) what="$wall wall-mode recordings × ${VARIED_COPIES:-10}" ;;
  esac
  s1=$(ratio "$gs" "$ts")
  sn=$(ratio "$gs" "$hs")
  echo "| $what | ${gs} s | $((gm / 1024)) MiB | ${ts} s | $((tm / 1024)) MiB | $s1 | ${hs} s | $((hm / 1024)) MiB | $sn |"
done
echo
echo "(real deep profiles: median of $RUNS runs; $(du -shL "$W/one" | cut -f1) of pprof files before copies; the same nanoseconds in both merged profiles, checked with go tool pprof -raw)"
rm -rf "$W"
