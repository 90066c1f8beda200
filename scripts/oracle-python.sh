#!/usr/bin/env bash
# Runs the oracle's python3.15: scripts/oracle-python.sh amd64|s390x ARGS...
# (after scripts/oracle.sh; $TACHYON_ORACLE_DIR as there).
set -euo pipefail
A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
arch=$1
shift
case "$arch" in
  amd64)
    R=$A/root-amd64
    exec "$R/usr/lib64/ld-linux-x86-64.so.2" --library-path "$R/usr/lib/x86_64-linux-gnu" "$R/usr/bin/python3.15" "$@" ;;
  s390x)
    R=$A/root-s390x
    exec qemu-s390x -L "$R" "$R/usr/bin/python3.15" "$@" ;;
  *) echo "usage: $0 amd64|s390x ARGS..." >&2; exit 2 ;;
esac
