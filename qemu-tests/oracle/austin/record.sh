#!/usr/bin/env bash
# Records real MOJO files with Austin 3.7.0 and 4.0.0 (PyPI austin-dist) sampling Python 3.11
# running our own workloads (qemu-tests/vectors/mojo-austin-3.7/scripts/), one per mode, and
# has austin-python 1.7.1's mojo2austin write each as Austin text, and austin-python 2.4.0's
# reader dump its samples (samples.py beside this script). Into OUT/:
#   NAME.mojo, a40-NAME.mojo       the files Austin 3.7.0 (austin -b) and 4.0.0 wrote
#   NAME.austin, a40-NAME.austin   mojo2austin 1.7.1's text of each
#   NAME.speedscope.json, ...      austin2speedscope 1.7.1's JSON of each NAME.austin
#   NAME.samples.jsonl, ...        austin-python 2.4.0's samples of each
#   vectors/PATH.samples.jsonl     the same of every committed MOJO vector (PATH under
#                                  qemu-tests/vectors/, "/" as "__")
#   vectors/NAME.speedscope.json   austin2speedscope's JSON of the committed mojo2austin text
#                                  of each real vector (vectors/NAME.austin)
# for NAME in wall (simple.py), cpu (-s; 4.0: -c), memory (-m, memory.py), full (-f,
# threads.py), gc (-g, gcheavy.py), threads (threads.py) and children (-C, children.py: a
# process pool). Austin 4.0.0 needs glibc 2.38: it runs through the loader and libraries of
# the CPython 3.15 oracle's newer root (scripts/oracle.sh, $TACHYON_ORACLE_DIR).
# Austin reads another process's memory: run as root. Debian's own /usr/bin/python3.11 is
# the target (a wrapper script such as pyenv's shim would make Austin sample the shell).
# Cache: the virtual environments in $TACHYON_AUSTIN_DIR (default ~/.cache/tachyon-austin).
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
# venv NAME PACKAGE...: a cached virtual environment $A/NAME holding the packages.
venv() {
  local dir=$A/$1
  shift
  if [ ! -f "$dir/ready" ]; then
    rm -rf "$dir"
    "$PY" -m venv "$dir" || fail "python3.11 -m venv $dir"
    "$dir/bin/pip" install -q "$@" >"$dir.pip.log" 2>&1 || fail "pip install $* (log: $dir.pip.log)"
    touch "$dir/ready"
  fi
}
venv austin-3.7 austin-dist==3.7.0 austin-python==1.7.1
venv austin-4.0 austin-dist==4.0.0
venv austin-python-2.4 austin-python==2.4.0
V=$A/austin-3.7 V4=$A/austin-4.0 V24=$A/austin-python-2.4
ROOT=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}/root-amd64
[ -x "$ROOT/usr/lib64/ld-linux-x86-64.so.2" ] || fail "the oracle's root $ROOT (run scripts/oracle.sh first)"
# Austin 4.0.0 once (of many runs) went on sampling a Python process that had no frames left
# for seven minutes: at most 30 s of sampling (-x; it then ends the workload and exits 254,
# the file complete), and a timeout over all.
austin40() {
  local rc=0
  timeout -k 10 120 "$ROOT/usr/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu" \
    "$V4/bin/austin" -x 30 "$@" || rc=$?
  if [ "$rc" = 254 ]; then
    echo "austin 4.0.0: sampling ended by -x 30 (the workload outlived it)" >&2
    rc=0
  fi
  return "$rc"
}

rm -rf "$OUT"
mkdir -p "$OUT"
# record NAME SCRIPT AUSTIN [FLAGS...]: AUSTIN is a command (austin37 or austin40).
austin37() { "$V/bin/austin" -b "$@"; }
record() {
  local name=$1 script=$2 austin=$3
  shift 3
  # Austin exits 0 once the workload has; its banner and statistics go to stderr. It looks
  # for the interpreter's state while Python starts, and on a loaded machine it sometimes
  # gives up ("not a Python process", exit 32, a header-only file): it waits up to 5 s
  # (-t; 3.7.0's default is 100 ms) and a failed attempt is made again, after a second's
  # pause, up to six attempts. Three were once too few: on a cold run (2026-11-25) Austin 4.0.0
  # failed three times running in memory mode, saying it "Cannot determine the version of the
  # Python interpreter" or exiting 3 with nothing written; by hand just after, 2 of 6 attempts
  # failed, then none of 24. The failures come in bursts, and each takes under a second.
  # With -C, whether Austin finds the pool's children before they finish is chance on a
  # loaded machine (a CI run once had the parent alone): such a file is recorded again too.
  # So is a file mojo2austin cannot read: a CI run once had Austin copy a string out of a
  # child process while it changed (bytes that are not UTF-8, on which 1.7.1 raises).
  local attempt attempts=6
  for attempt in $(seq "$attempts"); do
    [ "$attempt" = 1 ] || sleep 1
    if (cd "$SCRIPTS" && "$austin" -i 1ms -t 5s "$@" -o "$OUT/$name.mojo" "$PY" "$script" \
      >/dev/null 2>"$OUT/$name.stderr") && [ -s "$OUT/$name.mojo" ]; then
      if ! "$V/bin/mojo2austin" "$OUT/$name.mojo" "$OUT/$name.austin" 2>"$OUT/$name.mojo2austin.stderr"; then
        [ "$attempt" = "$attempts" ] && fail "$name: mojo2austin could not read $attempts recordings ($OUT/$name.mojo2austin.stderr)"
        echo "$name: mojo2austin cannot read this recording (attempt $attempt): $(tail -1 "$OUT/$name.mojo2austin.stderr"); once more" >&2
        continue
      fi
      # Austin 4.0.0 once sampled a CPU-mode run for its whole 30 s without a single frame
      # (CI, 2026-11-26: 15,066 samples, every stack empty, the workload outliving -x 30): a
      # recording without a frame is made again.
      if ! grep -q '^P[^ ]*;T[^ ;]*;' "$OUT/$name.austin"; then
        [ "$attempt" = "$attempts" ] && fail "$name: $austin $* sampled no frame $attempts times"
        echo "$name: austin sampled no frame (attempt $attempt), once more" >&2
        continue
      fi
      case "$name" in
        *children) [ "$(grep '^P' "$OUT/$name.austin" | cut -d';' -f1 | sort -u | wc -l)" -gt 1 ] && break ;;
        *) break ;;
      esac
      [ "$attempt" = "$attempts" ] && fail "$name: $austin $* sampled one process $attempts times"
      echo "$name: austin sampled one process (attempt $attempt), once more" >&2
      continue
    fi
    [ "$attempt" = "$attempts" ] && fail "$name: $austin $* failed $attempts times (stderr: $OUT/$name.stderr)"
    echo "$name: austin failed (attempt $attempt), once more" >&2
  done
  "$V/bin/austin2speedscope" "$OUT/$name.austin" "$OUT/$name.speedscope.json" || fail "$name: austin2speedscope"
  "$V24/bin/python" "$HERE/samples.py" "$OUT/$name.mojo" >"$OUT/$name.samples.jsonl" \
    || fail "$name: austin-python 2.4.0's reader (samples.py)"
  printf '%s: %s bytes, %s samples\n' "$name" "$(stat -c %s "$OUT/$name.mojo")" "$(grep -c '^P' "$OUT/$name.austin")"
}
for v in 37 40; do
  prefix=$([ $v = 37 ] && echo "" || echo "a40-")
  cpu=$([ $v = 37 ] && echo -s || echo -c)
  record "${prefix}wall" simple.py austin$v
  record "${prefix}cpu" simple.py austin$v "$cpu"
  record "${prefix}memory" memory.py austin$v -m
  record "${prefix}full" threads.py austin$v -f
  record "${prefix}gc" gcheavy.py austin$v -g
  record "${prefix}threads" threads.py austin$v
  record "${prefix}children" children.py austin$v -C
done
# austin-python 2.4.0's samples of the committed vectors (a file it fails on is recorded
# with its error).
VECTORS=$HERE/../../vectors
mkdir -p "$OUT/vectors"
(cd "$VECTORS" && find mojo-austin-3.7 mojo-v4 -name '*.mojo' | sort) | while read -r path; do
  "$V24/bin/python" "$HERE/samples.py" "$VECTORS/$path" >"$OUT/vectors/${path//\//__}.samples.jsonl" \
    || fail "$path: austin-python 2.4.0's reader (samples.py)"
done
echo "austin-python 2.4.0 samples of $(ls "$OUT/vectors" | wc -l) committed vectors"
# austin2speedscope (1.7.1) of mojo2austin's text of the committed real files and their v1/v2
# re-encodings (the text is committed: expected/NAME.austin.gz); the JSON's name is the text
# file's, NAME.austin.
(cd "$VECTORS/mojo-austin-3.7/expected" && ls *.austin.gz) | while read -r gz; do
  text=$OUT/vectors/${gz%.gz}
  gunzip -c "$VECTORS/mojo-austin-3.7/expected/$gz" >"$text"
  "$V/bin/austin2speedscope" "$text" "${text%.austin}.speedscope.json" || fail "$gz: austin2speedscope"
done
echo "austin2speedscope JSON of $(ls "$OUT"/vectors/*.speedscope.json | wc -l) committed vectors"
