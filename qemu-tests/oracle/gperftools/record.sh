#!/usr/bin/env bash
# Records real gperftools CPU profiles with libprofiler (Debian's gperftools 2.10) of our own
# workload (workload.c + libsort.c: known functions, frame pointers, debug info) and what
# the real readers print for them, into OUT/x86_64/:
#   workload.prof                 the profile, written by libprofiler through ProfilerStart
#   google-pprof.collapsed.txt    google-pprof 2.10 (perl) --collapsed, symbolised
#   google-pprof.text.txt         google-pprof --text
#   go-pprof.raw.txt              go tool pprof -raw -symbolize=none
#   go-pprof.traces.txt           go tool pprof -traces (symbolised by go's own symboliser)
#   go-pprof.pb.gz                go tool pprof -proto -symbolize=none: the profile as go's
#                                 legacy parser made it into profile.proto
#   bins/                         the binaries, moved here after the readers ran: the paths
#                                 the profile names no longer exist, as with a profile copied
#                                 off the machine that recorded it (tests use --binary-path).
# Installs what it needs (as root): libgoogle-perftools-dev, google-perftools (google-pprof),
# libc6-dbg (so that both google-pprof and we name libc's static functions alike).
# Usage: record.sh OUT [ROUNDS]
set -euo pipefail
OUT=${1:?usage: record.sh OUT [ROUNDS]}
ROUNDS=${2:-4000}
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "gperftools record: FAILED: $*" >&2; exit 1; }

need=()
[ -f /usr/include/gperftools/profiler.h ] || need+=(libgoogle-perftools-dev)
command -v google-pprof >/dev/null || need+=(google-perftools)
[ -d /usr/lib/debug/.build-id ] && dpkg -s libc6-dbg >/dev/null 2>&1 || need+=(libc6-dbg)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "need root to install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/tmp/gperftools-apt.log 2>&1 \
    || { apt-get update -q >>/tmp/gperftools-apt.log 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >>/tmp/gperftools-apt.log 2>&1; } \
    || fail "apt-get install ${need[*]} (log: /tmp/gperftools-apt.log)"
fi
command -v go >/dev/null || fail "go (scripts/viewer-tools.sh installs it)"

D=$OUT/x86_64
rm -rf "$D"
mkdir -p "$D/build"
B=$D/build
cc -O1 -g -fno-omit-frame-pointer -fPIC -shared -o "$B/libsort.so" "$HERE/libsort.c" || fail "build libsort.so"
cc -O1 -g -fno-omit-frame-pointer -o "$B/workload" "$HERE/workload.c" -L"$B" -lsort -lprofiler \
  -Wl,-rpath,"$B" || fail "build workload"
CPUPROFILE_FREQUENCY=1000 "$B/workload" "$D/workload.prof" "$ROUNDS" >/dev/null 2>"$D/libprofiler.stderr" \
  || fail "workload run (stderr: $D/libprofiler.stderr)"
google-pprof --collapsed "$B/workload" "$D/workload.prof" >"$D/google-pprof.collapsed.txt" 2>/dev/null \
  || fail "google-pprof --collapsed"
google-pprof --text "$B/workload" "$D/workload.prof" >"$D/google-pprof.text.txt" 2>/dev/null \
  || fail "google-pprof --text"
go tool pprof -raw -symbolize=none "$D/workload.prof" >"$D/go-pprof.raw.txt" 2>/dev/null || fail "go tool pprof -raw"
go tool pprof -traces "$D/workload.prof" >"$D/go-pprof.traces.txt" 2>/dev/null || fail "go tool pprof -traces"
go tool pprof -proto -symbolize=none "$D/workload.prof" >"$D/go-pprof.pb.gz" 2>/dev/null || fail "go tool pprof -proto"
mv "$B" "$D/bins"
printf '%s: %s\n' "$D/workload.prof" "$(cat "$D/libprofiler.stderr")"
