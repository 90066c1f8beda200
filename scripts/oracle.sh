#!/usr/bin/env bash
# Sets up the real CPython 3.15 as a conformance oracle, without installing it system-wide:
# Debian unstable's python3.15 packages for amd64 and s390x are downloaded with a private apt
# configuration and unpacked into a cache folder. x86_64 runs through the root's own loader;
# s390x (big-endian) runs under qemu-user, installed here with apt if missing.
#
# Usage: scripts/oracle.sh            prints the oracle folder on its last line
# Cache: $TACHYON_ORACLE_DIR, default ~/.cache/tachyon-oracle. Idempotent: a finished set-up
# is reused. Every failure names its step.
set -euo pipefail

A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
ARCHES=(amd64 s390x)
fail() { printf 'oracle set-up failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
log() { printf 'oracle: %s\n' "$*" >&2; }

need_apt() {
  local pkg=$1 cmd=$2
  command -v "$cmd" >/dev/null && return 0
  [ "$(id -u)" = 0 ] || fail "install $pkg" "$cmd is missing and this is not root (apt-get install $pkg)"
  log "installing $pkg"
  apt-get update -qq >/dev/null 2>&1 || fail "install $pkg" "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null 2>&1 || fail "install $pkg" "apt-get install $pkg failed"
}

need_apt qemu-user qemu-s390x
need_apt dpkg dpkg-deb
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
if [ ! -f "$KEYRING" ]; then
  need_apt debian-archive-keyring "$KEYRING-is-missing"
  [ -f "$KEYRING" ] || fail "install debian-archive-keyring" "$KEYRING still missing"
fi

if [ -f "$A/ready" ]; then
  log "reusing $A"
  echo "$A"
  exit 0
fi

log "preparing private apt configuration in $A"
mkdir -p "$A/etc/apt/sources.list.d" "$A/etc/apt/apt.conf.d" "$A/etc/apt/preferences.d" \
  "$A/etc/apt/trusted.gpg.d" "$A/var/lib/apt/lists/partial" "$A/var/lib/dpkg"
touch "$A/var/lib/dpkg/status"
echo "deb [arch=amd64,s390x signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
  >"$A/etc/apt/sources.list"
cat >"$A/apt.conf" <<CONF
Dir "$A/";
Dir::State::status "$A/var/lib/dpkg/status";
APT::Architecture "amd64";
APT::Architectures { "amd64"; "s390x"; };
Acquire::Check-Valid-Until "false";
Debug::NoLocking "true";
CONF
export APT_CONFIG=$A/apt.conf

log "downloading the package lists of Debian unstable"
apt-get update -qq >"$A/apt-update.log" 2>&1 || fail "apt-get update (private)" "see $A/apt-update.log"

for arch in "${ARCHES[@]}"; do
  log "downloading python3.15:$arch and its dependencies"
  rm -rf "$A/dl-$arch" "$A/root-$arch"
  mkdir -p "$A/dl-$arch/partial" "$A/root-$arch"
  apt-get install -y -qq --download-only -o Dir::Cache::archives="$A/dl-$arch/" "python3.15:$arch" \
    >"$A/download-$arch.log" 2>&1 || fail "download python3.15:$arch" "see $A/download-$arch.log"
  log "unpacking $arch"
  for deb in "$A/dl-$arch"/*.deb; do
    dpkg-deb -x "$deb" "$A/root-$arch" || fail "unpack $arch" "dpkg-deb -x $deb"
  done
  # The usr-merge links normally come from package scripts, which are not run here.
  (cd "$A/root-$arch" && for d in lib lib64 bin sbin; do [ -e "usr/$d" ] && ln -sfn "usr/$d" "$d"; done; true)
done

log "checking both interpreters"
"$(dirname "$0")/oracle-python.sh" amd64 -c 'import _remote_debugging as r, sys; assert r.zstd_available(); print(sys.version)' >&2 \
  || fail "run x86_64 python3.15" "the unpacked interpreter does not start"
"$(dirname "$0")/oracle-python.sh" s390x -c 'import _remote_debugging as r, sys; assert r.zstd_available(); print(sys.byteorder, sys.version)' >&2 \
  || fail "run s390x python3.15 under qemu" "the unpacked interpreter does not start"
touch "$A/ready"
echo "$A"
