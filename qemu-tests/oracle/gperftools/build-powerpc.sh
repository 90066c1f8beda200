#!/usr/bin/env bash
# Builds libprofiler for 32-bit powerpc and 64-bit powerpc (big-endian, ELFv1), which Debian
# no longer ships, from Debian bookworm's own source package of gperftools 2.10
# (google-perftools 2.10-1: its patches touch only the perl pprof and manual pages), with
# Debian's cross compilers, the way the package builds it (autoreconf, then configure; only
# the CPU profiler). Programs linked with it run under qemu-user (qemu-ppc, qemu-ppc64 -L
# /usr/<triplet>, the cross compilers' libraries).
#
# Usage: build-powerpc.sh       prints the folder on its last line; it holds
#                               <arch>/libprofiler.so.0 and <arch>/include/gperftools/
#                               for arch powerpc and powerpc64
# Cache: $TACHYON_GPERFTOOLS_ROOTS/powerpc (default ~/.cache/tachyon-gperftools). Idempotent.
# Installs what it needs (as root): autoconf, automake, libtool, g++-powerpc{,64}-linux-gnu.
set -euo pipefail
R=${TACHYON_GPERFTOOLS_ROOTS:-$HOME/.cache/tachyon-gperftools}/powerpc
fail() { printf 'libprofiler for powerpc failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
log() { printf 'libprofiler for powerpc: %s\n' "$*" >&2; }

if [ -f "$R/ready" ]; then
  log "reusing $R"
  echo "$R"
  exit 0
fi

need=()
for tool in autoreconf:autoconf automake:automake libtoolize:libtool \
  powerpc-linux-gnu-g++:g++-powerpc-linux-gnu powerpc64-linux-gnu-g++:g++-powerpc64-linux-gnu; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "apt-get install ${need[*]}" "not root"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/tmp/gperftools-powerpc-apt.log 2>&1 \
    || { apt-get update -qq >>/tmp/gperftools-powerpc-apt.log 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >>/tmp/gperftools-powerpc-apt.log 2>&1; } \
    || fail "apt-get install ${need[*]}" "see /tmp/gperftools-powerpc-apt.log"
fi

KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] || fail "keyring" "$KEYRING is missing (apt-get install debian-archive-keyring)"
rm -rf "$R"
A=$R/apt
mkdir -p "$A/etc/apt/apt.conf.d" "$A/etc/apt/preferences.d" "$A/etc/apt/sources.list.d" \
  "$A/var/lib/apt/lists/partial" "$A/var/lib/dpkg" "$R/src"
touch "$A/var/lib/dpkg/status"
echo "deb-src [signed-by=$KEYRING] http://deb.debian.org/debian bookworm main" >"$A/etc/apt/sources.list"
cat >"$A/apt.conf" <<CONF
Dir "$A/";
Dir::State::status "$A/var/lib/dpkg/status";
Acquire::Check-Valid-Until "false";
Debug::NoLocking "true";
CONF
export APT_CONFIG=$A/apt.conf
log "downloading Debian bookworm's source package google-perftools"
apt-get update -qq >"$R/apt-update.log" 2>&1 || fail "apt-get update (deb-src, private)" "see $R/apt-update.log"
(cd "$R/src" && apt-get source --download-only google-perftools=2.10-1 >"$R/download.log" 2>&1) \
  || fail "apt-get source google-perftools=2.10-1" "see $R/download.log"
tar -xzf "$R/src/google-perftools_2.10.orig.tar.gz" -C "$R/src" || fail "unpack" "the orig tarball"
S=$R/src/gperftools-gperftools-2.10
[ -d "$S" ] || fail "unpack" "no $S"
(cd "$S" && autoreconf -fi >"$R/autoreconf.log" 2>&1) || fail "autoreconf" "see $R/autoreconf.log"

for arch in powerpc powerpc64; do
  log "building libprofiler for $arch"
  B=$R/build-$arch
  mkdir -p "$B" "$R/$arch/include"
  (cd "$B" && "$S/configure" --host="$arch-linux-gnu" --disable-static --disable-heap-profiler \
    --disable-heap-checker --disable-debugalloc >"$R/configure-$arch.log" 2>&1) \
    || fail "configure $arch" "see $R/configure-$arch.log"
  (cd "$B" && make -j"$(nproc)" libprofiler.la >"$R/make-$arch.log" 2>&1) || fail "make $arch" "see $R/make-$arch.log"
  cp -L "$B/.libs/libprofiler.so.0" "$R/$arch/" || fail "copy $arch" "no libprofiler.so.0"
  cp -r "$S/src/gperftools" "$R/$arch/include/"
done
rm -rf "$A" "$R"/build-*
touch "$R/ready"
echo "$R"
