#!/usr/bin/env bash
# Builds the C library in release mode and installs it into a prefix:
#
#   bash scripts/capi-install.sh [--prefix DIR] [--libdir DIR] [--includedir DIR] [--destdir DIR]
#
#   PREFIX/lib/libtachyon_c.a                     the static library
#   PREFIX/lib/libtachyon_c.so.X.Y.Z              the shared library, SONAME libtachyon_c.so.0.1
#   PREFIX/lib/libtachyon_c.so.0.1, .so           its links (for the loader, for -ltachyon_c)
#   PREFIX/include/tachyon.h                      the header
#   PREFIX/lib/pkgconfig/tachyon.pc               pkg-config, shared: -ltachyon_c
#   PREFIX/lib/pkgconfig/tachyon-static.pc        pkg-config, static: the archive and its libs
#   PREFIX/lib/cmake/tachyon/                     find_package(tachyon): tachyon::tachyon
#
# --prefix defaults to /usr/local; --libdir and --includedir to PREFIX/lib and PREFIX/include.
# --destdir (or DESTDIR) stages the install: files go to DESTDIR/PREFIX/..., and say PREFIX.
# The pkg-config and CMake files find the prefix from where they are when libdir and
# includedir are inside the prefix (`pkg-config --define-prefix`; CMake always), so an
# installed tree can be moved. Builds nothing when the test command's release build is
# current (scripts/harness.sh's release_build, which this calls).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
usage() { printf 'usage: bash scripts/capi-install.sh [--prefix DIR] [--libdir DIR] [--includedir DIR] [--destdir DIR]\n' >&2; exit 2; }
fail() { printf 'capi-install: %s\n' "$*" >&2; exit 1; }
PREFIX=/usr/local LIBDIR= INCLUDEDIR= DEST=${DESTDIR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || usage; PREFIX=$2; shift 2 ;;
    --libdir) [ $# -ge 2 ] || usage; LIBDIR=$2; shift 2 ;;
    --includedir) [ $# -ge 2 ] || usage; INCLUDEDIR=$2; shift 2 ;;
    --destdir) [ $# -ge 2 ] || usage; DEST=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#*=}; shift ;;
    --libdir=*) LIBDIR=${1#*=}; shift ;;
    --includedir=*) INCLUDEDIR=${1#*=}; shift ;;
    --destdir=*) DEST=${1#*=}; shift ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
  esac
done
case $PREFIX in /*) ;; *) fail "--prefix must be an absolute path (got $PREFIX)" ;; esac
PREFIX=${PREFIX%/}
[ -n "$PREFIX" ] || PREFIX=/
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
for d in "$LIBDIR" "$INCLUDEDIR"; do
  case $d in /*) ;; *) fail "--libdir and --includedir must be absolute paths (got $d)" ;; esac
done

release_build || fail "cargo build of the C library (release) failed"
BUILT=target/release
SHARED=libtachyon_c.so.$CAPI_VERSION
[ -f "$BUILT/libtachyon_c.so" ] && [ -f "$BUILT/libtachyon_c.a" ] || fail "no libtachyon_c.so and .a in $BUILT"

# Paths as the installed files write them: relative to the prefix when inside it.
in_prefix() { # in_prefix PATH VAR: ${VAR}/rest when PATH is under PREFIX, else PATH
  case $1 in
    "$PREFIX") printf '${%s}' "$2" ;;
    "$PREFIX"/*) printf '${%s}/%s' "$2" "${1#"$PREFIX"/}" ;;
    *) printf '%s' "$1" ;;
  esac
}
PC_LIBDIR=$(in_prefix "$LIBDIR" prefix)
PC_INCLUDEDIR=$(in_prefix "$INCLUDEDIR" prefix)
install -d "$DEST$LIBDIR/pkgconfig" "$DEST$LIBDIR/cmake/tachyon" "$DEST$INCLUDEDIR"
install -m 644 "$BUILT/libtachyon_c.a" "$DEST$LIBDIR/libtachyon_c.a"
install -m 755 "$BUILT/libtachyon_c.so" "$DEST$LIBDIR/$SHARED"
ln -sfn "$SHARED" "$DEST$LIBDIR/$CAPI_SONAME"
ln -sfn "$CAPI_SONAME" "$DEST$LIBDIR/libtachyon_c.so"
install -m 644 capi/include/tachyon.h "$DEST$INCLUDEDIR/tachyon.h"
for pc in tachyon tachyon-static; do
  sed -e "s|@PREFIX@|$PREFIX|; s|@LIBDIR@|$PC_LIBDIR|; s|@INCLUDEDIR@|$PC_INCLUDEDIR|; s|@VERSION@|$CAPI_VERSION|" \
    "capi/$pc.pc.in" >"$DEST$LIBDIR/pkgconfig/$pc.pc"
done

# CMake: the prefix from the config file's own folder when the libraries are inside it.
cmake_path() { # cmake_path PATH: PATH as the config file names it
  case $1 in
    "$PREFIX") printf '${_tachyon_prefix}' ;;
    "$PREFIX"/*) printf '${_tachyon_prefix}/%s' "${1#"$PREFIX"/}" ;;
    *) printf '%s' "$1" ;;
  esac
}
up=$(realpath -m --relative-to="$LIBDIR/cmake/tachyon" "$PREFIX")
sed -e "s|@UP@|$up|; s|@LIBDIR@|$(cmake_path "$LIBDIR")|g; s|@INCLUDEDIR@|$(cmake_path "$INCLUDEDIR")|g" \
  -e "s|@SHARED@|$SHARED|; s|@SONAME@|$CAPI_SONAME|; s|@VERSION@|$CAPI_VERSION|" \
  capi/cmake/tachyonConfig.cmake.in >"$DEST$LIBDIR/cmake/tachyon/tachyonConfig.cmake"
sed -e "s|@VERSION@|$CAPI_VERSION|" capi/cmake/tachyonConfigVersion.cmake.in \
  >"$DEST$LIBDIR/cmake/tachyon/tachyonConfigVersion.cmake"

printf 'installed the tachyon C library %s for %s%s\n' "$CAPI_VERSION" "$PREFIX" "${DEST:+ (staged in $DEST)}"
