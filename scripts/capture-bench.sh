#!/usr/bin/env bash
# The capture path's benchmark (issue 27): the ring's own costs (push per sample, drain and
# encode; `side_by_side --only capture`), then whole-run overheads (median of RUNS runs
# each, default 7, interleaved so that a drift in the machine's speed falls on all alike):
#  - the native workload (capi/examples/capture/native_sigprof.c, fixed work, one thread per
#    core) unprofiled; sampled by our capture path at 1 kHz and 10 kHz per thread; with the
#    same timers and signals but an empty handler (what the kernel's signal delivery costs by
#    itself); and under gperftools' libprofiler (LD_PRELOAD, CPUPROFILE_FREQUENCY 1000 and
#    10000) — each profiled run's samples counted, since a rate asked for is not a rate got;
#  - the Lua workload (lua_timer.c on split.lua, fixed work, one thread per core) unprofiled
#    and sampled by per-thread CPU timers at 1 kHz and 10 kHz.
# Prints Markdown; RUNS sets the rounds, NATIVE_WORK and LUA_WORK each thread's work (40000
# and 6000 rounds: about 2 s a run), RING_SECONDS the time each of the ring's own figures is
# the median of (1); the test command's smoke run gives a tenth of each. Needs
# what scripts/capture.sh needs, plus libprofiler (Debian's libgoogle-perftools-dev),
# installed here if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
ROOT=$PWD
WORK="$ROOT/target/capture-bench"
RUNS=${RUNS:-7}
fail() { printf 'CAPTURE BENCH FAILED: %s\n' "$*" >&2; exit 1; }
need=()
[ -f /usr/lib/x86_64-linux-gnu/libprofiler.so ] || need+=(libgoogle-perftools-dev)
[ -f /usr/include/lua5.4/lua.h ] || need+=(liblua5.4-dev)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${need[*]} and this is not root"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || fail "apt-get install ${need[*]}"
fi
PROFILER=/usr/lib/x86_64-linux-gnu/libprofiler.so
rm -rf "$WORK" && mkdir -p "$WORK"
release_build || fail "building"
target/release/side_by_side --only capture --seconds "${RING_SECONDS:-1}" || fail "side_by_side --only capture"

LIB="$ROOT/target/release/libtachyon_c.a"
gcc -std=c11 -O2 -g -I capi/include capi/examples/capture/native_sigprof.c "$LIB" -lpthread -ldl -lm \
  -o "$WORK/native_sigprof" || fail "compiling native_sigprof.c"
# shellcheck disable=SC2046
gcc -std=c11 -O2 -g -I capi/include $(pkg-config --cflags lua5.4) capi/examples/capture/lua_timer.c "$LIB" \
  $(pkg-config --libs lua5.4) -lpthread -ldl -lm -o "$WORK/lua_timer" || fail "compiling lua_timer.c"
CORES=$(nproc)
NATIVE_WORK=${NATIVE_WORK:-40000}
LUA_WORK=${LUA_WORK:-6000}
SPLIT="$ROOT/capi/examples/capture/split.lua"
native() { echo "$WORK/native_sigprof $WORK/native.pyb 1 $1 1024 --work $NATIVE_WORK --threads $CORES ${2:-}"; }
lua() { echo "$WORK/lua_timer $WORK/lua.pyb $SPLIT $CORES 1 $1 --work $LUA_WORK"; }

# One profiled run of each, for the samples it took.
samples_of() { sed -n 's/.*: \([0-9]*\) samples written.*/\1/p; s/.*threads, \([0-9]*\) samples written.*/\1/p' | head -1; }
profiler_samples() {
  CPUPROFILE="$WORK/lp.prof" CPUPROFILE_FREQUENCY=$1 LD_PRELOAD=$PROFILER $(native 0) 2>&1 >/dev/null \
    | sed -n 's|PROFILE: interrupts/evictions/bytes = \([0-9]*\)/.*|\1|p'
}
declare -A SAMPLES
# The rate libprofiler gets (per thread), to compare at equal rates too.
t0=$(date +%s.%N); $(native 0) >/dev/null; t1=$(date +%s.%N)
SAMPLES[profiler-1000]=$(profiler_samples 1000)
MATCH_HZ=$(python3 -c "print(max(1, round(${SAMPLES[profiler-1000]} / (($t1 - $t0) * $CORES))))")
SAMPLES[native-$MATCH_HZ]=$($(native "$MATCH_HZ") | samples_of)
for hz in 1000 10000; do
  SAMPLES[native-$hz]=$($(native $hz) | samples_of)
  SAMPLES[profiler-$hz]=$(profiler_samples $hz)
  SAMPLES[lua-$hz]=$($(lua $hz) | samples_of)
done

# Runs interleaved (each round runs every command once, in turn), so that a drift in the
# machine's speed during the benchmark falls on every command alike; one warm-up round.
interleaved() {
  local name=$1
  shift
  python3 - "$WORK/$name.json" "$RUNS" "$@" <<'PY' || fail "timing ($name)"
import json, os, subprocess, sys, time
out, runs, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
commands = list(zip(pairs[0::2], pairs[1::2]))
times = {name: [] for name, _ in commands}
for round in range(runs + 1):
    for name, command in commands:
        start = time.perf_counter()
        subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if round > 0:
            times[name].append(time.perf_counter() - start)
json.dump({"results": [{"command": name, "times": times[name]} for name, _ in commands]}, open(out, "w"))
PY
}
interleaved native \
  unprofiled "$(native 0)" \
  "tachyon $MATCH_HZ Hz (libprofiler's rate)" "$(native "$MATCH_HZ")" \
  "tachyon 1 kHz" "$(native 1000)" \
  "signals alone 1 kHz" "$(native 1000 --empty-handler)" \
  "tachyon 10 kHz" "$(native 10000)" \
  "signals alone 10 kHz" "$(native 10000 --empty-handler)" \
  "libprofiler 1 kHz" "env CPUPROFILE=$WORK/lp1.prof CPUPROFILE_FREQUENCY=1000 LD_PRELOAD=$PROFILER $(native 0)" \
  "libprofiler 10 kHz" "env CPUPROFILE=$WORK/lp2.prof CPUPROFILE_FREQUENCY=10000 LD_PRELOAD=$PROFILER $(native 0)"
interleaved lua unprofiled "$(lua 0)" "tachyon 1 kHz" "$(lua 1000)" "tachyon 10 kHz" "$(lua 10000)"

python3 - "$WORK" "$CORES" "$MATCH_HZ" "${SAMPLES[native-$MATCH_HZ]}" \
  "${SAMPLES[native-1000]}" "${SAMPLES[native-10000]}" "${SAMPLES[profiler-1000]}" "${SAMPLES[profiler-10000]}" \
  "${SAMPLES[lua-1000]}" "${SAMPLES[lua-10000]}" <<'PY'
import json, statistics, sys
work, cores, match_hz, nm = sys.argv[1:5]
n1, n10, p1, p10, l1, l10 = sys.argv[5:11]
samples = {f"tachyon {match_hz} Hz (libprofiler's rate)": nm, "tachyon 1 kHz": n1, "signals alone 1 kHz": n1,
           "tachyon 10 kHz": n10, "signals alone 10 kHz": n10,
           "libprofiler 1 kHz": p1, "libprofiler 10 kHz": p10}
lua_samples = {"tachyon 1 kHz": l1, "tachyon 10 kHz": l10}
def table(name, what, counts):
    results = json.load(open(f"{work}/{name}.json"))["results"]
    base = statistics.median(results[0]["times"])
    print(f"{what} ({cores} threads, fixed work; median of {len(results[0]['times'])} runs):\n")
    print("| run | wall time | overhead | samples taken |")
    print("|---|---:|---:|---:|")
    for r in results:
        t = statistics.median(r["times"])
        over = "—" if r is results[0] else f"{(t / base - 1) * 100:+.1f} %"
        print(f"| {r['command']} | {t:.3f} s | {over} | {counts.get(r['command'], '—')} |")
    print()
table("native", "Native workload, per-thread SIGPROF timers (CLOCK_MONOTONIC) pushing shadow stacks", samples)
table("lua", "Lua 5.4 workload, per-thread CPU-time timers arming lua_sethook", lua_samples)
PY
