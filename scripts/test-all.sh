#!/usr/bin/env bash
# Every test the project has, with its set-up. Run from anywhere; on a fresh Debian machine
# run it as root so it can install what is missing (apt packages, rustup components and
# targets). Each step prints its name; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# One block, parsed whole before it runs, so editing this file during a run is harmless.
{

START=$(date +%s)
# Each step's name, with the minutes and seconds since the run began, what target/ holds and
# what is free on its file system: CI's disk is not ours to size, and a run that fills it
# should show where it grew.
gigabytes() { awk '{ printf "%.1f", $1 / 1048576 }'; }
free_kb() { df -Pk . | awk 'NR == 2 { print $4 }'; }
STEP_NAMES=()
STEP_STARTS=()
step() {
  local t=$(($(date +%s) - START)) held free
  held=$({ du -sk target 2>/dev/null || echo 0; } | cut -f1 | gigabytes)
  free=$(free_kb | gigabytes)
  printf '\n==> %s   [%dm%02ds; target/ %s GB, %s GB free]\n' "$*" $((t / 60)) $((t % 60)) "$held" "$free"
  STEP_NAMES+=("$*")
  STEP_STARTS+=("$t")
}
# At the end, passed or not: each step's time, so a run that grew slower shows where.
time_table() {
  local status=$? end i next
  end=$(($(date +%s) - START))
  printf '\nTime per step (%s):\n' "$([ "$status" = 0 ] && echo "passed" || echo "stopped at the last step listed")"
  for i in "${!STEP_NAMES[@]}"; do
    next=${STEP_STARTS[$((i + 1))]:-$end}
    printf '  %4dm%02ds  %s\n' $(((next - STEP_STARTS[i]) / 60)) $(((next - STEP_STARTS[i]) % 60)) \
      "$(cut -c1-100 <<<"${STEP_NAMES[$i]}")"
  done
  printf '  %4dm%02ds  in all\n' $((end / 60)) $((end % 60))
}
trap time_table EXIT
# What no later step reads is removed as soon as the step that made it has passed: the builds
# for one target, the tests' scratch files. Without this a run held about 23 GB at its end, and
# CI once stopped at 27 minutes with "No space left on device". A failing step stops the run
# before its pruning, so what it left is there to look at. TACHYON_KEEP_BUILDS=1 keeps it all
# (for running this again on one machine: the builds are then reused).
prune() {
  [ -n "${TACHYON_KEEP_BUILDS:-}" ] && return 0
  rm -rf "$@"
}
# A run builds each crate once, so cargo's incremental caches (about a quarter of the host's
# debug build, measured) are never read again; and line tables are all a test's backtrace
# needs of debug info. Both only for this run: a developer's own builds keep cargo's defaults.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
missing() { printf 'MISSING: %s\n' "$*" >&2; exit 1; }

NO_STD_TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)
BIG_ENDIAN_TARGETS=(s390x-unknown-linux-gnu powerpc-unknown-linux-gnu powerpc64-unknown-linux-gnu)

# Said before the first step, so a run that later stops with "No space left on device" has
# said why first (docs/testing.md's figure: target/ peaks at about 6.5 GB).
if [ "$(free_kb)" -lt $((8 << 20)) ]; then
  printf 'WARNING: %s GB free on the file system of target/; a run needs about 6.5 GB there at its peak\n' \
    "$(free_kb | gigabytes)" >&2
fi

step "set-up: Rust toolchain"
command -v cargo >/dev/null || missing "cargo (install Rust with rustup; this script cannot)"
command -v rustup >/dev/null || missing "rustup (needed to add the no_std targets)"
for component in rustfmt clippy; do
  grep -q "^$component" <<<"$(rustup component list --installed)" || rustup component add "$component" \
    || missing "rustup component $component (rustup could not download it)"
done
installed_targets=$(rustup target list --installed)
for target in "${NO_STD_TARGETS[@]}" "${BIG_ENDIAN_TARGETS[@]}"; do
  grep -qx "$target" <<<"$installed_targets" || rustup target add "$target" \
    || missing "rustup target $target (rustup could not download it)"
done

step "set-up: C compiler for zstd-sys"
apt_install() {
  [ "$(id -u)" = 0 ] || missing "$* (not root, cannot apt-get install)"
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq || missing "apt-get update failed"; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || missing "apt packages: $*"
}
command -v cc >/dev/null || apt_install gcc libc6-dev

step "set-up: qemu-user and cross gcc for the big-endian targets (linkers, zstd-sys's C code)"
for pair in qemu-user:qemu-s390x qemu-user:qemu-ppc qemu-user:qemu-ppc64 \
  gcc-s390x-linux-gnu:s390x-linux-gnu-gcc gcc-powerpc-linux-gnu:powerpc-linux-gnu-gcc \
  gcc-powerpc64-linux-gnu:powerpc64-linux-gnu-gcc; do
  command -v "${pair#*:}" >/dev/null || apt_install "${pair%%:*}"
done

step "set-up: the real CPython 3.15.2 oracle (x86_64, and s390x under qemu-user)"
bash scripts/oracle.sh >/dev/null

step "set-up: what conversions are checked with (go tool pprof, rsvg-convert, Python 3.11, jsonschema, speedscope's schema)"
bash scripts/viewer-tools.sh

step "set-up: record real gperftools CPU profiles with libprofiler (x86_64, i386; s390x, powerpc, powerpc64 under qemu-user, the PowerPC libprofiler built from source) and read them with google-pprof and go pprof"
export TACHYON_GPERFTOOLS_PROFILES="$PWD/target/gperftools-profiles"
bash qemu-tests/oracle/gperftools/record.sh "$TACHYON_GPERFTOOLS_PROFILES"

step "set-up: record real MOJO files with Austin 3.7.0 and 4.0.0 (PyPI austin-dist; 4.0.0 through the oracle root's loader) on Python 3.11 in every mode, austin-python 1.7.1's mojo2austin text and austin2speedscope JSON of each, and austin-python 2.4.0's samples"
export TACHYON_MOJO_PROFILES="$PWD/target/mojo-profiles"
bash qemu-tests/oracle/austin/record.sh "$TACHYON_MOJO_PROFILES"

step "set-up: record real pstats files (Python 3.11 cProfile, profile, dump_stats, add; CPython 3.15.2 cProfile, profiling.tracing, profiling.sampling run --pstats and replay --pstats)"
export TACHYON_PSTATS_PROFILES="$PWD/target/pstats-profiles"
bash qemu-tests/oracle/pstats/record.sh "$TACHYON_PSTATS_PROFILES"

step "set-up: record real profiles with CPython's sampler (4-second workloads, x86_64, needs root)"
export TACHYON_REAL_PROFILES="$PWD/target/real-profiles"
rm -rf "$TACHYON_REAL_PROFILES"
qemu-tests/oracle/make_real_profiles.sh "$TACHYON_REAL_PROFILES" 4 >/dev/null

step "set-up: record the long real profiles the benchmark and the replay test read (about a minute)"
export TACHYON_LONG_PROFILES="$PWD/target/long-profiles"
rm -rf "$TACHYON_LONG_PROFILES"
qemu-tests/oracle/make_real_profiles.sh --long "$TACHYON_LONG_PROFILES" >/dev/null
for f in "$TACHYON_LONG_PROFILES"/*.pyb; do
  # Print what was recorded: the sample counts depend on how fast this machine samples.
  # (The header's u64 sample count at offset 28, little-endian as x86_64 wrote it.)
  printf '%s: %s samples\n' "$(basename "$f")" "$(od -An -t u8 -j 28 -N 8 "$f" | tr -d ' ')"
done

step "firmware: the interpreter profiled on Cortex-M under qemu-system-arm (thumbv7em on mps2-an386, thumbv6m on mps2-an385), its UART stream put back together, CPython 3.15.2 reading both files"
export TACHYON_FIRMWARE="$PWD/target/firmware"
bash scripts/firmware.sh

step "static checks: format, import cycles, clippy on every target kind, no_std builds, docs, MSRV (scripts/static-checks.sh)"
bash scripts/static-checks.sh

step "tests: core without features (no alloc, no zstd)"
cargo test -p tachyon-core

step "tests: everything, all features (unit, vectors, robustness, property, no-alloc, CLI, CPython differential, conversions against CPython's replay and the viewers' tools)"
# The C API is left out here and built by scripts/capi.sh with its own features: with every
# feature of the workspace, tachyon-core gets defmt, whose symbols (named by JSON) the
# shared library would export, which the linker refuses.
cargo test --workspace --all-features --exclude tachyon-capi
prune target/tmp

step "tests on big-endian targets under qemu-user: core (all features) and the conformance suite"
for target in "${BIG_ENDIAN_TARGETS[@]}"; do
  cargo clippy -p tachyon-core --features alloc,zstd,gperftools,mojo,transport,marshal --target "$target" -- -D warnings
  cargo test --profile qemu -p tachyon-core --features alloc,zstd,gperftools,mojo,transport,marshal --target "$target"
  cargo test --profile qemu -p qemu-tests --target "$target"
  prune target/tmp
done

# Straight after the big-endian suite, whose qemu-profile builds it runs; then those go.
step "cross-endian exchange matrix: x86_64, s390x, powerpc, powerpc64 and CPython"
bash scripts/exchange.sh
prune target/exchange target/qemu "${BIG_ENDIAN_TARGETS[@]/#/target/}"

step "C API: header current, C tests (gcc, clang, static, shared, pkg-config) against the Rust writer and CPython's vectors, ASan/UBSan, valgrind, s390x/powerpc/powerpc64 under qemu-user, the no_std library linked into C, the Lua 5.4 profiler read by CPython"
bash scripts/capi.sh
prune target/capi "${BIG_ENDIAN_TARGETS[@]/#/target/}"

step "capture path: loom model of the ring, the push functions' machine code, the C contract, a native SIGPROF workload under a malloc/lock/write tripwire, Lua 5.4 sampled by CPU timers, a SIGKILLed run salvaged; CPython 3.15.2 reads each file"
bash scripts/capture.sh
prune target/loom target/capture/work

step "Python package: the abi3 wheel built with maturin into target/wheels/, pip-installed into Python 3.11 and CPython 3.15.2; CPython's own test_binary_format with our BinaryWriter/BinaryReader; on 3.11 every real profile read and every writer vector written as CPython 3.15.2 does, hostile files, convert() equal to the command; the vectors on 3.13 and 3.14 too"
bash scripts/python.sh
prune target/python

step "fleet: OTLP output of every real profile decoded by opentelemetry-proto (the package index's) and equal to its collapsed stacks; tachyon merge of 2,000 profiles in flat memory; the same merge on a local Dask cluster, byte for byte; tachyon push against a scripted loopback receiver; the fleet benchmark once"
bash scripts/fleet.sh
prune target/wheels

step "fuzzing: saved crashes replayed, then every reader's cargo fuzz target (and the writer/reader differential) for 15 s each under AddressSanitizer, failing on a crash, a timeout or running out of memory"
bash scripts/fuzz.sh
prune target/fuzz-address

step "benchmark and example build; the example runs; the capture benchmark runs once (one round, half the work: a smoke run; docs/benchmarks.md's figures come from seven full rounds)"
cargo bench -p tachyon-core --features alloc,zstd --no-run
cargo run --release -p tachyon-core --example roundtrip -- target/roundtrip.bin
RUNS=1 NATIVE_WORK=20000 LUA_WORK=3000 bash scripts/capture-bench.sh > target/capture-bench.md \
  || { cat target/capture-bench.md; exit 1; }
prune target/capture-bench

step "README main job: flame graph and info of the profile in the box; the SVG renders"
cargo run --release -p tachyon -- convert examples/stdlib_work.pyb --to flamegraph -o target/flame.svg
cargo run --release -p tachyon -- info examples/stdlib_work.pyb
rsvg-convert target/flame.svg -o target/flame.png

step "all steps passed"
exit 0
}
