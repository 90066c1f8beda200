#!/usr/bin/env bash
# Coverage-guided fuzzing of every reader (issue 15): libFuzzer targets (fuzz/, libfuzzer-sys)
# with AddressSanitizer and debug assertions, on the machine's stable toolchain. The targets
# are built as cargo-fuzz 0.13 builds them — the same cargo arguments and rustc flags
# (`fuzz_build` below), read from what `cargo fuzz build` runs — and run as `cargo fuzz run`
# runs them, so nothing else is installed (cargo-fuzz itself took 2 min 22 s – 2 min 40 s to
# build from empty caches). Its -Z flags are taken by stable rustc with RUSTC_BOOTSTRAP=1, and
# the rust-std component ships the sanitizer runtimes.
#
#   bash scripts/fuzz.sh                 every target for FUZZ_SECONDS (default 15) each
#   bash scripts/fuzz.sh --campaign N    every target for N seconds each, corpora kept in
#                                        ~/.cache/tachyon-fuzz/corpus, a table of executions
#                                        and coverage at the end (docs/hostile-input.md's figures)
#   bash scripts/fuzz.sh --until N       every target until the ledger counts N executions
#                                        of it, in runs of FUZZ_CHUNK seconds (default 600):
#                                        stop it any time, run it again to go on
#   bash scripts/fuzz.sh --ledger        the ledger summed per target
#   bash scripts/fuzz.sh --prepare       only install gcc and g++ where they are missing
#   bash scripts/fuzz.sh --build         only build the targets (the test command does it
#                                        beside the Python and fleet steps)
#   FUZZ_TARGETS="mojo pstats" ...       only those targets
#   FUZZ_SANITIZER=none ...              without AddressSanitizer (default: address)
#
# Campaign runs (--campaign, --until) append one line per run to the ledger, fuzz/ledger.tsv
# (FUZZ_LEDGER to use another): date, target, sanitizer, seconds, executions, coverage,
# features, corpus size, commit fuzzed. The ledger is committed, so that a campaign's record
# outlives the machine it ran on; the corpora stay in ~/.cache/tachyon-fuzz/corpus (a new
# machine starts again from the seeds, and executions still add up, as a fuzzing service
# counts them).
#
# Fails on any crash, timeout (-timeout: an input taking over FUZZ_TIMEOUT seconds breaks
# the linear-time promise) or out-of-memory (-rss_limit_mb / -malloc_limit_mb, 256 MB); the input is
# copied to fuzz/regressions/<target>/ so that fuzz/tests/replay.rs keeps it as a test.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
ROOT=$PWD
fail() { printf 'FUZZ FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf '  fuzz: %s\n' "$*"; }

SECONDS_EACH=${FUZZ_SECONDS:-15}
CAMPAIGN=
GOAL=
CACHE=$HOME/.cache/tachyon-fuzz
LEDGER=${FUZZ_LEDGER:-$ROOT/fuzz/ledger.tsv}
ledger_total() { # ledger_total TARGET: executions the ledger counts for it
  [ -f "$LEDGER" ] || { echo 0; return; }
  awk -F'\t' -v t="$1" '$2 == t { n += $5 } END { printf "%d\n", n }' "$LEDGER"
}
PREPARE= BUILD_ONLY=
case "${1:-}" in
  --prepare)
    PREPARE=1
    ;;
  --build)
    BUILD_ONLY=1
    ;;
  --campaign)
    CAMPAIGN=1
    SECONDS_EACH=${2:?--campaign takes the seconds per target}
    ;;
  --until)
    CAMPAIGN=1
    GOAL=${2:?--until takes the executions per target}
    SECONDS_EACH=${FUZZ_CHUNK:-600}
    ;;
  --ledger)
    [ -f "$LEDGER" ] || fail "no ledger yet ($LEDGER)"
    awk -F'\t' 'function add(list, x) { return index(list, x " ") ? list : list x " " }
      NR > 1 { n[$2] += $5; s[$2] += $4; runs[$2]++; san[$2] = add(san[$2], $3); commits[$2] = add(commits[$2], $9)
        cov[$2] = $6; ft[$2] = $7; corpus[$2] = $8 }
      END { printf "target\truns\tseconds\texecutions\tlast coverage\tfeatures\tcorpus\tsanitizers\tcommits\n";
        for (t in n) printf "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", t, runs[t], s[t], n[t], cov[t], ft[t], corpus[t], san[t], commits[t] }' \
      "$LEDGER" | column -t -s $'\t'
    exit 0
    ;;
esac
TIMEOUT=${FUZZ_TIMEOUT:-10}
# -rss_limit_mb bounds the whole process (AddressSanitizer's quarantine counts in it);
# -malloc_limit_mb any one allocation: 256 MB, more than any seed's reading needs, so storage
# sized from a count an input merely states is reported (issue 30 was found this way).
RSS_MB=${FUZZ_RSS_MB:-2048}
MALLOC_MB=${FUZZ_MALLOC_MB:-256}
SANITIZER=${FUZZ_SANITIZER:-address}
ALL_TARGETS=(tachyon_metadata tachyon_replay gperftools mojo pstats marshal pprof json_encode detect
  elf_symbols transport_receiver roundtrip)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"

# --- set-up -------------------------------------------------------------------------------
command -v gcc >/dev/null && command -v g++ >/dev/null || {
  [ "$(id -u)" = 0 ] || fail "gcc and g++ are missing (libFuzzer is C++) and this is not root"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc g++ >/dev/null || fail "apt-get install gcc g++"
}
[ -z "$PREPARE" ] || exit 0
# Logs, seeds and results go under target/ (a fresh clone has none yet).
mkdir -p "$ROOT/target"

# What `cargo fuzz build` (0.13) runs: a release build with line tables, for the host triple
# (rustflags then stay off build scripts), with libFuzzer's coverage instrumentation, the
# sanitizer, debug assertions and `--cfg fuzzing`; one codegen unit (with more, the coverage
# pass keeps functions from being inlined across units, and the build was no faster: 190 s
# with 16 against 165 s with one, from empty caches, 2026-11-27).
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# Each sanitizer builds into its own folder: a campaign without one and the test command's
# bounded run with one do not rebuild each other's targets.
BIN=$ROOT/target/fuzz-$SANITIZER/$TRIPLE/release
fuzz_build() {
  local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
  flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
  flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
  flags+=" -Cllvm-args=-simplifycfg-branch-fold-threshold=0"
  [ "$SANITIZER" = none ] || flags+=" -Zsanitizer=$SANITIZER"
  flags+=" -Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions -Ccodegen-units=1"
  # (Exported by this script's caller, as cargo-fuzz lets them: they come last and win.)
  flags+=" ${RUSTFLAGS:-}"
  # RUSTC_BOOTSTRAP for this build alone: cargo rebuilds whatever it built without it, and
  # the seed maker below (the host tests' checked build) took 54 s, not a fraction of one,
  # when it was exported for the whole script.
  # FUZZ_ZSTD_PC=DIR: zstd linked from DIR/libzstd.pc (zstd-sys's pkg-config switch) instead
  # of compiled from its C sources; the test command points it at the release build's
  # library. For this build alone, as RUSTC_BOOTSTRAP is.
  if [ -n "${FUZZ_ZSTD_PC:-}" ]; then local -x ZSTD_SYS_USE_PKG_CONFIG=1 PKG_CONFIG_PATH=$FUZZ_ZSTD_PC; fi
  RUSTC_BOOTSTRAP=1 RUSTFLAGS=$flags cargo build --manifest-path "$ROOT/fuzz/Cargo.toml" --target "$TRIPLE" --release \
    --config 'profile.release.debug="line-tables-only"' --bins --target-dir "$ROOT/target/fuzz-$SANITIZER"
}
# fuzz_exec TARGET LIBFUZZER-ARGS...: as `cargo fuzz run` runs a built target (its default
# sanitizer options, ours first so that the caller's win).
fuzz_exec() {
  local t=$1
  shift
  ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$BIN/$t" "$@"
}

log "building the targets (release, sanitizer: $SANITIZER, debug assertions)"
fuzz_build >/dev/null 2>"$ROOT/target/fuzz-build.log" \
  || { tail -30 "$ROOT/target/fuzz-build.log" >&2; fail "building the fuzz targets"; }
[ -z "$BUILD_ONLY" ] || exit 0

# --- seed corpora: every committed fixture and vector of each format ------------------------
SEEDS=$ROOT/target/fuzz-seeds
rm -rf "$SEEDS"
mkdir -p "$SEEDS"
seed() { # seed TARGET FILE...
  local t=$1
  shift
  mkdir -p "$SEEDS/$t"
  # Named after their folder too: fixtures of different folders share names.
  for f in "$@"; do cp "$f" "$SEEDS/$t/$(basename "$(dirname "$f")")_$(basename "$f")"; done
}
V=$ROOT/qemu-tests/vectors
mapfile -t tachyon_files < <(find "$V/cpython-3.15.2" "$ROOT/qemu-tests/fixtures" "$ROOT/examples" -name '*.bin' -o -name '*.pyb')
seed tachyon_metadata "${tachyon_files[@]}"
seed tachyon_replay "${tachyon_files[@]}"
mapfile -t prof < <(find "$V/gperftools-2.10" -name '*.prof')
seed gperftools "${prof[@]}"
mapfile -t mojo < <(find "$V" -name '*.mojo')
seed mojo "${mojo[@]}"
mapfile -t pst < <(find "$V/pstats" -name '*.pstats')
seed pstats "${pst[@]}"
seed marshal "${pst[@]}"
mapfile -t json < <(find "$V/cpython-3.15.2" -name '*.input.json')
seed json_encode "${json[@]}"
seed detect "${tachyon_files[@]:0:4}" "${prof[@]:0:4}" "${mojo[@]:0:4}" "${pst[@]:0:4}"
seed roundtrip
# pprof profiles and transport captures made by our writers from the vectors: an example of
# qemu-tests, built as the host's tests are (the test command has built it; alone, this
# builds that tree once).
cargo build -q --profile checked --workspace --all-features --exclude tachyon-capi --example make_fuzz_seeds \
  || fail "building qemu-tests/examples/make_fuzz_seeds.rs"
"$ROOT/target/checked/examples/make_fuzz_seeds" "$ROOT" "$SEEDS" || fail "making the pprof and transport seeds"
cp "$SEEDS"/pprof/* "$SEEDS/detect/"
# ELF images of a small program of ours: with DWARF, stripped, a shared object.
mkdir -p "$SEEDS/elf_symbols"
src=$ROOT/fuzz/seeds/elf_symbols/tiny.c
gcc -g -O1 -o "$SEEDS/elf_symbols/tiny-g" "$src" || fail "gcc tiny.c"
gcc -O1 -s -o "$SEEDS/elf_symbols/tiny-s" "$src" || fail "gcc -s tiny.c"
gcc -g -O2 -shared -fPIC -o "$SEEDS/elf_symbols/tiny.so" "$src" || fail "gcc -shared tiny.c"

# Every saved crash (fuzz/regressions/TARGET/*) and every seed, whole, once through its
# sanitized target before any fuzzing: a crash found once fails here until the reader is
# fixed, and stays here afterwards. Given files rather than folders, libFuzzer runs each one
# once and as it is (no length cap); under the fuzz runs' limits, so an input saved for
# allocating out of proportion stays a failure. (fuzz/tests/replay.rs does the same without
# a sanitizer for scripts/quick.sh.)
replay() { # replay TARGET FILE...
  local t=$1
  shift
  [ $# -gt 0 ] || return 0
  mkdir -p "$ROOT/target/fuzz-replay"
  fuzz_exec "$t" -artifact_prefix="$ROOT/target/fuzz-replay/$t-" \
    -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB" "$@" >"$ROOT/target/fuzz-replay/$t.log" 2>&1 || {
    grep -E "^Running:|ERROR|panicked|SUMMARY|timeout|out-of-memory" "$ROOT/target/fuzz-replay/$t.log" | tail -12 >&2
    fail "$t: a saved crash or a seed fails (log: target/fuzz-replay/$t.log)"
  }
  log "$t: $(grep -c '^Executed ' "$ROOT/target/fuzz-replay/$t.log") files replayed"
}
saved=0
for dir in "$ROOT"/fuzz/regressions/*/; do
  mapfile -t files < <(find "$dir" -type f)
  replay "$(basename "$dir")" "${files[@]}"
  saved=$((saved + ${#files[@]}))
done
log "$saved saved crashes replayed"
mapfile -t json_all < <(find "$V/cpython-3.15.2" -name '*.json')
for t in "${TARGETS[@]}"; do
  case $t in
    json_encode) replay "$t" "${json_all[@]}" ;;
    detect) mapfile -t every < <(find "$SEEDS" -type f); replay "$t" "${every[@]}" "${json_all[@]}" ;;
    *) mapfile -t files < <(find "$SEEDS/$t" -type f 2>/dev/null); replay "$t" "${files[@]}" ;;
  esac
done

dict_of() {
  case $1 in
    tachyon_*) echo tachyon ;;
    pstats | marshal) echo marshal ;;
    roundtrip) echo "" ;;
    *) echo "$1" ;;
  esac
}

# --- runs ---------------------------------------------------------------------------------
if [ -n "$CAMPAIGN" ]; then CORPORA=$CACHE/corpus; else CORPORA=$ROOT/target/fuzz-corpus; fi
RESULTS=$ROOT/target/fuzz-results.tsv
printf 'target\tseconds\texecutions\texec/s\tcoverage\tfeatures\tcorpus\n' >"$RESULTS"
[ -n "$CAMPAIGN" ] && [ ! -f "$LEDGER" ] &&
  printf 'date\ttarget\tsanitizer\tseconds\texecutions\tcoverage\tfeatures\tcorpus\tcommit\n' >"$LEDGER"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD -- . ':!fuzz/ledger.tsv' 2>/dev/null || COMMIT="$COMMIT+changes"

run_target() { # run_target TARGET SECONDS [EXECUTIONS]: one libFuzzer run, its line in the results
  local t=$1 seconds=$2 most=${3:-0}
  mkdir -p "$CORPORA/$t"
  local d
  d=$(dict_of "$t")
  local args=(-max_total_time="$seconds" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB"
    -print_final_stats=1 -artifact_prefix="$ROOT/target/fuzz-artifacts/$t/")
  [ "$most" -gt 0 ] && args+=(-runs="$most")
  [ -n "$d" ] && args+=(-dict="$ROOT/fuzz/dict/$d.dict")
  # Large seeds set the length limit; mutated inputs up to 64 KiB otherwise.
  args+=(-max_len=65536)
  mkdir -p "$ROOT/target/fuzz-artifacts/$t"
  local log_file=$ROOT/target/fuzz-$t.log
  local started
  started=$(date +%s)
  # A fixed mmap threshold: by default glibc raises it after the first large free, and from
  # then on every 1 MiB read window comes from the heap and is cleared by memset (measured on
  # the mojo target: a quarter of its time in memset and page faults; 1,142 -> 1,600
  # executions a second with the threshold fixed). The readers are the same either way.
  if ! GLIBC_TUNABLES=glibc.malloc.mmap_threshold=262144 \
    fuzz_exec "$t" "${args[@]}" "$CORPORA/$t" "$SEEDS/$t" >"$log_file" 2>&1; then
    local crash
    crash=$(find "$ROOT/target/fuzz-artifacts/$t" -type f | head -1)
    grep -E "ERROR|panicked|SUMMARY|timeout|out-of-memory" "$log_file" | head -10 >&2 || true
    if [ -n "$crash" ]; then
      mkdir -p "$ROOT/fuzz/regressions/$t"
      cp "$crash" "$ROOT/fuzz/regressions/$t/"
      fail "$t: $(basename "$crash") (copied to fuzz/regressions/$t/; log: $log_file)"
    fi
    fail "$t: the fuzz run failed without an artifact (log: $log_file)"
  fi
  local took runs last cov ft corpus
  took=$(($(date +%s) - started))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log_file" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log_file" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo 0)
  corpus=$(find "$CORPORA/$t" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$took" "$runs" $((runs / (took > 0 ? took : 1))) "$cov" "$ft" "$corpus" >>"$RESULTS"
  [ -n "$CAMPAIGN" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$SANITIZER" "$took" \
    "$runs" "$cov" "$ft" "$corpus" "$COMMIT" >>"$LEDGER"
  log "$t: $runs executions in ${took}s, coverage $cov, features $ft, corpus $corpus"
}

# A bounded run (the test command's smoke run) runs two targets at a time, one per core: each
# libFuzzer process is single-threaded (12 targets one after another took 78 s of 5-s runs).
# A campaign (--until) keeps one at a time, so each target's executions per second stay
# comparable across the ledger's rows.
if [ -z "$GOAL" ] && [ -z "$CAMPAIGN" ]; then
  LOGS=$ROOT/target/fuzz-run-logs
  rm -rf "$LOGS"
  for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
    for t in "${TARGETS[@]:i:2}"; do together "$LOGS" "$t" run_target "$t" "$SECONDS_EACH"; done
    together_wait || fail "the fuzz target above"
  done
else
  for t in "${TARGETS[@]}"; do
    if [ -n "$GOAL" ]; then
      while done_so_far=$(ledger_total "$t") && [ "$done_so_far" -lt "$GOAL" ]; do
        log "$t: $done_so_far of $GOAL executions so far"
        run_target "$t" "$SECONDS_EACH" $((GOAL - done_so_far))
        [ "$(ledger_total "$t")" -gt "$done_so_far" ] || fail "$t: a run counted no executions (log: $ROOT/target/fuzz-$t.log)"
      done
    else
      run_target "$t" "$SECONDS_EACH"
    fi
  done
fi
column -t -s $'\t' "$RESULTS"
[ -z "$CAMPAIGN" ] || bash "$ROOT/scripts/fuzz.sh" --ledger
