#!/usr/bin/env bash
# Every test the project has, with its set-up. Run from anywhere; on a fresh Debian machine
# run it as root so it can install what is missing (apt packages, rustup components and
# targets). Each step prints its name; the first failure stops the run. It ends, passed or
# not, with a table of each step's time split into downloading, building and running
# (docs/testing.md). The contributor's short loop is scripts/quick.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# One block, parsed whole before it runs, so editing this file during a run is harmless.
{

# shellcheck source=scripts/harness.sh
. scripts/harness.sh
START=$(date +%s)
# cargo's build folders of the last run at this path, with the files whose bytes did not
# change set back to their mtimes then (scripts/build-cache.py): what was built from the same
# bytes is not built again, links included. A tree with its own target/ keeps it.
python3 scripts/build-cache.py attach "$PWD"
mkdir -p target
# Every timed command of every step script appends "KIND MILLISECONDS" here (harness.sh).
export TACHYON_STEP_TIMES=$PWD/target/step-times.txt
: >"$TACHYON_STEP_TIMES"
export TACHYON_COMMAND_TIMES=$PWD/target/command-times.tsv
: >"$TACHYON_COMMAND_TIMES"

# Each step's name, with the minutes and seconds since the run began, what target/ holds and
# what is free on its file system: CI's disk is not ours to size, and a run that fills it
# should show where it grew.
gigabytes() { awk '{ printf "%.1f", $1 / 1048576 }'; }
free_kb() { df -Pk . | awk 'NR == 2 { print $4 }'; }
STEP_NAMES=()
STEP_STARTS=()
STEP_DOWNLOAD=()
STEP_BUILD=()
STEP_CPU=()
# The machine's busy and total CPU time so far (all cores, in clock ticks): a step that keeps
# the cores half idle has room for something beside it; one at 100 % has none.
cpu_ticks() { awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8; print busy, busy + $5 + $6 }' /proc/stat 2>/dev/null || echo "0 0"; }
cpu_share() { # cpu_share TICKS-BEFORE TICKS-AFTER: the busy share between the two, in percent
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); all = y[2] - x[2]
    if (all > 0) printf "%d%%", 100 * (y[1] - x[1]) / all; else printf "-" }'
}
RUN_CPU_START=$(cpu_ticks)
STEP_CPU_START=
# Process accounting (root only): the kernel records each process that ends, for the
# core-minutes of compiling and of running printed at the end (scripts/cpu-account.py).
ACCOUNTING=
if [ "$(id -u)" = 0 ]; then
  rm -f target/process-accounting.bin
  if python3 scripts/cpu-account.py on "$PWD/target/process-accounting.bin"; then ACCOUNTING=$PWD/target/process-accounting.bin; fi
fi
STEP_EPOCHS=$PWD/target/step-epochs.tsv
: >"$STEP_EPOCHS"
# The download and build seconds the step that is ending recorded; the file starts again.
close_step() {
  [ ${#STEP_NAMES[@]} -gt ${#STEP_BUILD[@]} ] || return 0
  local sums now
  now=$(cpu_ticks)
  STEP_CPU+=("$(cpu_share "$STEP_CPU_START" "$now")")
  sums=$(awk '$1 == "download" { d += $2 } $1 == "build" { b += $2 } END { printf "%d %d", d / 1000, b / 1000 }' \
    "$TACHYON_STEP_TIMES" 2>/dev/null || echo "0 0")
  STEP_DOWNLOAD+=("${sums% *}")
  STEP_BUILD+=("${sums#* }")
  : >"$TACHYON_STEP_TIMES"
}
step() {
  close_step
  local t=$(($(date +%s) - START)) held free
  held=$({ du -sk target/ 2>/dev/null || echo 0; } | cut -f1 | gigabytes)
  free=$(free_kb | gigabytes)
  printf '\n==> %s   [%dm%02ds; target/ %s GB, %s GB free]\n' "$*" $((t / 60)) $((t % 60)) "$held" "$free"
  STEP_NAMES+=("$*")
  STEP_STARTS+=("$t")
  printf '%s\t%s\n' "$(date +%s)" "$*" >>"$STEP_EPOCHS"
  STEP_CPU_START=$(cpu_ticks)
}
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# At the end, passed or not: each step's time, and of it what went to downloading and to
# building (cargo's compiles, maturin, cargo install) — the rest is running. Where a step
# runs things side by side, download + build can exceed its time; run is then shown as "‖".
# "cpu" is how busy the machine's cores were during the step, all of them together.
PASSED=
time_table() {
  # The run's verdict is its steps': nothing printed here may change the exit status.
  local status=$? end i next total dl build run all_dl=0 all_build=0
  set +e
  close_step
  end=$(($(date +%s) - START))
  # PASSED is set only after the last step: a run killed by a signal also exits through here.
  printf '\nTime per step (%s):\n' "$([ -n "$PASSED" ] && echo "passed" || echo "stopped at the last step listed")"
  printf '  %8s %9s %8s %8s %5s  %s\n' total download build run cpu step
  for i in "${!STEP_NAMES[@]}"; do
    next=${STEP_STARTS[$((i + 1))]:-$end}
    total=$((next - STEP_STARTS[i]))
    dl=${STEP_DOWNLOAD[$i]:-0} build=${STEP_BUILD[$i]:-0}
    all_dl=$((all_dl + dl)) all_build=$((all_build + build))
    run=$((total - dl - build))
    if [ "$run" -ge 0 ]; then run=$(mmss "$run"); else run="‖"; fi
    printf '  %8s %9s %8s %8s %5s  %s\n' "$(mmss "$total")" "$(mmss "$dl")" "$(mmss "$build")" "$run" \
      "${STEP_CPU[$i]:--}" "$(cut -c1-90 <<<"${STEP_NAMES[$i]}")"
  done
  printf '  %8s %9s %8s %8s %5s  in all\n' "$(mmss "$end")" "$(mmss "$all_dl")" "$(mmss "$all_build")" "" \
    "$(cpu_share "$RUN_CPU_START" "$(cpu_ticks)")"
  # Where the time of the next change to this script is likely to be found.
  printf '\nThe slowest timed commands (of %s; all in %s):\n' "$(wc -l <"$TACHYON_COMMAND_TIMES")" "$TACHYON_COMMAND_TIMES"
  # (awk reads to the end: `head` leaving early could kill sort with SIGPIPE, which
  # pipefail made the run's exit status, 141, after every step had passed.)
  sort -t$'\t' -k1,1nr "$TACHYON_COMMAND_TIMES" |
    awk -F'\t' 'NR <= 15 { printf "  %4dm%02ds  %-8s %s\n", $1 / 60000, ($1 / 1000) % 60, $2, $3 }'
  # Where the builds' time went, by crate (only when asked for: TACHYON_UNIT_TIMES=DIR).
  if [ -n "${TACHYON_UNIT_TIMES:-}" ] && [ -d "$TACHYON_UNIT_TIMES" ]; then
    printf '\n'
    python3 scripts/unit-times.py "$TACHYON_UNIT_TIMES" 30 || true
  fi
  # The compiler cache's share of the builds; its server is stopped, so nothing of the run
  # stays behind.
  if [ "${RUSTC_WRAPPER:-}" = sccache ]; then
    printf '\nCompiler cache (%s): ' "$SCCACHE_DIR"
    sccache --show-stats 2>/dev/null | awk '/^Cache hits  /{h=$3} /^Cache misses  /{m=$3} /^Non-cacheable compilations/{n=$3}
      END { printf "%d hits, %d misses, %d not cacheable\n", h, m, n }'
    sccache --stop-server >/dev/null 2>&1 || true
    if [ ${#FUZZ_ENV[@]} -gt 0 ]; then
      printf 'Compiler cache of the fuzz build (%s-fuzz): ' "$SCCACHE_DIR"
      env "${FUZZ_ENV[@]}" sccache --show-stats 2>/dev/null | awk '/^Cache hits  /{h=$3} /^Cache misses  /{m=$3}
        END { printf "%d hits, %d misses\n", h, m }'
      env "${FUZZ_ENV[@]}" sccache --stop-server >/dev/null 2>&1 || true
    fi
  fi
  # Core-minutes, after the compiler caches' servers (whose children are the compilers) ended.
  if [ -n "$ACCOUNTING" ]; then
    python3 scripts/cpu-account.py off
    python3 scripts/cpu-account.py report "$ACCOUNTING" "$STEP_EPOCHS"
  else
    printf '\nCore-minutes: no process accounting (not root, or the kernel refused); the cores were busy %s of the run\n' \
      "$(cpu_share "$RUN_CPU_START" "$(cpu_ticks)")"
  fi
  exit "$status"
}
FUZZ_ENV=() # (the fuzz build's own compiler-cache server, set after the big-endian step)
trap time_table EXIT
# What no later step reads is removed as soon as the step that made it has passed: the builds
# for one target, the tests' scratch files. Without this a run held about 23 GB at its end, and
# CI once stopped at 27 minutes with "No space left on device". A failing step stops the run
# before its pruning, so what it left is there to look at. TACHYON_KEEP_BUILDS=1 keeps it all
# (for running this again on one machine: the builds are then reused).
# (With the build cache attached, target/ is a link into it and cargo's build folders stay
# for the next run; everything else goes.)
prune() {
  [ -n "${TACHYON_KEEP_BUILDS:-}" ] && return 0
  local path
  for path in "$@"; do
    if [ -L target ] && python3 scripts/build-cache.py is-build-folder "$path"; then
      continue
    fi
    rm -rf "$path"
  done
}
# A run builds each crate once, so cargo's incremental caches (about a quarter of the host's
# debug build, measured) are never read again; and line tables are all a test's backtrace
# needs of debug info. Both only for this run: a developer's own builds keep cargo's defaults.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
missing() { printf 'MISSING: %s\n' "$*" >&2; exit 1; }

NO_STD_TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)
BIG_ENDIAN_TARGETS=(s390x-unknown-linux-gnu powerpc-unknown-linux-gnu powerpc64-unknown-linux-gnu)
# The release's static command (scripts/release.sh).
RELEASE_TARGETS=(x86_64-unknown-linux-musl)
MSRV=1.81.0

# Said before the first step, so a run that later stops with "No space left on device" has
# said why first (docs/testing.md's figure: target/ peaks at about 6.5 GB).
if [ "$(free_kb)" -lt $((8 << 20)) ]; then
  printf 'WARNING: %s GB free on the file system of target/; a run needs about 6.5 GB there at its peak\n' \
    "$(free_kb | gigabytes)" >&2
fi

step "set-up: Rust toolchain (components, targets, the MSRV toolchain) and the Debian packages every step uses, in one apt transaction"
command -v cargo >/dev/null || missing "cargo (install Rust with rustup; this script cannot)"
command -v rustup >/dev/null || missing "rustup (needed to add the no_std targets)"
for component in rustfmt clippy; do
  grep -q "^$component" <<<"$(rustup component list --installed)" || timed download rustup component add "$component" \
    || missing "rustup component $component (rustup could not download it)"
done
installed_targets=$(rustup target list --installed)
for target in "${NO_STD_TARGETS[@]}" "${BIG_ENDIAN_TARGETS[@]}" "${RELEASE_TARGETS[@]}"; do
  grep -qx "$target" <<<"$installed_targets" || timed download rustup target add "$target" \
    || missing "rustup target $target (rustup could not download it)"
done
grep -q "^$MSRV" <<<"$(rustup toolchain list)" || timed download rustup toolchain install "$MSRV" --profile minimal \
  || missing "Rust $MSRV toolchain (rustup could not download it)"
# Each step's script installs what it lacks on its own (and says so); asked here all at once,
# apt reads its database and resolves once instead of once a script. Each package is named
# with what shows it is there (a command, or a file), as the scripts test for it; recommended
# packages as the scripts install them: with them for the tools the viewers' checks run,
# without for the rest.
WITH_RECOMMENDS=(cc:gcc g++:g++ /usr/include/stdio.h:libc6-dev qemu-s390x:qemu-user qemu-ppc64:qemu-user
  s390x-linux-gnu-gcc:gcc-s390x-linux-gnu powerpc-linux-gnu-gcc:gcc-powerpc-linux-gnu
  powerpc64-linux-gnu-gcc:gcc-powerpc64-linux-gnu powerpc-linux-gnu-g++:g++-powerpc-linux-gnu
  powerpc64-linux-gnu-g++:g++-powerpc64-linux-gnu i686-linux-gnu-gcc:gcc-i686-linux-gnu autoreconf:autoconf
  automake:automake libtoolize:libtool go:golang-go rsvg-convert:librsvg2-bin python3.11:python3.11
  /usr/lib/python3.11/venv/__init__.py:python3.11-venv npm:npm dot:graphviz
  /usr/include/gperftools/profiler.h:libgoogle-perftools-dev google-pprof:google-perftools
  /usr/lib/debug/.build-id:libc6-dbg /usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring
  objdump:binutils)
WITHOUT_RECOMMENDS=(qemu-system-arm:qemu-system-arm cbindgen:cbindgen clang:clang valgrind:valgrind
  pkg-config:pkg-config lua5.4:lua5.4 /usr/include/lua5.4/lua.h:liblua5.4-dev arm-none-eabi-ld:binutils-arm-none-eabi
  /usr/include/x86_64-linux-gnu/libunwind.h:libunwind-dev tmux:tmux
  /usr/bin/time:time sccache:sccache openssl:openssl pgrep:procps chromium:chromium
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core cmake:cmake musl-gcc:musl-tools)
not_installed() { # not_installed WHAT:PACKAGE...: the packages whose command or file is missing
  local pair what
  for pair in "$@"; do
    what=${pair%%:*}
    if [ "${what#/}" != "$what" ]; then [ -e "$what" ] && continue; else command -v "$what" >/dev/null && continue; fi
    printf '%s\n' "${pair#*:}"
  done | sort -u
}
mapfile -t need_with < <(not_installed "${WITH_RECOMMENDS[@]}")
mapfile -t need_without < <(not_installed "${WITHOUT_RECOMMENDS[@]}")
if [ $((${#need_with[@]} + ${#need_without[@]})) -gt 0 ]; then
  [ "$(id -u)" = 0 ] || missing "${need_with[*]} ${need_without[*]} (not root, cannot apt-get install)"
  echo "apt-get install ${need_with[*]} ${need_without[*]}"
  timed download apt-get update -qq || missing "apt-get update failed"
  [ ${#need_with[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive timed download apt-get install -y -qq "${need_with[@]}" \
    >/dev/null || missing "apt packages: ${need_with[*]}"
  [ ${#need_without[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive timed download apt-get install -y -qq \
    --no-install-recommends "${need_without[@]}" >/dev/null || missing "apt packages: ${need_without[*]}"
fi

# A compiler cache for every compile of the run (Debian's sccache, kept in
# ~/.cache/tachyon-sccache): keyed by the compiler, its arguments, the environment cargo gives
# and the sources, so a run after another compiles only what is new; linking, and crates
# built as programs or C libraries, are not cached. TACHYON_NO_SCCACHE=1 runs without it.
if [ -z "${TACHYON_NO_SCCACHE:-}" ]; then
  export RUSTC_WRAPPER=sccache SCCACHE_DIR=${SCCACHE_DIR:-$HOME/.cache/tachyon-sccache}
  export SCCACHE_CACHE_SIZE=${SCCACHE_CACHE_SIZE:-20G}
  # A server of the run's own, on a port of its own: one already running (a developer's, or
  # one left by a run that was killed) would keep its own cache folder, and starting a second
  # on the same port fails. A server this run left on its port is stopped first.
  export SCCACHE_SERVER_PORT=${SCCACHE_SERVER_PORT:-4227}
  sccache --stop-server >/dev/null 2>&1 || true
  # (A server stopping, its own or a run's just ended, can hold the port a moment: a run
  # started a minute after another failed here once, 2026-12-06.)
  started=
  for _ in 1 2 3 4 5; do
    sccache --start-server >/dev/null 2>&1 && { started=1; break; }
    sleep 2
  done
  [ -n "$started" ] || missing "sccache (its server did not start on port $SCCACHE_SERVER_PORT)"
fi

step "set-up, side by side: the real CPython 3.15.2 oracle (x86_64, s390x) and the Python step's downloads; what conversions are checked with; every workspace's crates; the fleet step's packages; the release build every step shares, started beside them in the background"
# Network-bound and independent of each other: each job's output goes to its log, shown when
# it fails.
LOGS=$PWD/target/setup-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
# (together, together_wait: scripts/harness.sh.)
job() { together "$LOGS" "$@"; }
job oracle-and-python bash -c 'bash scripts/oracle.sh && bash scripts/python.sh --prepare'
job viewer-tools bash scripts/viewer-tools.sh
# The release build every later step shares (scripts/harness.sh's release_build) starts as
# soon as the main workspace's crates are in, in the background, and runs on past the set-up
# to the end of the firmware step, the first to use it (which waits on cargo's lock on
# target/release): from empty caches the downloads take about a minute and the build four,
# whose last minutes compile and link on one core (fat LTO) — the set-up waited for it at
# 71 % (5 min 59 s, 2026-11-28); now the firmware step's, the recordings' and the static
# checks' builds run beside it (none of them builds in target/release).
background "$LOGS" release-build bash -c '. scripts/harness.sh && cargo fetch --locked && release_build'
job crates bash -c '. scripts/harness.sh
  cargo fetch --locked && cargo fetch --locked --manifest-path fuzz/Cargo.toml &&
  cargo fetch --locked --manifest-path python/Cargo.toml && cargo fetch --locked --manifest-path qemu-tests/firmware/Cargo.toml &&
  cargo fetch --locked --manifest-path qemu-tests/firmware/defmt-log/Cargo.toml'
job fleet-packages bash scripts/fleet.sh --prepare
together_wait --failed-only || missing "the set-up jobs above"
# A command in a session of its own at autogroup nice 19 (see the fuzz build, below): it takes
# what the other steps leave idle. (A kernel without autogroups has no such file; nice alone.)
LOWEST_WEIGHT=(setsid -w bash -c 'if [ -w /proc/self/autogroup ]; then echo 19 >/proc/self/autogroup; fi; exec nice -n 19 "$@"' _)
# The API checker, cargo-semver-checks, is built once into ~/.cache/tachyon-tools (about 10
# core-minutes); from empty caches that build starts here, in a session of its own at
# autogroup nice 19 (as the fuzz build, below) and without the compiler cache (whose server
# would compile at normal weight; a tool built once gains nothing from it), so that it takes
# what the steps up to the release step leave idle; that step waits for what is left of it.
background target/semver-build-log semver-build "${LOWEST_WEIGHT[@]}" \
  env -u RUSTC_WRAPPER TACHYON_STEP_TIMES= bash scripts/semver.sh --build
tail -n 3 "$LOGS/oracle-and-python.log"

# The recordings of the real tools: each made by a script from a workload, cached in
# ~/.cache/tachyon-recordings under a key of the files that make it (the recorder, its
# workloads, what it includes), so that a run whose recorders did not change records nothing.
# The tests read them where they lie. Those to be made are made side by side with the steps
# up to the host's tests, which are the first to read them: most of a recording's time is the
# workloads' and samplers' own (fixed durations, one core or less), and those steps compile.
# Each goes into a lane, a script run in the background: recordings in one lane run one after
# another (the chroot's recordings share its mounts).
RECORDINGS=${TACHYON_RECORDINGS_DIR:-$HOME/.cache/tachyon-recordings}
LANES=$PWD/target/recording-lanes
rm -rf "$LANES" && mkdir -p "$LANES"
# recording LANE VAR NAME INPUT... -- CMD ARGS: exports VAR as the folder of NAME's recording,
# to be made in LANE by CMD with "{}" in ARGS replaced by that folder, unless a recording of
# the same inputs and command is there.
recording() {
  local lane=$1 var=$2 name=$3 inputs=() key dir arg cmd=()
  shift 3
  while [ "$1" != -- ]; do inputs+=("$1"); shift; done
  shift
  key=$({ find "${inputs[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; echo "$*"; } | sha256sum | cut -c1-16)
  dir=$RECORDINGS/$name-$key
  for arg in "$@"; do cmd+=("${arg//\{\}/$dir}"); done
  if [ -f "$dir/.recorded" ]; then
    echo "$name: reusing $dir (recorded $(date -r "$dir/.recorded" '+%F %T'))"
  else
    rm -rf "$RECORDINGS/$name"-* && mkdir -p "$dir"
    echo "$name: to be recorded in the background ($lane lane) into $dir"
    { printf 'echo "--> %s"\n' "$name"; printf '%q ' "${cmd[@]}"; printf '|| exit 1\ntouch %q\n' "$dir/.recorded"; } >>"$LANES/$lane.sh"
  fi
  export "$var=$dir"
}
# Starts each lane that has recordings to make; recordings_wait waits for them all.
recordings_start() {
  local lane
  for lane in "$LANES"/*.sh; do
    [ -e "$lane" ] || continue
    together "$LANES" "$(basename "$lane" .sh)" bash "$lane"
  done
}
recordings_wait() {
  together_wait || missing "the recordings above (each lane's log is in $LANES)"
}
O=qemu-tests/oracle
# CPython's answers to qemu-tests/oracle/cpython_batch.py (what its writer makes of a document,
# what its reader makes of a file), kept under a key of the script, the interpreter and the
# input's bytes, for every step and test that asks: a file our code writes differently is a
# new key, and CPython is asked. A run whose writers changed keeps about 1.4 GB of new
# answers, so the folder is cut to the most recently used 3 GB before each run.
export TACHYON_ORACLE_MEMO=${TACHYON_ORACLE_MEMO:-$HOME/.cache/tachyon-oracle-memo}
mkdir -p "$TACHYON_ORACLE_MEMO"
memo_trim() { # memo_trim FOLDER KILOBYTES: removes the least recently used entries beyond KILOBYTES
  [ -n "$(ls -A "$1")" ] || return 0
  du -sk --time --time-style=+%s -- "$1"/* | sort -t$'\t' -k2,2nr |
    awk -F'\t' -v most="$2" '{ kept += $1; if (kept > most) print $3 }' | xargs -r -d '\n' rm -rf --
}
memo_trim "$TACHYON_ORACLE_MEMO" $((3 << 20))

step "set-up: the real tools' recordings (cached), made side by side with the next steps: gperftools CPU profiles by libprofiler (x86_64, i386; s390x, powerpc, powerpc64 under qemu-user, the PowerPC libprofiler built from source) read by google-pprof and go pprof; MOJO files by Austin 3.7.0 and 4.0.0 on Python 3.11 in every mode, with austin-python's texts, JSON and samples; pstats files (Python 3.11 and CPython 3.15.2's profilers); CPython's sampler on 4-second workloads and the long ones the benchmark and the replay test read (about a minute; needs root)"
recording gperftools TACHYON_GPERFTOOLS_PROFILES gperftools "$O/gperftools" -- bash "$O/gperftools/record.sh" "{}"
recording austin TACHYON_MOJO_PROFILES mojo "$O/austin" qemu-tests/vectors/mojo-austin-3.7/scripts -- bash "$O/austin/record.sh" "{}"
recording chroot TACHYON_PSTATS_PROFILES pstats "$O/pstats" "$O/chroot_mounts.sh" -- bash "$O/pstats/record.sh" "{}"
recording chroot TACHYON_REAL_PROFILES real "$O/make_real_profiles.sh" "$O/chroot_mounts.sh" "$O/workloads" -- \
  bash -c '"$0" "$1" 4 >/dev/null' "$O/make_real_profiles.sh" "{}"
recording chroot TACHYON_LONG_PROFILES long "$O/make_real_profiles.sh" "$O/chroot_mounts.sh" "$O/workloads" -- \
  bash -c '"$0" --long "$1" >/dev/null' "$O/make_real_profiles.sh" "{}"
recordings_start

step "firmware: the interpreter profiled on Cortex-M under qemu-system-arm (thumbv7em on mps2-an386, thumbv6m on mps2-an385), its UART stream put back together and counted by top as it grows, CPython 3.15.2 reading both files"
export TACHYON_FIRMWARE="$PWD/target/firmware"
bash scripts/firmware.sh
background_wait release-build || exit 1

step "static checks: format, import cycles, clippy on every target kind, no_std builds, docs, MSRV (scripts/static-checks.sh)"
# (The fuzz workspace's clippy runs beside the fuzz build, below.)
TACHYON_FUZZ_CLIPPY_ELSEWHERE=1 bash scripts/static-checks.sh

# The host's tests build in the checked profile (dev's debug assertions and overflow checks
# at opt-level 1), as scripts/quick.sh's do. From empty caches that took 4 min 48 s to build
# instead of dev's 1 min 32 s, and ran under nextest in 4 min 03 s instead of 8 min 06 s
# (docs/testing.md): about even; with the compiler cache warm the build is cached either way
# and the run's four minutes are saved.
step "tests: core without features (no alloc, no zstd)"
cargo test --profile checked -p tachyon-core

step "set-up: the recordings started above, waited for"
recordings_wait
for f in "$TACHYON_LONG_PROFILES"/*.pyb; do
  # Print what was recorded: the sample counts depend on how fast this machine samples.
  # (The header's u64 sample count at offset 28, little-endian as x86_64 wrote it.)
  printf '%s: %s samples\n' "$(basename "$f")" "$(od -An -t u8 -j 28 -N 8 "$f" | tr -d ' ')"
done

step "tests: everything, all features (unit, vectors, robustness, property, no-alloc, CLI, CPython differential, conversions against CPython's replay and the viewers' tools; the flame graph, differential and heatmap pages against CPython's and in headless Chromium); the core example runs"
# The C API is left out here and built by scripts/capi.sh with its own features: with every
# feature of the workspace, tachyon-core gets defmt, whose symbols (named by JSON) the
# shared library would export, which the linker refuses.
HOST_TESTS=(--workspace --all-features --exclude tachyon-capi)
# cargo-nextest runs the test binaries side by side (cargo test runs one binary at a time,
# and four single tests of 70 to 150 s each kept one core idle for minutes); the machine's
# image has it, a machine without it gets it built once into the cache.
if ! command -v cargo-nextest >/dev/null; then
  [ -x "$HOME/.cache/tachyon-nextest/bin/cargo-nextest" ] ||
    cargo install -q --locked cargo-nextest --root "$HOME/.cache/tachyon-nextest" || missing "cargo-nextest (cargo install failed)"
  export PATH=$HOME/.cache/tachyon-nextest/bin:$PATH
fi
cargo nextest run --cargo-profile checked "${HOST_TESTS[@]}" --no-fail-fast
# nextest leaves out the documentation tests.
cargo test --profile checked --doc "${HOST_TESTS[@]}"
# The examples, built by the same selection (nothing new is compiled): the core example runs
# here rather than in a release build of its own; the fuzz step runs the seed maker.
cargo build --profile checked "${HOST_TESTS[@]}" --example roundtrip --example make_fuzz_seeds
target/checked/examples/roundtrip target/roundtrip.bin
prune target/tmp

step "tests on big-endian targets under qemu-user (s390x, powerpc, powerpc64, built together): clippy, TLS (rustls, ring) built, core's byte-order proofs with every codec, CPython's vectors decoded and written natively, the writers under injected faults"
# What depends on the ISA runs here: core (every codec's reader and writer, in the machine's
# own byte order), CPython's vectors, the writers' fault paths. The conversions above core
# (gperftools, pprof, MOJO, the firmware files: qemu-tests' gperftools_convert,
# gperftools_symbols, pprof_input, mojo_recorded, firmware) are the same code on every host and
# run on the host in the step above. One cargo invocation builds all three targets, so the
# two cores stay busy across them; the same builds serve the exchange matrix and the C API.
# Only what runs here is built: core's library and tests (not its example, which ran on the
# host), and qemu-tests' two test programs (its host tools need the `tools` feature, so the
# tests' build does not link them for every target).
BE_TARGET_ARGS=()
for target in "${BIG_ENDIAN_TARGETS[@]}"; do BE_TARGET_ARGS+=(--target "$target"); done
CORE_FEATURES=alloc,zstd,gperftools,mojo,transport,stream,marshal
cargo clippy -p tachyon-core --features "$CORE_FEATURES" "${BE_TARGET_ARGS[@]}" -- -D warnings
cargo test --no-run --profile checked -p tachyon-core --features "$CORE_FEATURES" --lib --tests "${BE_TARGET_ARGS[@]}"
cargo test --no-run --profile checked -p qemu-tests "${BE_TARGET_ARGS[@]}" --test vectors --test fault_injection
# TLS (`tachyon push` to https://, the std layer's `tls` feature): rustls, its roots and ring,
# whose C and assembly the targets' cross compilers build. Our own TLS code is portable Rust,
# checked on the host; building the std layer itself again with the feature would compile it
# a second time per target.
cargo build --profile checked -p rustls -p rustls-native-certs -p webpki-roots "${BE_TARGET_ARGS[@]}"
# Then each target's tests run side by side with the others' (cargo test runs one binary at
# a time, and one emulated binary seldom keeps both cores busy: 3 min 41 s one target after
# another); each target's log is shown when all three have ended.
be_tests() { # be_tests TARGET
  cargo test --profile checked -p tachyon-core --features "$CORE_FEATURES" --lib --tests --target "$1" &&
    cargo test --profile checked -p qemu-tests --target "$1" --test vectors --test fault_injection
}
for target in "${BIG_ENDIAN_TARGETS[@]}"; do together target/big-endian-logs "$target" be_tests "$target"; done
together_wait
prune target/tmp target/big-endian-logs

# The fuzz workspace's clippy and its targets' sanitized build (the fuzz step's) run from here
# to that step in the background at the lowest priority, so that they take what the steps
# between leave idle: the exchange matrix, the C API and the capture path keep the two cores
# 86-88 % busy, the Python and fleet step 49 % (its tests wait on interpreters and loopback
# servers). Beside the wheel's build at normal priority the build was that step's long pole
# (4 min 58 s from empty caches); started at the set-up, it slowed the static checks and the
# host's tests by 1 min 46 s (cold, 2026-11-27). Its compiles go through a compiler-cache
# server of its own (the compiler runs as the server's child, so a niced cargo alone would not
# lower it; every crate has the sanitizer's flags, so nothing is shared with the other builds),
# which stays up until the run ends. The server runs in a session of its own, and with the
# kernel's autogroups (Debian's default) a session's processes share one scheduling weight
# against the other sessions', whatever their nice values: the session's own weight is
# lowered (a measured busy loop in a session at autogroup nice 19 got 3 % of a core against
# two at 0, and 66 % without; at nice 19 without the autogroup's weight the build slowed the
# static checks from 3 min 00 s to 5 min 21 s). Its builds' times are the job's, not the steps'.
if [ "${RUSTC_WRAPPER:-}" = sccache ]; then
  fuzz_port=$((SCCACHE_SERVER_PORT + 1))
  FUZZ_ENV=(SCCACHE_SERVER_PORT=$fuzz_port SCCACHE_DIR="$SCCACHE_DIR-fuzz" SCCACHE_IDLE_TIMEOUT=0)
  env "${FUZZ_ENV[@]}" sccache --stop-server >/dev/null 2>&1 || true
  env "${FUZZ_ENV[@]}" nice -n 19 sccache --start-server >/dev/null 2>&1 ||
    missing "sccache (the fuzz build's server did not start on port $fuzz_port)"
  for pid in $(pgrep -x sccache); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SCCACHE_SERVER_PORT=$fuzz_port"; then
      # (A kernel without autogroups has no such file; nice alone then does it.)
      if [ -w "/proc/$pid/autogroup" ]; then echo 19 >"/proc/$pid/autogroup"; fi
      echo "the fuzz build's compiler-cache server: pid $pid, $(cat "/proc/$pid/autogroup" 2>/dev/null || echo 'no autogroup')"
    fi
  done
fi
# zstd's C library, as the release build's zstd-sys compiled it (the same bundled 1.5.7
# sources, at -O3, no sanitizer: cargo-fuzz's flags reach Rust only), given to the fuzz
# build through zstd-sys's pkg-config switch: compiled by the fuzz build itself, through its
# own compiler cache, it was the largest unit of a cold run's fuzz build (190 s at the
# lowest weight, 2026-12-01). What differs: no line tables in zstd's own C frames.
# (The newest: a kept build folder may also hold an earlier run's.)
zstd_lib=$(find target/release/build -path '*/zstd-sys-*/out/libzstd.a' -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -1 | cut -d' ' -f2-)
[ -n "$zstd_lib" ] || missing "target/release's libzstd.a (the release build above makes it)"
mkdir -p target/fuzz-zstd
printf 'Name: libzstd\nDescription: zstd as the release build compiled it\nVersion: 1.5.7\nLibs: -L%s -lzstd\nCflags:\n' \
  "$PWD/$(dirname "$zstd_lib")" >target/fuzz-zstd/libzstd.pc
# (scripts/fuzz.sh applies it to the fuzz workspace's build alone, as the clippy below: the
# main workspace's checked build, which the fuzz step's seed maker is, would be rebuilt.)
FUZZ_ENV+=(FUZZ_ZSTD_PC="$PWD/target/fuzz-zstd")
# cargo, the links and build scripts in a session of their own at the same weight; clippy in a
# folder of its own (in the main one it would hold cargo's lock on target/debug, which the C
# API's and the capture path's builds wait for).
background target/fuzz-build-log fuzz-build "${LOWEST_WEIGHT[@]}" \
  env "${FUZZ_ENV[@]}" TACHYON_STEP_TIMES= bash -c \
  'ZSTD_SYS_USE_PKG_CONFIG=1 PKG_CONFIG_PATH=$FUZZ_ZSTD_PC cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --target-dir target/fuzz-clippy -- -D warnings &&
    bash scripts/fuzz.sh --build'

# Straight after the big-endian suite, whose checked-profile builds it runs (and the C API's after it).
step "cross-endian exchange matrix: x86_64, s390x, powerpc, powerpc64 and CPython"
bash scripts/exchange.sh
prune target/exchange

step "C API: header current, C tests (gcc, clang, static, shared, pkg-config) against the Rust writer and CPython's vectors, ASan/UBSan, valgrind, s390x/powerpc/powerpc64 under qemu-user, the no_std library linked into C, the Lua 5.4 profiler read by CPython"
bash scripts/capi.sh
prune target/capi "${BIG_ENDIAN_TARGETS[@]/#/target/}"

# Miri interprets on one core, and the steps after this one leave the other idle a quarter
# of their time (Python and fleet, the release): it runs beside them, waited for before the
# README's job. Alone it was a step of 4 min 23 s at 86 % of one core (a fresh machine,
# 2026-12-06).
background target/miri-log miri bash scripts/miri.sh

step "capture path: loom model of the ring, the push functions' machine code, the C contract, a native SIGPROF workload under a malloc/lock/write tripwire, Lua 5.4 sampled by CPU timers and by work, a SIGKILLed run salvaged; CPython 3.15.2 reads each file"
bash scripts/capture.sh
prune target/loom target/capture/work

step "Python package and fleet, side by side after the wheel's build. Python: the abi3 wheel built with maturin into target/wheels/, pip-installed into Python 3.11 and CPython 3.15.2; CPython's own test_binary_format with our BinaryWriter/BinaryReader; on 3.11 every real profile read and every writer vector written as CPython 3.15.2 does, hostile files, convert() equal to the command; the vectors on 3.13 and 3.14 too. Fleet: OTLP output of every real profile decoded by opentelemetry-proto (the package index's) and equal to its collapsed stacks; tachyon merge of 2,000 profiles in flat memory; the same merge on a local Dask cluster, byte for byte; tachyon push against scripted loopback receivers, HTTP and HTTPS; push --follow through outages and kills; the fleet benchmark once"
# The three test runs below keep about half a core busy each (Python interpreters, a Dask
# cluster, loopback servers, a follower that waits for files to settle), so together they
# take about as long as the longest: the fleet's two halves took 82 s and 90 s alone, 2 min
# 53 s one after the other. Their benchmarks run once as smoke runs and assert no speed. The
# package's convert() is compared with the release command, the one users run.
bash scripts/python.sh --wheel
bash scripts/fleet.sh --install
together target/python-fleet-logs python env TACHYON_CLI="$PWD/target/release/tachyon" bash scripts/python.sh --built
together target/python-fleet-logs fleet-merge bash scripts/fleet.sh --installed merge
together target/python-fleet-logs fleet-push bash scripts/fleet.sh --installed push
together_wait
prune target/wheels target/python-fleet-logs

step "fuzzing: saved crashes replayed, then every reader's cargo fuzz target (and the writer/reader differential) for 5 s each under AddressSanitizer (a smoke run: the long runs are scripts/fuzz.sh --until and the ledger), failing on a crash, a timeout or running out of memory"
# (The targets' build, started after the big-endian step, is waited for; the script's own
# build call then finds it done.)
background_wait fuzz-build || exit 1
prune target/fuzz-clippy
env "${FUZZ_ENV[@]}" FUZZ_SECONDS=5 bash scripts/fuzz.sh
# (The host's checked build: the fuzz step ran its seed maker.)
prune target/fuzz-address target/checked

step "the capture benchmark runs once (one round, a tenth of the work: a smoke run; docs/benchmarks.md's figures come from seven full rounds)"
# (It asserts no speed: it shows that every part of the benchmark runs and prints its table.
# At half the work it took 40 s of every run.)
RUNS=1 NATIVE_WORK=4000 LUA_WORK=600 RING_SECONDS=0.1 bash scripts/capture-bench.sh > target/capture-bench.md \
  || { cat target/capture-bench.md; exit 1; }
prune target/capture-bench

step "release: the published crates' API against 0.1.0's (cargo-semver-checks, scripts/semver.sh); every artifact made (scripts/release.sh: the static musl command, the C tarball, the abi3 wheel, the sdist, the crates verified by cargo package, SHA256SUMS), then each installed afresh runs the README's main job with the cargo-built command's output (scripts/release-check.sh)"
bash scripts/release.sh target/release-artifacts
bash scripts/release-check.sh target/release-artifacts
background_wait semver-build || exit 1
bash scripts/semver.sh
prune target/release-artifacts target/musl target/package target/semver-build-log

step "C API under Miri (started after the C API step, beside the ones since): its Rust tests (every entry point of tachyon.h, as C calls it) and the std layer's prefetch, interpreted for x86_64 and s390x (Stacked Borrows, strict provenance)"
background_wait miri || exit 1
prune target/miri target/miri-log

step "README main job: flame graph and info of the profile in the box; the SVG renders"
cargo run --release -p tachyon -- convert examples/stdlib_work.pyb --to flamegraph -o target/flame.svg
cargo run --release -p tachyon -- info examples/stdlib_work.pyb
rsvg-convert target/flame.svg -o target/flame.png

step "all steps passed"
PASSED=1
exit 0
}
