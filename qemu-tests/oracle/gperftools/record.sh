#!/usr/bin/env bash
# Records real gperftools CPU profiles with libprofiler (Debian's gperftools 2.10) of our own
# workload (workload.c + libsort.c: known functions, frame pointers, debug info) and what
# the real readers print for them, into OUT/x86_64/, OUT/i386/ (natively, with Debian bookworm's
# i386 libprofiler unpacked privately by cross-roots.sh and the i686 cross gcc), OUT/s390x/
# (the same under qemu-user), OUT/powerpc/ and OUT/powerpc64/ (libprofiler built from
# bookworm's source package by build-powerpc.sh, run under qemu-user), each holding:
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
need_apt() {
  [ "$(id -u)" = 0 ] || fail "need root to install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/tmp/gperftools-apt.log 2>&1 \
    || { apt-get update -q >>/tmp/gperftools-apt.log 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>/tmp/gperftools-apt.log 2>&1; } \
    || fail "apt-get install $* (log: /tmp/gperftools-apt.log)"
}
[ ${#need[@]} -eq 0 ] || need_apt "${need[@]}"
command -v go >/dev/null || fail "go (scripts/viewer-tools.sh installs it)"

# record ARCH CC ROUNDS [RUNNER...]: builds the workload in OUT/ARCH/build with CC (and
# $EXTRA_CFLAGS / $EXTRA_LDFLAGS), runs it (under RUNNER), reads the profile with the real
# readers, then moves the binaries to OUT/ARCH/bins.
record() {
  local arch=$1 cc=$2 rounds=$3
  shift 3
  local D=$OUT/$arch B=$OUT/$arch/build
  rm -rf "$D"
  mkdir -p "$B"
  "$cc" -O1 -g -fno-omit-frame-pointer -fPIC -shared -o "$B/libsort.so" "$HERE/libsort.c" || fail "$arch: build libsort.so"
  # shellcheck disable=SC2086
  "$cc" -O1 -g -fno-omit-frame-pointer $EXTRA_CFLAGS -o "$B/workload" "$HERE/workload.c" -L"$B" -lsort \
    $EXTRA_LDFLAGS -Wl,--disable-new-dtags,-rpath,"$B${EXTRA_RPATH:+:$EXTRA_RPATH}" || fail "$arch: build workload"
  CPUPROFILE_FREQUENCY=1000 "$@" "$B/workload" "$D/workload.prof" "$rounds" >/dev/null 2>"$D/libprofiler.stderr" \
    || fail "$arch: workload run (stderr: $D/libprofiler.stderr)"
  google-pprof --collapsed "$B/workload" "$D/workload.prof" >"$D/google-pprof.collapsed.txt" 2>/dev/null \
    || fail "$arch: google-pprof --collapsed"
  google-pprof --text "$B/workload" "$D/workload.prof" >"$D/google-pprof.text.txt" 2>/dev/null \
    || fail "$arch: google-pprof --text"
  go tool pprof -raw -symbolize=none "$D/workload.prof" >"$D/go-pprof.raw.txt" 2>/dev/null || fail "$arch: go tool pprof -raw"
  go tool pprof -traces "$D/workload.prof" >"$D/go-pprof.traces.txt" 2>/dev/null || fail "$arch: go tool pprof -traces"
  go tool pprof -proto -symbolize=none "$D/workload.prof" >"$D/go-pprof.pb.gz" 2>/dev/null || fail "$arch: go tool pprof -proto"
  mv "$B" "$D/bins"
  printf '%s: %s\n' "$D/workload.prof" "$(cat "$D/libprofiler.stderr")"
}

EXTRA_CFLAGS="" EXTRA_LDFLAGS="-lprofiler" EXTRA_RPATH="" record x86_64 cc "$ROUNDS"

# i386 natively and s390x under qemu-user, with bookworm's libprofiler unpacked privately.
command -v i686-linux-gnu-gcc >/dev/null || need_apt gcc-i686-linux-gnu
command -v s390x-linux-gnu-gcc >/dev/null || need_apt gcc-s390x-linux-gnu
command -v qemu-s390x >/dev/null || need_apt qemu-user
ROOTS=$(bash "$HERE/cross-roots.sh" | tail -n 1) || fail "cross-roots.sh"
for arch in i386 s390x; do
  R=$ROOTS/root-$arch
  triplet=$([ "$arch" = i386 ] && echo i386-linux-gnu || echo s390x-linux-gnu)
  L=$R/usr/lib/$triplet:$R/lib/$triplet
  if [ "$arch" = i386 ]; then
    # The root's own loader and libraries: the program runs natively.
    EXTRA_CFLAGS="-I$R/usr/include" EXTRA_LDFLAGS="$R/usr/lib/$triplet/libprofiler.so.0 -Wl,-rpath-link,$L \
      -Wl,--dynamic-linker=$R/lib/ld-linux.so.2" EXTRA_RPATH="$L" record i386 i686-linux-gnu-gcc "$ROUNDS"
  else
    # qemu-user finds the loader and libraries under the root (-L); 1/10 of the rounds,
    # since emulation is about ten times slower.
    EXTRA_CFLAGS="-I$R/usr/include" EXTRA_LDFLAGS="$R/usr/lib/$triplet/libprofiler.so.0 -Wl,-rpath-link,$L" \
      EXTRA_RPATH="" record s390x s390x-linux-gnu-gcc "$((ROUNDS / 10))" qemu-s390x -L "$R"
  fi
done

# powerpc and powerpc64 (big-endian) under qemu-user, with libprofiler built from bookworm's
# source package; the cross compilers' own libraries are the root (-L).
command -v qemu-ppc >/dev/null || need_apt qemu-user
PPC=$(bash "$HERE/build-powerpc.sh" | tail -n 1) || fail "build-powerpc.sh"
for arch in powerpc powerpc64; do
  qemu=$([ "$arch" = powerpc ] && echo qemu-ppc || echo qemu-ppc64)
  EXTRA_CFLAGS="-I$PPC/$arch/include" EXTRA_LDFLAGS="$PPC/$arch/libprofiler.so.0" EXTRA_RPATH="$PPC/$arch" \
    record "$arch" "$arch-linux-gnu-gcc" "$((ROUNDS / 10))" "$qemu" -L "/usr/$arch-linux-gnu"
done
