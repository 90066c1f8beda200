#!/usr/bin/env bash
# Records real MOJO files with Austin 3.7.0 (PyPI austin-dist) sampling Python 3.11 running
# our own workloads (qemu-tests/vectors/mojo-austin-3.7/scripts/), one per mode, and has
# austin-python 1.7.1's mojo2austin write each as Austin text. Into OUT/:
#   NAME.mojo      the file Austin wrote (austin -b)
#   NAME.austin    mojo2austin 1.7.1's text of it
# for NAME in wall (simple.py), cpu (-s), memory (-m, memory.py), full (-f, threads.py),
# gc (-g, gcheavy.py), threads (threads.py) and children (-C, children.py: a process pool).
# Austin reads another process's memory: run as root. Debian's own /usr/bin/python3.11 is
# the target (a wrapper script such as pyenv's shim would make Austin sample the shell).
# Cache: the virtual environment in $TACHYON_AUSTIN_DIR (default ~/.cache/tachyon-austin).
# Usage: record.sh OUT
set -euo pipefail
OUT=${1:?usage: record.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=$HERE/../../vectors/mojo-austin-3.7/scripts
A=${TACHYON_AUSTIN_DIR:-$HOME/.cache/tachyon-austin}
fail() { echo "austin record: FAILED: $*" >&2; exit 1; }

PY=/usr/bin/python3.11
if [ ! -x "$PY" ] || ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  [ "$(id -u)" = 0 ] || fail "need root to install python3.11"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv >/tmp/austin-apt.log 2>&1 \
    || fail "apt-get install python3.11 python3.11-venv (log: /tmp/austin-apt.log)"
fi
V=$A/austin-3.7
if [ ! -f "$V/ready" ]; then
  rm -rf "$V"
  "$PY" -m venv "$V" || fail "python3.11 -m venv $V"
  "$V/bin/pip" install -q austin-dist==3.7.0 austin-python==1.7.1 >"$A/pip.log" 2>&1 \
    || fail "pip install austin-dist==3.7.0 austin-python==1.7.1 (log: $A/pip.log)"
  touch "$V/ready"
fi

rm -rf "$OUT"
mkdir -p "$OUT"
record() {
  local name=$1 script=$2
  shift 2
  # Austin exits 0 once the workload has; its banner and statistics go to stderr.
  (cd "$SCRIPTS" && "$V/bin/austin" -b -i 1ms "$@" -o "$OUT/$name.mojo" "$PY" "$script" >/dev/null 2>"$OUT/$name.stderr") \
    || fail "$name: austin $* (stderr: $OUT/$name.stderr)"
  [ -s "$OUT/$name.mojo" ] || fail "$name: austin wrote nothing"
  "$V/bin/mojo2austin" "$OUT/$name.mojo" "$OUT/$name.austin" || fail "$name: mojo2austin"
  printf '%s: %s bytes, %s samples\n' "$name" "$(stat -c %s "$OUT/$name.mojo")" "$(grep -c '^P' "$OUT/$name.austin")"
}
record wall simple.py
record cpu simple.py -s
record memory memory.py -m
record full threads.py -f
record gc gcheavy.py -g
record threads threads.py
record children children.py -C
