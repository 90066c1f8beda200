#!/usr/bin/env bash
# The C library as its users get it: installed by scripts/capi-install.sh into a prefix, and
# into a staging folder (DESTDIR) then used from there as a moved prefix; a C and a C++
# program, copied out of the tree, built against each prefix alone with pkg-config and with
# CMake's find_package(tachyon), linked dynamically and statically, run, and their files read
# by CPython 3.15.2. The shared library exports tachyon_* symbols only and has its SONAME.
#
#   bash capi/tests/installed/check.sh          (scripts/capi.sh runs it; needs scripts/oracle.sh
#                                                and cmake, g++, pkg-config)
#   bash capi/tests/installed/check.sh PREFIX   the same on a prefix installed elsewhere (the
#                                                release's C tarball, unpacked), as a moved one
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/capi/tests/installed
fail() { printf 'installed C library: %s\n' "$*" >&2; exit 1; }
log() { printf '  installed: %s\n' "$*"; }
W=$(mktemp -d /tmp/tachyon-installed.XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=scripts/harness.sh
. "$ROOT/scripts/harness.sh"

if [ $# -ge 1 ]; then
  DIRECT=
  MOVED=$(cd "$1" && pwd)
else
  DIRECT=$W/prefix
  bash "$ROOT/scripts/capi-install.sh" --prefix "$DIRECT" >/dev/null || fail "scripts/capi-install.sh --prefix"
  bash "$ROOT/scripts/capi-install.sh" --prefix /usr/local --destdir "$W/stage" >/dev/null \
    || fail "scripts/capi-install.sh --destdir"
  MOVED=$W/stage/usr/local
fi
# Only what an installed prefix has, outside the tree: no path into the repository.
mkdir -p "$W/src" "$W/out"
cp "$HERE/consumer.c" "$HERE/consumer.cpp" "$HERE/CMakeLists.txt" "$W/src/"
cd "$W/src"

SO=$MOVED/lib/libtachyon_c.so.$CAPI_VERSION
soname=$(readelf -d "$SO" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "$CAPI_SONAME" ] || fail "the shared library's SONAME is '$soname', not $CAPI_SONAME"
others=$(nm -D --defined-only "$SO" | awk '{print $3}' | grep -v '^tachyon_' || true)
[ -z "$others" ] || fail "the shared library exports more than tachyon_*: $others"
exported=$(nm -D --defined-only "$SO" | wc -l)
# Every function the header declares is exported.
for f in $(sed -n 's/^[a-z_ 0-9]*[ *]\(tachyon_[a-z0-9_]*\)(.*/\1/p' "$MOVED/include/tachyon.h"); do
  nm -D --defined-only "$SO" | grep -qw "$f" || fail "the shared library does not export $f"
done
log "$CAPI_SONAME exports $exported symbols, all tachyon_*, every function of the header"

# name KIND: the program ran, and its dynamic section says which library it loads.
run() { # run NAME PROGRAM shared|static [ENV...]
  local name=$1 program=$2 kind=$3
  shift 3
  local needed
  needed=$(readelf -d "$program" | grep NEEDED || true)
  case $kind in
    shared) grep -q "\[$CAPI_SONAME\]" <<<"$needed" || fail "$name does not load $CAPI_SONAME: $needed" ;;
    static) ! grep -q tachyon <<<"$needed" || fail "$name links the static library but loads: $needed" ;;
  esac
  env "$@" "$program" "$W/out/$name.pyb" >"$W/out/$name.txt" 2>&1 || { cat "$W/out/$name.txt" >&2; fail "$name failed"; }
  log "$name ($kind): $(cat "$W/out/$name.txt")"
}

CWARN="-Wall -Wextra -Werror"
# pc_builds LABEL PREFIX [--define-prefix]: C and C++, shared and static, through pkg-config
# with only PREFIX's .pc files.
pc_builds() {
  local label=$1 prefix=$2 define=${3:-} pc
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig
  [ "$(pkg-config --modversion tachyon)" = "$CAPI_VERSION" ] || fail "pkg-config --modversion tachyon ($label)"
  [ "$(pkg-config $define --variable=includedir tachyon)" = "$prefix/include" ] \
    || fail "tachyon.pc's includedir is $(pkg-config $define --variable=includedir tachyon), not $prefix/include ($label)"
  for pc in tachyon tachyon-static; do
    # shellcheck disable=SC2046,SC2086
    gcc -std=c99 $CWARN consumer.c $(pkg-config $define --cflags --libs $pc) -o "c-$label-$pc" \
      || fail "gcc with pkg-config $define $pc"
    # shellcheck disable=SC2046,SC2086
    g++ -std=c++17 $CWARN consumer.cpp $(pkg-config $define --cflags --libs $pc) -pthread -o "cpp-$label-$pc" \
      || fail "g++ with pkg-config $define $pc"
  done
  unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR
  run "c-$label-shared" "./c-$label-tachyon" shared "LD_LIBRARY_PATH=$prefix/lib"
  run "cpp-$label-shared" "./cpp-$label-tachyon" shared "LD_LIBRARY_PATH=$prefix/lib"
  run "c-$label-static" "./c-$label-tachyon-static" static
  run "cpp-$label-static" "./cpp-$label-tachyon-static" static
}
# Installed where it says it is; moved (pkg-config --define-prefix finds the prefix from the
# .pc file's folder).
[ -z "$DIRECT" ] || pc_builds pc "$DIRECT"
pc_builds pc-moved "$MOVED" --define-prefix

# CMake's find_package on the moved prefix (the config file finds it from its own folder):
# shared, and static with TACHYON_USE_STATIC_LIBS.
for kind in shared static; do
  static=OFF
  [ "$kind" = static ] && static=ON
  cmake -S . -B "build-$kind" -DCMAKE_PREFIX_PATH="$MOVED" -DTACHYON_USE_STATIC_LIBS=$static \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$CWARN" -DCMAKE_CXX_FLAGS="$CWARN" >"$W/cmake-$kind.log" 2>&1 \
    || { cat "$W/cmake-$kind.log" >&2; fail "cmake configure ($kind)"; }
  cmake --build "build-$kind" -j 2 >>"$W/cmake-$kind.log" 2>&1 || { cat "$W/cmake-$kind.log" >&2; fail "cmake build ($kind)"; }
  # The shared builds load the library through the build tree's RPATH (CMake's, for the
  # imported library's folder), with no LD_LIBRARY_PATH.
  run "c-cmake-$kind" "build-$kind/consumer" "$kind"
  run "cpp-cmake-$kind" "build-$kind/consumer_cpp" "$kind"
done
# A version the package is not compatible with is refused.
mkdir -p "$W/v2" && cat >"$W/v2/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(v2 C)
find_package(tachyon 0.2 QUIET)
if(tachyon_FOUND)
  message(FATAL_ERROR "find_package(tachyon 0.2) accepted ${tachyon_VERSION}")
endif()
CM
cmake -S "$W/v2" -B "$W/v2/build" -DCMAKE_PREFIX_PATH="$MOVED" >"$W/v2.log" 2>&1 \
  || { cat "$W/v2.log" >&2; fail "find_package(tachyon 0.2) found the 0.1 package"; }

log "CPython 3.15.2 reads every consumer's file"
"$ROOT/scripts/oracle-python.sh" amd64 "$HERE/cpython_reads.py" "$W"/out/*.pyb | sed 's/^/    /' \
  || fail "CPython 3.15.2 did not read the consumers' files as written"
expected=$(( ${DIRECT:+4} + 8 ))
[ "$(ls "$W"/out/*.pyb | wc -l)" = "$expected" ] || fail "expected $expected consumers' files"
