#!/usr/bin/env bash
# The capture path's proofs (issue 27): sampling from signal handlers through the library's
# capture rings, on real runtimes, read by CPython 3.15.2.
#  - loom: the ring's memory orderings model-checked (core/tests/capture_loom.rs).
#  - machine code: what tachyon_capture_push_* can reach in the release library is only the
#    ring's own code (no libc, no allocator, no panic; scripts/signal-safety.py).
#  - C contract (capi/tests/c/capture_test.c): status codes, a full ring counted exactly,
#    code pairs resolved, and a flush asked for by SIGUSR2 reaching a journaled stream.
#  - native: 8 threads with shadow stacks, per-thread SIGPROF timers at 10 kHz, the handler
#    pushing, rings small enough to overflow: under an LD_PRELOAD tripwire that counts
#    malloc/free/pthread_mutex_*/write calls inside handlers (0, and > 0 for a handler that
#    does call malloc: the tripwire can see), and the file's missed_samples equal to the
#    drops the program counted, in CPython's reading.
#  - native addresses: a library built without frame pointers (static functions, an inlined
#    helper), SIGPROF unwinding it with libunwind and pushing raw addresses
#    (tachyon_capture_push_addresses, drained with tachyon_modules_resolve); `tachyon
#    symbolize` names every frame of the library and the program as binutils' addr2line does,
#    the probe's known stack with its lines; a stripped copy with its debugging file found by
#    build id names them alike; without the library its frames stay MODULE+0xADDRESS.
#  - rotation: 4 threads, SIGPROF at 1 kHz each, one-second journaled periods for 30.5 s, the
#    run ended by SIGKILL: every finished period reads in CPython on its own (start, span,
#    threads), the killed period is salvaged by `tachyon receive`, and the samples of all the
#    files equal what the handlers pushed minus the drops they counted minus what the program
#    logged as unflushed at the kill, exactly.
#  - tachyon top under tmux: the live view of a rotating run being written shows the hot
#    function first, its counts grow, n sorts by name, Tab picks a thread, w shows the last
#    10 s, q exits 0 and leaves the terminal as it was (each waited for, up to 10 s).
#  - hand-over kills: 20 ms journaled periods killed from outside at a random instant, 40
#    times: only the newest period file is ever a stream, `tachyon receive PREFIX` recovers
#    it, and CPython's reading matches the run's ledger (qemu-tests/oracle/capture_check.py
#    `killed`).
#  - Lua 5.4: 3 OS threads, each its own lua_State, per-thread CPU-time timers whose handler
#    only arms lua_sethook; the hook pushes; one writer drains into a journaled stream. CPython
#    reads every sample the hooks pushed, every thread, every frame the script's; the same
#    program sampling by work (a count hook every 101 instructions) gives the workload's 3:1
#    split within 2 %, a bound that holds on any machine; a run that exits without finalizing
#    is finalized at exit; a run killed with SIGKILL is salvaged by `tachyon receive` with at
#    least every sample flushed before the kill.
# Leaves target/capture/{lua-timer.pyb,native-sigprof.pyb,salvaged.pyb,tripwire.txt}.
# Installs what it needs on a fresh Debian machine (as root); says which step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
ROOT=$PWD
OUT="$ROOT/target/capture"
WORK="$OUT/work"
fail() { printf 'CAPTURE FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf '  capture: %s\n' "$*"; }
oracle() { "$ROOT/scripts/oracle-python.sh" amd64 "$ROOT/qemu-tests/oracle/capture_check.py" "$@"; }

need=()
for pair in gcc:gcc objdump:binutils pkg-config:pkg-config python3:python3; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
[ -f /usr/include/lua5.4/lua.h ] || need+=(liblua5.4-dev)
[ -f /usr/include/x86_64-linux-gnu/libunwind.h ] || need+=(libunwind-dev)
command -v tmux > /dev/null || need+=(tmux)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${need[*]} and this is not root"
  log "installing ${need[*]}"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || fail "apt-get install ${need[*]}"
fi
bash scripts/oracle.sh >/dev/null 2>&1 || fail "setting up the CPython 3.15.2 oracle"
rm -rf "$OUT"
mkdir -p "$WORK"

log "loom: the ring's orderings, every interleaving of a producer and a consumer"
# In the checked profile: the model runs in about a second either way, and the release
# profile's fat LTO over criterion's and proptest's trees (core's dev-dependencies, built
# for any test of it) took 98 s to build from empty caches against 84 s (2026-11-28).
RUSTFLAGS="--cfg loom" cargo test -q -p tachyon-core --test capture_loom --profile checked --target-dir target/loom \
  > "$WORK/loom.log" 2>&1 || { cat "$WORK/loom.log"; fail "the loom model of the capture ring"; }
grep -h "test result" "$WORK/loom.log" | sed 's/^/  capture:   /'

cargo build -q --profile checked -p tachyon-capi || fail "building the C library (as scripts/capi.sh builds it)"
release_build || fail "building the C library and the tachyon command (release)"
TACHYON="$ROOT/target/release/tachyon"
LIB="$ROOT/target/release/libtachyon_c.a"
LIBS="-lpthread -ldl -lm"

log "machine code: what the async-signal-safe functions can reach"
python3 scripts/signal-safety.py target/release/libtachyon_c.so tachyon_capture_push_ids tachyon_capture_push_code \
  tachyon_capture_push_addresses \
  tachyon_capture_get_counts tachyon_capture_get_counts64 tachyon_capture_memory_size > "$WORK/signal-safety.txt" \
  || { cat "$WORK/signal-safety.txt"; fail "a push function can reach code that is not async-signal-safe"; }
log "$(cat "$WORK/signal-safety.txt")"

log "C contract: capture_test.c"
gcc -std=c99 -Wall -Wextra -Werror -pedantic -O1 -g -I capi/include capi/tests/c/capture_test.c \
  "$ROOT/target/checked/libtachyon_c.a" $LIBS -o "$WORK/capture_test" || fail "compiling capture_test.c"
"$WORK/capture_test" "$WORK" || fail "capture_test"
"$TACHYON" verify "$WORK/capture.pyb" >/dev/null || fail "capture_test's file does not verify"
"$TACHYON" verify "$WORK/journal.pyb" >/dev/null || fail "capture_test's finalized journal is not a Tachyon file"
for want in rot.00000000.0.pyb:10 rot.00000001.2000.pyb:1 rot.00000002.2500.pyb:1; do
  "$TACHYON" verify "$WORK/${want%%:*}" > "$WORK/rot.txt" 2>&1 || fail "capture_test's period ${want%%:*}: $(cat "$WORK/rot.txt")"
  grep -q "OK, ${want#*:} thread samples" "$WORK/rot.txt" || fail "period ${want%%:*}: $(cat "$WORK/rot.txt"), want ${want#*:} samples"
done
status=0
oracle counts "$WORK/rot.00000000.0.pyb:10" "$WORK/rot.00000001.2000.pyb:1" "$WORK/rot.00000002.2500.pyb:1" \
  > "$WORK/rot-cpython.txt" || status=$?
[ "$status" = 0 ] || fail "CPython's reading of capture_test's periods: $(cat "$WORK/rot-cpython.txt")"
log "capture_test's rotating zstd writer: periods of 10, 1 and 1 samples, as named; CPython: $(cat "$WORK/rot-cpython.txt")"
# Before the signal the 50 drained samples were still staged; after it they are in the stream.
# An empty stream (nothing of it had reached the file yet) holds 0; any other must receive.
before=0
if [ -s "$WORK/before-signal.stream" ]; then
  "$TACHYON" receive "$WORK/before-signal.stream" -o "$WORK/before.pyb" 2> "$WORK/before.txt" \
    || fail "receiving the stream before SIGUSR2: $(cat "$WORK/before.txt")"
  before=$(sed -n 's/.* \([0-9]*\) samples kept.*/\1/p' "$WORK/before.txt")
fi
"$TACHYON" receive "$WORK/after-signal.stream" -o "$WORK/after.pyb" 2> "$WORK/after.txt" || fail "receiving the stream after SIGUSR2"
after=$(sed -n 's/.* \([0-9]*\) samples kept.*/\1/p' "$WORK/after.txt")
[ "$after" = 50 ] && [ "${before:-0}" -lt 50 ] \
  || fail "flush on SIGUSR2: ${before:-0} samples in the stream before the signal, $after after (want fewer than 50, then 50)"
log "flush on a signal: ${before:-0} of 50 drained samples in the stream before SIGUSR2, $after after"

log "salvage: a journaled stream cut at every 7th byte and at every byte of finish, each distinct file read by CPython"
mkdir -p "$WORK/cuts"
# The host tests' selection and profile: the test binary is built already.
TACHYON_SALVAGE_OUT="$WORK/cuts" cargo test -q --profile checked --workspace --all-features --exclude tachyon-capi \
  --test suite -- salvage::a_stream_cut_anywhere salvage::a_cut_at_every_byte_of_finish \
  > "$WORK/cuts.log" 2>&1 || { cat "$WORK/cuts.log"; fail "the cut streams' tests"; }
mapfile -t cuts < <(find "$WORK/cuts" -name 'cut-*.pyb' | sort -V)
[ "${#cuts[@]}" -ge 100 ] || fail "${#cuts[@]} distinct salvaged files from the cuts"
status=0
oracle cuts "$WORK/cuts/complete.pyb" "${cuts[@]}" > "$WORK/cuts.txt" || status=$?
log "CPython: $(cat "$WORK/cuts.txt")"
[ "$status" = 0 ] || fail "a file salvaged from a cut"

log "native: 8 threads, shadow stacks, SIGPROF at 10 kHz per thread, the handler pushing, under the tripwire"
gcc -std=c11 -Wall -Wextra -Werror -O2 -g -I capi/include capi/examples/capture/native_sigprof.c "$LIB" $LIBS \
  -o "$WORK/native_sigprof" || fail "compiling native_sigprof.c"
gcc -shared -fPIC -ftls-model=initial-exec -O2 -Wall -Wextra -Werror capi/examples/capture/tripwire.c \
  -o "$WORK/tripwire.so" -ldl || fail "compiling the tripwire"
TRIPWIRE_OUT="$WORK/tripwire-canary.txt" LD_PRELOAD="$WORK/tripwire.so" \
  "$WORK/native_sigprof" "$WORK/canary.pyb" 0.5 10000 32 --malloc-in-handler > /dev/null 2>&1 \
  || fail "native_sigprof --malloc-in-handler"
[ "$(cat "$WORK/tripwire-canary.txt")" -gt 0 ] || fail "the tripwire did not see a handler's malloc and free"
log "the tripwire sees $(cat "$WORK/tripwire-canary.txt") calls in a handler that calls malloc and free"
TRIPWIRE_OUT="$OUT/tripwire.txt" LD_PRELOAD="$WORK/tripwire.so" \
  "$WORK/native_sigprof" "$OUT/native-sigprof.pyb" 3 10000 32 > "$WORK/native.log" 2> "$WORK/native.err" \
  || { cat "$WORK/native.err"; fail "native_sigprof"; }
log "$(sed "s|$ROOT/||" "$WORK/native.log"); tripwire: $(tail -1 "$WORK/native.err")"
[ "$(cat "$OUT/tripwire.txt")" = 0 ] || fail "$(cat "$OUT/tripwire.txt") calls of malloc/free/pthread_mutex_*/write inside the SIGPROF handler"
counted=$(sed -n 's/.* \([0-9]*\) counted by the handlers.*/\1/p' "$WORK/native.log")
status=0
oracle native "$OUT/native-sigprof.pyb" "$counted" 8 > "$WORK/native-check.txt" || status=$?
log "CPython: $(sed "s|$ROOT/||" "$WORK/native-check.txt")"
[ "$status" = 0 ] || fail "CPython's reading of native-sigprof.pyb"

log "native addresses: a library without frame pointers, unwound by libunwind in SIGPROF, named offline"
# Absolute source paths: the DWARF names them so, and the check finds the marks there.
SRC="$ROOT/capi/examples/capture"
N="$WORK/addresses"
mkdir -p "$N/build" "$N/stripped"
gcc -O2 -g -fomit-frame-pointer -fPIC -shared -Wall -Wextra -Werror -Wl,--build-id "$SRC/native_lib.c" \
  -o "$N/build/libnative_lib.so" || fail "compiling native_lib.c"
gcc -std=c11 -Wall -Wextra -Werror -O1 -g -I capi/include "$SRC/native_addresses.c" -L"$N/build" -lnative_lib \
  -Wl,-rpath,"$N/build" "$LIB" -lunwind $LIBS -o "$N/build/native_addresses" || fail "compiling native_addresses.c"
TRIPWIRE_OUT="$N/tripwire.txt" LD_PRELOAD="$WORK/tripwire.so" "$N/build/native_addresses" "$N/raw.pyb" 1 \
  > "$N/run.log" 2> "$N/run.err" || { cat "$N/run.err"; fail "native_addresses"; }
written=$(sed -n 's/.*, \([0-9]*\) written.*/\1/p' "$N/run.log")
log "$(sed "s|$ROOT/||" "$N/run.log"); tripwire: $(tail -1 "$N/run.err")"
# What the handler calls besides the push is libunwind's: the tripwire must see it run, never
# allocate or write; the mutex calls it makes are libunwind's and glibc's loader's (docs/capture.md).
grep -q " inside [1-9][0-9]* handler runs (allocator 0, mutex [0-9]*, write 0)" "$N/run.err" \
  || fail "libunwind's handler: $(tail -1 "$N/run.err")"
"$TACHYON" verify "$N/raw.pyb" > /dev/null || fail "native_addresses' file does not verify"
"$TACHYON" symbolize "$N/raw.pyb" -o "$N/named.pyb" 2> "$N/symbolize.txt" || fail "tachyon symbolize: $(cat "$N/symbolize.txt")"
log "$(sed "s|$ROOT/||" "$N/symbolize.txt")"
status=0
oracle addresses "$N/raw.pyb" "$N/named.pyb" "$written" "$SRC" "$N/build/libnative_lib.so" "$N/build/native_addresses" \
  > "$N/check.txt" || status=$?
log "CPython: $(cat "$N/check.txt")"
[ "$status" = 0 ] || fail "CPython's reading of the named native frames"
# The library as a distribution ships it: stripped, its debugging file apart, found by build id;
# the built one moved away so that only the copy can be read.
id=$(readelf -n "$N/build/libnative_lib.so" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
[ -n "$id" ] || fail "libnative_lib.so has no build id"
mkdir -p "$N/stripped/.build-id/${id:0:2}"
objcopy --only-keep-debug "$N/build/libnative_lib.so" "$N/stripped/.build-id/${id:0:2}/${id:2}.debug"
objcopy --strip-all "$N/build/libnative_lib.so" "$N/stripped/libnative_lib.so"
mv "$N/build/libnative_lib.so" "$N/libnative_lib.so.moved"
"$TACHYON" symbolize "$N/raw.pyb" -o "$N/stripped.pyb" --binary-path "$N/stripped" 2> "$N/stripped.txt" \
  || fail "tachyon symbolize with the stripped copy: $(cat "$N/stripped.txt")"
status=0
oracle same "$N/named.pyb" "$N/stripped.pyb" > "$N/same.txt" || status=$?
[ "$status" = 0 ] || fail "the stripped copy and its debugging file name the frames otherwise: $(cat "$N/same.txt")"
log "stripped copy, debugging file by build id: $(cat "$N/same.txt") in CPython"
"$TACHYON" symbolize "$N/raw.pyb" -o "$N/gone.pyb" 2> "$N/gone.txt" || fail "tachyon symbolize without the library"
grep -q "libnative_lib.so: not found" "$N/gone.txt" || fail "no warning for the missing library: $(cat "$N/gone.txt")"
status=0
oracle unnamed "$N/gone.pyb" libnative_lib.so > "$N/unnamed.txt" || status=$?
[ "$status" = 0 ] || fail "the missing library's frames: $(cat "$N/unnamed.txt")"
log "library gone: $(cat "$N/unnamed.txt") in CPython"

log "rotation: 4 threads, SIGPROF at 1 kHz, one-second journaled periods for 30.5 s, then SIGKILL"
mkdir -p "$WORK/rotate"
status=0
"$WORK/native_sigprof" "$WORK/rotate/run" 30.5 1000 16 --rotate --kill --threads 4 > "$WORK/rotate.log" \
  2> "$WORK/rotate.err" || status=$?
[ "$status" = 137 ] || { cat "$WORK/rotate.err"; fail "native_sigprof --rotate --kill ended with $status, not SIGKILL's 137"; }
log "$(sed "s|$ROOT/||" "$WORK/rotate.log")"
read -r pushes refused unflushed late < <(sed -n \
  's/.*: \([0-9]*\) pushes by the handlers, \([0-9]*\) refused as full.* \([0-9]*\) unflushed in period.* took at most \([0-9]*\) us$/\1 \2 \3 \4/p' \
  "$WORK/rotate.log")
[ -n "${late:-}" ] || fail "native_sigprof --rotate printed no accounting"
grep -q "(the rings counted $refused dropped" "$WORK/rotate.log" \
  || fail "the handlers counted $refused refusals, the rings another number of drops"
mapfile -t periods < <(find "$WORK/rotate" -name 'run.*.pyb' | sort)
[ "${#periods[@]}" -ge 31 ] || fail "${#periods[@]} period files, want 31 or more from 30.5 s of one-second periods"
killed=${periods[-1]}
unset 'periods[-1]'
"$TACHYON" receive "$killed" -o "$WORK/rotate-salvaged.pyb" 2> "$WORK/rotate-receive.txt" \
  || fail "tachyon receive of the killed period: $(cat "$WORK/rotate-receive.txt")"
log "$(sed "s|$ROOT/||" "$WORK/rotate-receive.txt")"
status=0
oracle rotated "$WORK/rotate-salvaged.pyb" $((pushes - refused - unflushed)) 4 "$late" "${periods[@]}" > "$WORK/rotated.txt" \
  || status=$?
log "CPython: $(cat "$WORK/rotated.txt")"
[ "$status" = 0 ] || fail "the rotated periods"

log "tachyon top under tmux: the live view of a rotating run being written"
# The workload's split is render 4 : collide 2 : integrate 2 : mix_audio 1 (its design), so
# render leads by own samples; by name, collide comes first of its six functions.
L="$WORK/top"
mkdir -p "$L"
# The writer runs until it is killed below: 60 s is more than the check takes on any machine.
"$WORK/native_sigprof" "$L/run" 60 1000 256 --rotate --threads 4 > "$L/run.log" 2>&1 &
writer=$!
for _ in $(seq 100); do compgen -G "$L/run.*.pyb" > /dev/null && break; sleep 0.05; done
compgen -G "$L/run.*.pyb" > /dev/null || fail "native_sigprof --rotate made no period file"
tmux kill-session -t tachyon-top 2>/dev/null || true
tmux new-session -d -s tachyon-top -x 110 -y 24 \
  "bash -c '\"$TACHYON\" top \"$L/run\" --interval 0.5; echo exit=\$?; stty -a | grep -o -- \"-\\?icanon\"; sleep 60'"
# A failure here ends the writer and the session with the step.
top_failed() { tmux kill-session -t tachyon-top 2>/dev/null || true; kill "$writer" 2>/dev/null || true; fail "$@"; }
samples() { sed -n '1s/.* - \([0-9]*\) samples, .*/\1/p' "$1"; }
# Takes the screen into $L/NAME.txt every 0.1 s until CHECK (given that file) holds, for up to
# 10 s, and prints the seconds it waited: a refresh or a key is waited for, not timed, since a
# loaded machine is slower, not wrong.
await() {
  local name=$1 check=$2 tries
  for tries in $(seq 100); do
    tmux capture-pane -p -t tachyon-top > "$L/$name.txt"
    if "$check" "$L/$name.txt"; then
      awk -v n="$tries" 'BEGIN { printf "%.1f", n / 10 }'
      return 0
    fi
    sleep 0.1
  done
  return 1
}
# Render leads once a thousand samples are in (by the design, it has 4 of every 9).
render_first() { [ "$(samples "$1")" -ge 1000 ] 2> /dev/null && sed -n 4p "$1" | grep -q " render (native.c:20)"; }
grown() { [ "$(samples "$1")" -gt "$first" ] 2> /dev/null; }
by_name() { sed -n 1p "$1" | grep -q "sort name" && sed -n 4p "$1" | grep -q " collide (native.c:40)"; }
thread_one() { sed -n 1p "$1" | grep -q " - thread 1 - "; }
last_10s() { sed -n 1p "$1" | grep -q " samples in the last 10 s, "; }
exited() { grep -q "^exit=" "$1" && grep -qx -- "-\?icanon" "$1"; }
waited=$(await first render_first) || top_failed "top's first row is not render: $(cat "$L/first.txt")"
first=$(samples "$L/first.txt")
await second grown > /dev/null || top_failed "top's samples did not grow: ${first:-none}, then $(samples "$L/second.txt")"
second=$(samples "$L/second.txt")
tmux send-keys -t tachyon-top n
await by-name by_name > /dev/null || top_failed "n did not sort by name: $(cat "$L/by-name.txt")"
tmux send-keys -t tachyon-top Tab
await thread thread_one > /dev/null || top_failed "Tab did not pick thread 1: $(cat "$L/thread.txt")"
tmux send-keys -t tachyon-top w
await window last_10s > /dev/null || top_failed "w did not show the last 10 s: $(cat "$L/window.txt")"
tmux send-keys -t tachyon-top q
await after exited > /dev/null || top_failed "top did not exit on q: $(cat "$L/after.txt")"
tmux kill-session -t tachyon-top
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
grep -qx "exit=0" "$L/after.txt" || top_failed "top did not exit 0 on q: $(cat "$L/after.txt")"
grep -qx "icanon" "$L/after.txt" || top_failed "the terminal was left in raw mode: $(cat "$L/after.txt")"
log "top: render first after ${waited} s (refreshing every 0.5 s), ${first} then ${second} samples, n sorted by name, Tab showed thread 1, q exited 0 with the terminal restored"

log "hand-over kills: 20 ms journaled periods, SIGKILL from outside at a random instant, 40 runs"
# Each run: only the newest period file may be a stream (and only its name may have a
# .receiving file beside it); `tachyon receive PREFIX` makes it a profile and removes the
# leftover; CPython then reads every period and checks them against the run's ledger.
mkdir -p "$WORK/kills"
handovers=0 leftovers=0
for run in $(seq 1 40); do
  d="$WORK/kills/$run"
  mkdir -p "$d"
  "$WORK/native_sigprof" "$d/run" 30 1000 16 --rotate --period-ms 20 --threads 4 --ledger "$d/ledger" \
    > /dev/null 2> "$d/err" &
  pid=$!
  # 150 to 750 ms in: 7 to 37 periods.
  sleep "0.$((150 + RANDOM % 600))"
  kill -KILL "$pid"
  status=0
  { wait "$pid"; } 2> /dev/null || status=$?
  [ "$status" = 137 ] || { cat "$d/err"; fail "kill run $run ended with $status before its SIGKILL"; }
  mapfile -t periods < <(find "$d" -name 'run.*.pyb' | sort)
  [ "${#periods[@]}" -ge 2 ] || fail "kill run $run: ${#periods[@]} period files"
  newest=${periods[-1]}
  for f in "${periods[@]}"; do
    magic=$(head -c4 "$f")
    if [ "$f" != "$newest" ] && [ "$magic" != TACH ] && [ "$magic" != HCAT ]; then
      fail "kill run $run: $(basename "$f") is not a complete file, and a later period exists"
    fi
  done
  for f in "$d"/*.receiving; do
    [ -e "$f" ] || continue
    case "$f" in "$newest".*.receiving) leftovers=$((leftovers + 1)) ;; *) fail "kill run $run: $(basename "$f") beside an earlier period" ;; esac
  done
  "$TACHYON" receive "$d/run" 2> "$d/receive.txt" || fail "kill run $run: tachyon receive of the prefix: $(cat "$d/receive.txt")"
  # A kill in a hand-over left the ended period's complete stream (with or without a
  # .receiving file), its file complete with no later period begun, or the next period's
  # file before its header: not a live period's cut stream.
  grep -q "now a profile: the stream was cut" "$d/receive.txt" || handovers=$((handovers + 1))
  ls "$d"/*.receiving > /dev/null 2>&1 && fail "kill run $run: a .receiving file left after tachyon receive"
done
status=0
oracle killed 20000 "$WORK"/kills/* > "$WORK/kills.txt" || status=$?
log "CPython: $(cat "$WORK/kills.txt")"
[ "$status" = 0 ] || fail "the killed runs' periods"
log "$handovers of the 40 kills fell in a hand-over ($leftovers left a .receiving file), the rest in a live period"

log "Lua 5.4: 3 threads, per-thread CPU timers arming lua_sethook, one journaled writer"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror -O2 -g -I capi/include $(pkg-config --cflags lua5.4) \
  capi/examples/capture/lua_timer.c "$LIB" $(pkg-config --libs lua5.4) $LIBS -o "$WORK/lua_timer" \
  || fail "compiling lua_timer.c"
SPLIT="$ROOT/capi/examples/capture/split.lua"
# The journal's path holds the Tachyon file once the run finalizes (the stream is replaced by
# it): CPython reads it as it is, with no `tachyon receive`.
"$WORK/lua_timer" "$OUT/lua-timer.pyb" "$SPLIT" 3 20 1000 > "$WORK/lua.log" || fail "lua_timer"
log "$(sed "s|$ROOT/||" "$WORK/lua.log")"
# `tachyon receive` of it copies it, saying so.
"$TACHYON" receive "$OUT/lua-timer.pyb" -o "$WORK/lua-received.pyb" 2> "$WORK/lua-receive.txt" || fail "tachyon receive lua-timer.pyb"
grep -q "already a Tachyon file" "$WORK/lua-receive.txt" && cmp -s "$OUT/lua-timer.pyb" "$WORK/lua-received.pyb" \
  || fail "the finalized journal is not a Tachyon file: $(cat "$WORK/lua-receive.txt")"
# lua_timer's last line: "N samples written, N taken, N pushed, N dropped; ... heavy N us,
# light N us". Every sample pushed is taken and written; a drop (a ring the drain did not
# reach in time) is never pushed.
lua_counts() {
  sed -n 's/.* \([0-9]*\) samples written, \([0-9]*\) taken, \([0-9]*\) pushed, \([0-9]*\) dropped; .*heavy \([0-9]*\) us, light \([0-9]*\) us$/\1 \2 \3 \4 \5 \6/p' "$1"
}
read -r written taken pushed _ heavy_us light_us < <(lua_counts "$WORK/lua.log") || fail "lua_timer's counts: $(cat "$WORK/lua.log")"
[ "$written" = "$taken" ] && [ "$taken" = "$pushed" ] || fail "lua_timer: $written written, $taken taken, $pushed pushed"
status=0
# Where a timer's sample lands depends on the machine (its clocks, scheduler and load): the
# split is shown beside the threads' CPU clocks', and the checks are those any run passes.
oracle timed "$OUT/lua-timer.pyb" 3 "$written" split.lua heavy light "$(awk -v h="$heavy_us" -v l="$light_us" 'BEGIN { printf "%.4f", h / l }')" \
  > "$WORK/timed.txt" || status=$?
log "CPython: $(sed "s|$ROOT/||" "$WORK/timed.txt")"
[ "$status" = 0 ] || fail "the Lua run sampled by time"

log "Lua 5.4 sampled by work: a count hook every 101 instructions, 3 threads of 20 rounds"
"$WORK/lua_timer" "$WORK/lua-every.pyb" "$SPLIT" 3 1 0 --work 20 --every 101 > "$WORK/every.log" || fail "lua_timer --every"
read -r written taken pushed dropped _ < <(lua_counts "$WORK/every.log") || fail "lua_timer's counts: $(cat "$WORK/every.log")"
[ "$written" = "$taken" ] && [ "$taken" = "$pushed" ] && [ "$dropped" = 0 ] \
  || fail "lua_timer --every: $written written, $taken taken, $pushed pushed, $dropped dropped (its hook waits: none may drop)"
# The bound, from the script alone: heavy runs 9n instructions a call and light 3n (three a
# turn of `x = x + i % 7`; n from 5,000 to 15,000), each plus under 20 for the call. A call
# L instructions long holds L/101 samples give or take one: at least 148 in light, 445 in
# heavy, so the overall split is 3 within 1 % whatever n each round draws; 2 % is asked.
status=0
oracle split "$WORK/lua-every.pyb" 3 "$written" heavy light 3 0.02 > "$WORK/split.txt" || status=$?
log "CPython: $(sed "s|$ROOT/||" "$WORK/split.txt")"
[ "$status" = 0 ] || fail "the Lua workload's split, sampled by work"

"$WORK/lua_timer" "$WORK/exit.pyb" "$SPLIT" 2 1 1000 --exit-without-finalize > /dev/null || fail "lua_timer --exit-without-finalize"
"$TACHYON" verify "$WORK/exit.pyb" > "$WORK/exit.txt" || fail "the writer was not finalized at exit: $(cat "$WORK/exit.txt")"
log "a run that exits without finalizing: finalized at exit ($(cat "$WORK/exit.txt"))"

log "crash: the Lua run killed with SIGKILL after 4 s"
"$WORK/lua_timer" "$WORK/crash.stream" "$SPLIT" 3 60 1000 --progress "$WORK/progress.txt" > /dev/null &
pid=$!
sleep 4
kill -KILL "$pid"
wait "$pid" 2>/dev/null && fail "lua_timer was not killed"
flushed=$(tail -1 "$WORK/progress.txt" | cut -d' ' -f2)
"$TACHYON" receive "$WORK/crash.stream" -o "$OUT/salvaged.pyb" 2> "$WORK/salvage.txt" || fail "tachyon receive of the killed run's stream"
log "$(sed "s|$ROOT/||" "$WORK/salvage.txt")"
status=0
oracle salvaged "$OUT/salvaged.pyb" "$flushed" > "$WORK/salvaged.txt" || status=$?
log "CPython: $(sed "s|$ROOT/||" "$WORK/salvaged.txt")"
[ "$status" = 0 ] || fail "the salvaged file"
log "all passed"
