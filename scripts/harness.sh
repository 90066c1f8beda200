# Sourced by every script the test command runs (never run on its own). Three things:
#
# 1. Time accounting. Each step of scripts/test-all.sh is reported as download / build / run.
#    `timed download|build CMD...` runs CMD and adds its wall time to that kind; `cargo` below
#    does it by itself. When TACHYON_STEP_TIMES names a file (test-all.sh sets it), each
#    timed command appends "KIND MILLISECONDS" to it, and to TACHYON_COMMAND_TIMES, if set,
#    its milliseconds, kind and command line; otherwise nothing is recorded and the commands
#    run as they would.
# 2. The one release build (`release_build`): the command, the C library and the release
#    binaries of qemu-tests that steps run, made by one cargo invocation whose package and
#    target selection never changes, so cargo resolves the same features every time and every
#    later call is a no-op.
# 3. Side by side (`together`, `together_wait`): independent commands in the background, each
#    with its own log, shown in the order they were started; `background`, `background_wait`:
#    one that runs on across steps, waited for by name.
#
# Bash only; safe to source twice.

[ -n "${TACHYON_HARNESS_LOADED:-}" ] && return 0
TACHYON_HARNESS_LOADED=1

_now_ms() { date +%s%3N; }

# timed KIND CMD...: CMD's status is timed's; its wall time is added to KIND.
timed() {
  local kind=$1 started status=0
  shift
  started=$(_now_ms)
  "$@" || status=$?
  local took=$(($(_now_ms) - started)) line="$*"
  [ -n "${TACHYON_STEP_TIMES:-}" ] && printf '%s %s\n' "$kind" "$took" >>"$TACHYON_STEP_TIMES"
  # Every timed command of the run, for the list of the slowest at its end.
  [ -n "${TACHYON_COMMAND_TIMES:-}" ] && printf '%s\t%s\t%s\n' "$took" "$kind" "$(cut -c1-150 <<<"${line#command }")" \
    >>"$TACHYON_COMMAND_TIMES"
  return "$status"
}

# TACHYON_UNIT_TIMES=DIR (opt-in, for finding where a run's build time goes): every cargo
# build of the run is made with `--timings`, and each report (per crate and target kind:
# seconds of compiling, linking, running build scripts) is moved into DIR when the command
# ends; scripts/unit-times.py adds them up over the run.
_HARNESS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# unit_timed CMD...: `timed build CMD... --timings` when unit times are collected.
unit_timed() {
  if [ -z "${TACHYON_UNIT_TIMES:-}" ]; then
    timed build command "$@"
    return
  fi
  local status=0 report args=() arg seen=
  # (`--timings` before a `--`, which passes what follows to the compiler: clippy's lints.)
  for arg in "$@"; do
    [ "$arg" = -- ] && [ -z "$seen" ] && { args+=(--timings); seen=1; }
    args+=("$arg")
  done
  [ -n "$seen" ] || args+=(--timings)
  timed build command "${args[@]}" || status=$?
  mkdir -p "$TACHYON_UNIT_TIMES"
  # (cargo writes each report into its target folder's cargo-timings/, stamped; the folders
  # are target/, one level or two below it, and the fuzz workspace's.)
  while IFS= read -r report; do
    mv "$report" "$TACHYON_UNIT_TIMES/$(date +%s%N)-$(basename "$report")"
  done < <(find -H "$_HARNESS_ROOT/target" "$_HARNESS_ROOT/fuzz/target" -maxdepth 4 -path '*/cargo-timings/cargo-timing-2*.html' 2>/dev/null)
  return "$status"
}

# cargo, split into what it builds and what it runs: `cargo test ARGS` is `cargo test --no-run
# ARGS` (build) and then `cargo test ARGS` (run; cargo only checks that the build is fresh),
# `cargo run ARGS -- PROGRAM ARGS` likewise with `cargo build ARGS`. The compilers' own
# subcommands count as build, fetch and update as download, the rest (fmt, pkgid, …) as run.
cargo() {
  local toolchain=() sub
  [ "${1:-}" != "${1#+}" ] && { toolchain=("$1"); shift; }
  sub=${1:-}
  case "$sub" in
    build | check | clippy | doc | rustc)
      unit_timed cargo "${toolchain[@]}" "$@" ;;
    install | bench)
      timed build command cargo "${toolchain[@]}" "$@" ;;
    fetch | update)
      timed download command cargo "${toolchain[@]}" "$@" ;;
    test | run)
      shift
      local before=() arg
      for arg in "$@"; do
        [ "$arg" = -- ] && break
        before+=("$arg")
      done
      # (`--no-run` is all build; documentation tests are compiled as they run: `cargo test
      # --doc` is all run.)
      if [[ " ${before[*]} " == *" --no-run "* ]]; then
        unit_timed cargo "${toolchain[@]}" "$sub" "$@"
        return
      fi
      if [[ " ${before[*]} " != *" --doc "* ]]; then
        if [ "$sub" = test ]; then
          unit_timed cargo "${toolchain[@]}" test --no-run "${before[@]}" || return
        else
          unit_timed cargo "${toolchain[@]}" build "${before[@]}" || return
        fi
      fi
      timed run command cargo "${toolchain[@]}" "$sub" "$@" ;;
    nextest)
      # cargo nextest run ARGS: `--no-run` first (build), without the flags only a run takes
      # (nextest refuses them beside --no-run), then the run.
      if [ "${2:-}" = run ] && [[ " $* " != *" --no-run "* ]]; then
        local build_args=() skip= arg
        for arg in "$@"; do
          if [ -n "$skip" ]; then skip=; continue; fi
          case "$arg" in
            --no-fail-fast | --fail-fast) continue ;;
            --status-level | --final-status-level | --retries | -j | --test-threads) skip=1; continue ;;
            --status-level=* | --final-status-level=* | --retries=* | --test-threads=*) continue ;;
          esac
          build_args+=("$arg")
        done
        unit_timed cargo "${toolchain[@]}" "${build_args[@]}" --no-run || return
      fi
      timed run command cargo "${toolchain[@]}" "$@" ;;
    fuzz)
      case "${2:-}" in
        build) timed build command cargo "${toolchain[@]}" "$@" ;;
        *) timed run command cargo "${toolchain[@]}" "$@" ;;
      esac ;;
    *)
      timed run command cargo "${toolchain[@]}" "$@" ;;
  esac
}

# The release build every step shares: `tachyon` (the command), the C library (static and
# shared) and qemu-tests' release binaries (fleet_files, side_by_side). With fat LTO, cargo
# compiles a crate that only LTO'd programs and libraries use as bitcode alone, and one that an
# rlib also uses as bitcode and object code: two builds of the same crate. So nothing here is
# an rlib: the command is built as the README's `cargo run --release -p tachyon` builds it, the
# C library as its static and shared library only (its crate types without the rlib the Rust
# tests use), qemu-tests' programs without their library as a target of its own. Measured:
# with the rlibs, the README's command compiled the whole tree again (2 min 41 s cold).
# The shared library is linked with its ABI's name (CAPI_SONAME), as scripts/capi-install.sh
# installs it; the build tree's tests link the static library or the checked profile's.
CAPI_VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml" | head -1)
# The ABI changes with the major version, and with the minor one before 1.0 (Cargo's semver;
# cargo-c names shared libraries the same way): libtachyon_c.so.0.1, later libtachyon_c.so.1.
case $CAPI_VERSION in
  0.*) CAPI_SONAME=libtachyon_c.so.$(cut -d. -f1-2 <<<"$CAPI_VERSION") ;;
  *) CAPI_SONAME=libtachyon_c.so.${CAPI_VERSION%%.*} ;;
esac
release_build() {
  cargo build --release --locked -q -p tachyon --bin tachyon &&
    cargo rustc --release --locked -q -p tachyon-capi --lib --crate-type staticlib --crate-type cdylib \
      -- -C "link-arg=-Wl,-soname,$CAPI_SONAME" &&
    cargo build --release --locked -q -p qemu-tests --features tools --bin fleet_files --bin side_by_side
}

# together LOGDIR NAME CMD...: CMD in the background, its output in LOGDIR/NAME.log.
# together_wait [--failed-only]: waits for every command started since the last wait, then
# prints each one's log in start order (with --failed-only, the last 30 lines of those that
# failed) and returns 1 naming the ones that failed. Commands that wait on one core each
# (qemu-user, valgrind, a Python interpreter, the network) gain from this; compilers, which
# already use both cores, do not.
# background LOGDIR NAME CMD...: as together, but left out of together_wait; waited for by
# name, with background_wait NAME, which prints its log (the end of it when it failed).
declare -A _BACKGROUND_PIDS=() _BACKGROUND_LOGS=()
background() {
  local dir=$1 name=$2
  shift 2
  mkdir -p "$dir"
  timed job "$@" >"$dir/$name.log" 2>&1 &
  _BACKGROUND_PIDS[$name]=$!
  _BACKGROUND_LOGS[$name]=$dir/$name.log
}
background_wait() {
  local name=$1
  if wait "${_BACKGROUND_PIDS[$name]}"; then
    cat "${_BACKGROUND_LOGS[$name]}"
    return 0
  fi
  printf '\n--- %s (in the background) failed; the end of its log (%s):\n' "$name" "${_BACKGROUND_LOGS[$name]}" >&2
  tail -30 "${_BACKGROUND_LOGS[$name]}" >&2
  return 1
}
_TOGETHER_PIDS=() _TOGETHER_LOGS=()
together() {
  local dir=$1 name=$2
  shift 2
  mkdir -p "$dir"
  # Timed as kind "job": its wall time goes to the run's list of commands (which of the jobs
  # side by side is the long pole), not to a step's download or build.
  timed job "$@" >"$dir/$name.log" 2>&1 &
  _TOGETHER_PIDS+=($!)
  _TOGETHER_LOGS+=("$dir/$name.log")
}
together_wait() {
  local i name failed=()
  for i in "${!_TOGETHER_PIDS[@]}"; do
    name=$(basename "${_TOGETHER_LOGS[$i]}" .log)
    if wait "${_TOGETHER_PIDS[$i]}"; then
      [ "${1:-}" = --failed-only ] || cat "${_TOGETHER_LOGS[$i]}"
      continue
    fi
    failed+=("$name")
    if [ "${1:-}" = --failed-only ]; then
      printf '\n--- %s failed; the end of its log (%s):\n' "$name" "${_TOGETHER_LOGS[$i]}" >&2
      tail -30 "${_TOGETHER_LOGS[$i]}" >&2
    else
      cat "${_TOGETHER_LOGS[$i]}"
    fi
  done
  _TOGETHER_PIDS=() _TOGETHER_LOGS=()
  [ ${#failed[@]} -eq 0 ] && return 0
  printf 'failed side by side: %s\n' "${failed[*]}" >&2
  return 1
}
