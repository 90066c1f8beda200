#!/usr/bin/env bash
# Unpacks Debian bookworm's libgoogle-perftools-dev (gperftools 2.10) and what it needs for
# i386 and s390x into private roots, without installing them: a private apt configuration
# downloads the packages, dpkg-deb unpacks them. i386 programs then run natively through the
# root's loader, s390x ones under qemu-user with the root as its prefix.
#
# Usage: cross-roots.sh            prints the folder on its last line
# Cache: $TACHYON_GPERFTOOLS_ROOTS, default ~/.cache/tachyon-gperftools. Idempotent.
set -euo pipefail
R=${TACHYON_GPERFTOOLS_ROOTS:-$HOME/.cache/tachyon-gperftools}
ARCHES=(i386 s390x)
fail() { printf 'gperftools roots failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
log() { printf 'gperftools roots: %s\n' "$*" >&2; }

if [ -f "$R/ready" ]; then
  log "reusing $R"
  echo "$R"
  exit 0
fi
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] || fail "keyring" "$KEYRING is missing (apt-get install debian-archive-keyring)"

mkdir -p "$R/etc/apt/sources.list.d" "$R/etc/apt/apt.conf.d" "$R/etc/apt/preferences.d" \
  "$R/etc/apt/trusted.gpg.d" "$R/var/lib/apt/lists/partial" "$R/var/lib/dpkg"
touch "$R/var/lib/dpkg/status"
echo "deb [arch=amd64,i386,s390x signed-by=$KEYRING] http://deb.debian.org/debian bookworm main" >"$R/etc/apt/sources.list"
cat >"$R/apt.conf" <<CONF
Dir "$R/";
Dir::State::status "$R/var/lib/dpkg/status";
APT::Architecture "amd64";
APT::Architectures { "amd64"; "i386"; "s390x"; };
Acquire::Check-Valid-Until "false";
Debug::NoLocking "true";
CONF
export APT_CONFIG=$R/apt.conf
log "downloading the package lists of Debian bookworm"
apt-get update -qq >"$R/apt-update.log" 2>&1 || fail "apt-get update (private)" "see $R/apt-update.log"
for arch in "${ARCHES[@]}"; do
  log "downloading libgoogle-perftools-dev:$arch and its dependencies"
  rm -rf "$R/dl-$arch" "$R/root-$arch"
  mkdir -p "$R/dl-$arch/partial" "$R/root-$arch"
  apt-get install -y -qq --no-install-recommends --download-only -o Dir::Cache::archives="$R/dl-$arch/" \
    "libgoogle-perftools-dev:$arch" "libc6-dev:$arch" >"$R/download-$arch.log" 2>&1 \
    || fail "download libgoogle-perftools-dev:$arch" "see $R/download-$arch.log"
  for deb in "$R/dl-$arch"/*.deb; do
    dpkg-deb -x "$deb" "$R/root-$arch" || fail "unpack $arch" "dpkg-deb -x $deb"
  done
  (cd "$R/root-$arch" && for d in lib lib64 bin sbin; do [ -e "usr/$d" ] && ln -sfn "usr/$d" "$d"; done; true)
done
touch "$R/ready"
echo "$R"
