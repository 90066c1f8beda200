#!/usr/bin/env bash
# Makes again the real tools' recordings the repository holds (qemu-tests/fixtures/recorded/):
# the inputs of every check about what a recording contains, which must give the same verdict
# on every machine (qemu-tests/src/recordings.rs). It runs the recorders the test command runs
# each time into a scratch folder and copies the files below over the committed ones:
#
#   gperftools-2.10/{x86_64,s390x}/   libprofiler's profile of our workload, its two binaries,
#                                     what google-pprof and go pprof printed of it, go's -proto
#   austin-4.0.0/, austin-3.7.0/      Austin's MOJO files of the threads and children workloads
#   cpython-3.15.2/                   CPython 3.15.2's sampler on the deep workload (the long set)
#
# Needs what the test command sets up (run `bash scripts/test-all.sh` once): root, the CPython
# oracle, Austin's environments, Go, libprofiler and the cross roots. Takes a few minutes on an
# otherwise idle machine (the deep recording wants 300,000 samples). Review the new files and
# their README before committing: the tests assert what these hold.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "record-fixtures: the recorders need root" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
O=qemu-tests/oracle
F=qemu-tests/fixtures/recorded

echo "record-fixtures: gperftools (libprofiler on x86_64, i386, s390x, powerpc, powerpc64)"
bash "$O/gperftools/record.sh" "$work/gperftools" >"$work/gperftools.log" 2>&1 || { tail -20 "$work/gperftools.log"; exit 1; }
echo "record-fixtures: Austin 3.7.0 and 4.0.0"
bash "$O/austin/record.sh" "$work/austin" >"$work/austin.log" 2>&1 || { tail -20 "$work/austin.log"; exit 1; }
echo "record-fixtures: CPython 3.15.2's sampler, the long set"
"$O/make_real_profiles.sh" --long "$work/long" >"$work/long.log" 2>&1 || { tail -20 "$work/long.log"; exit 1; }

for arch in x86_64 s390x; do
  to=$F/gperftools-2.10/$arch
  rm -rf "$to" && mkdir -p "$to/bins"
  for f in workload.prof google-pprof.collapsed.txt google-pprof.text.txt go-pprof.raw.txt go-pprof.pb.gz; do
    cp "$work/gperftools/$arch/$f" "$to/"
  done
  cp "$work/gperftools/$arch/bins/workload" "$work/gperftools/$arch/bins/libsort.so" "$to/bins/"
done
rm -rf "$F/austin-4.0.0" "$F/austin-3.7.0" && mkdir -p "$F/austin-4.0.0" "$F/austin-3.7.0"
cp "$work/austin/a40-threads.mojo" "$work/austin/a40-children.mojo" "$F/austin-4.0.0/"
cp "$work/austin/threads.mojo" "$F/austin-3.7.0/"
rm -rf "$F/cpython-3.15.2" && mkdir -p "$F/cpython-3.15.2"
cp "$work/long/deep_varied_zstd.pyb" "$F/cpython-3.15.2/"
grep -h 'written to' "$work/long/deep_varied_zstd.log" || true
du -sh "$F"
echo "record-fixtures: done; review git status and $F/README.md"
