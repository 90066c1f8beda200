#!/usr/bin/env bash
# The fleet merge benchmark (docs/fleet.md): `tachyon merge --to pprof` against
# `go tool pprof -proto`, both given the same 200 and 2,000 pprof files, whole command
# against whole command; wall time (median of RUNS) and peak memory (GNU time's maximum
# resident set). The files: the committed real wall-clock CPython 3.15.2 profiles, made into
# 2,000 by qemu-tests' fleet_files (shifted thread ids and times), written as pprof by it (the
# same conversion as `tachyon convert --to pprof`). Prints a markdown table.
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

# One timed run: "seconds KiB".
measure() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
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

echo "| files | \`go tool pprof -proto\` | peak | \`tachyon merge --to pprof\` | peak | speed-up | \`tachyon merge --to pprof --threads\` | peak | speed-up |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in 200 2000; do
  read -r gs gm < <(bench sh -c "go tool pprof -proto $W/pb$n/*.pb.gz > $W/go.pb.gz")
  read -r ts tm < <(bench "$T" --quiet merge "$W/pb$n" --to pprof -o "$W/t.pb.gz")
  read -r hs hm < <(bench "$T" --quiet merge "$W/pb$n" --to pprof --threads -o "$W/th.pb.gz")
  # The same samples: go's merged profile and ours hold the same total.
  g=$(go tool pprof -raw "$W/go.pb.gz" 2>/dev/null | awk '/^Samples:/{s=1;next} /^Locations/{s=0} s && $1 ~ /^[0-9]+$/ {n+=$1} END{print n}')
  t=$(go tool pprof -raw "$W/t.pb.gz" 2>/dev/null | awk '/^Samples:/{s=1;next} /^Locations/{s=0} s && $1 ~ /^[0-9]+$/ {n+=$1} END{print n}')
  [ "$g" = "$t" ] || fail "$n files: go pprof's merged profile has $g samples, ours $t"
  sp=$(awk -v a="$gs" -v b="$ts" 'BEGIN{printf "%.0f×", a/(b>0?b:0.005)}')
  sh=$(awk -v a="$gs" -v b="$hs" 'BEGIN{printf "%.0f×", a/(b>0?b:0.005)}')
  echo "| $n | ${gs} s | $((gm / 1024)) MiB | ${ts} s | $((tm / 1024)) MiB | $sp | ${hs} s | $((hm / 1024)) MiB | $sh |"
done
echo
echo "(median of $RUNS runs; $(nproc) cores; $(date -u +%Y-%m-%d); same samples checked with go tool pprof -raw)"
rm -rf "$W"
