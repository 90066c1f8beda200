#!/usr/bin/env bash
# Fleet scale (docs/fleet.md): OTLP output read by OpenTelemetry's own Python messages
# (opentelemetry-proto from the package index), `tachyon merge` of 2,000 profiles in bounded
# memory. Builds the release `tachyon` command (what users run; the README's step reuses it)
# and qemu-tests' fleet_files, and the wheel when target/wheels/ has none (scripts/python.sh
# --wheel); needs go (scripts/viewer-tools.sh) and GNU time (installed here when missing).
#
# Cache: ~/.cache/tachyon-fleet (a Python 3.11 environment with the pinned packages; only the
# wheel is installed again each run). Every failure names its step.
#
#   bash scripts/fleet.sh --prepare    only the environment (the test command makes it beside
#                                      its other downloads)
#   bash scripts/fleet.sh --install    the environment and the wheel installed into it, no test
#   bash scripts/fleet.sh --installed [merge] [push]
#                                      only those parts (both when none is named), the wheel
#                                      as installed: the test command runs the two parts side
#                                      by side, each mostly waiting (a Dask cluster starting,
#                                      files settling, loopback servers): 82 s and 90 s alone,
#                                      2 min 53 s one after the other (2026-11-28)
#   merge: OTLP, merge, Dask; push: push, push --follow, the fleet benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
C=${TACHYON_FLEET_CACHE:-$HOME/.cache/tachyon-fleet}
fail() { printf 'fleet failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
step() { printf -- '--> %s\n' "$*"; }
PY311=/usr/bin/python3.11
# opentelemetry-proto 1.45.2 is generated from opentelemetry-proto v1.10.0, the release
# src/otlp implements (its PyPI description says so); Dask runs the distributed merge.
PINNED=(opentelemetry-proto==1.45.2 protobuf==7.36.2 dask==2026.8.0 distributed==2026.8.0)
# GNU time (peak memory), openssl (the HTTPS push test's throwaway certificate authority).
for pair in /usr/bin/time:time /usr/bin/openssl:openssl; do
  [ -x "${pair%%:*}" ] && continue
  [ "$(id -u)" = 0 ] || fail "${pair#*:}" "${pair%%:*} is missing and this is not root (apt-get install ${pair#*:})"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${pair#*:}" >/dev/null || fail "${pair#*:}" "apt-get install ${pair#*:} failed"
done

step "Python 3.11 environment with ${PINNED[*]} (cached)"
if [ "$(cat "$C/venv/pinned" 2>/dev/null)" != "${PINNED[*]}" ]; then
  rm -rf "$C/venv"
  "$PY311" -m venv "$C/venv" || fail "environment" "cannot make a virtual environment"
  timed download "$C/venv/bin/pip" install -q "${PINNED[@]}" || fail "environment" "pip install ${PINNED[*]} failed"
  echo "${PINNED[*]}" > "$C/venv/pinned"
fi
PREPARE= INSTALL=1 INSTALL_ONLY= PARTS=()
for arg in "$@"; do
  case $arg in
    --prepare) PREPARE=1 ;;
    --install) INSTALL_ONLY=1 ;;
    --installed) INSTALL= ;;
    merge | push) PARTS+=("$arg") ;;
    *) fail "arguments" "$arg: only --prepare, --install, --installed, merge and push are known" ;;
  esac
done
[ -z "$PREPARE" ] || exit 0
[ ${#PARTS[@]} -gt 0 ] || PARTS=(merge push)
part() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }

command -v go >/dev/null || fail "go" "go tool pprof is needed (scripts/viewer-tools.sh installs it)"
step "the release build (tachyon, fleet_files; scripts/harness.sh, shared with every step)"
release_build || fail "build" "the release build"
export TACHYON_CLI=$PWD/target/release/tachyon
if [ -n "$INSTALL" ]; then
  if ! ls target/wheels/tachyon_profiles-*-cp39-abi3-manylinux*.whl >/dev/null 2>&1; then
    bash scripts/python.sh --wheel || fail "wheel" "scripts/python.sh --wheel failed"
  fi
  wheel=$(ls target/wheels/tachyon_profiles-*-cp39-abi3-manylinux*.whl) || fail "wheel" "no wheel in target/wheels/"
  "$C/venv/bin/pip" install -q --force-reinstall --no-deps "$wheel" || fail "wheel" "pip install $wheel failed"
fi
[ -z "$INSTALL_ONLY" ] || exit 0

if part merge; then
  step "OTLP: every committed and recorded real profile of every format, --to otlp and --to otlp-json, decoded by opentelemetry-proto, equal to its collapsed stacks (python/tests/test_otlp.py)"
  "$C/venv/bin/python" python/tests/test_otlp.py || fail "test_otlp.py" "see above"

  step "merge: 2,000 profiles (the committed real wall-clock ones, re-encoded with shifted thread ids and times by fleet_files), summed stacks, order, mixed formats, flat memory, bad files (python/tests/test_merge.py)"
  F=$PWD/target/fleet/files
  rm -rf target/fleet && mkdir -p target/fleet
  R=qemu-tests/fixtures/real-3.15.2
  target/release/fleet_files "$F" 2000 "$R/mixed_wall_blocking_raw.pyb" "$R/recursion_deep_raw.pyb" \
    "$R/threads_wall_zstd.pyb" "$R/opcodes_native_zstd.pyb" || fail "fleet files" "fleet_files failed"
  "$C/venv/bin/python" python/tests/test_merge.py "$F" || fail "test_merge.py" "see above"

  step "Dask: the same merge as a Dask job on a local cluster of worker processes equals tachyon merge byte for byte (python/tests/test_dask.py, python/examples/dask_merge.py)"
  "$C/venv/bin/python" python/tests/test_dask.py "$F" || fail "test_dask.py" "see above"
  "$C/venv/bin/python" python/examples/dask_merge.py target/fleet/dask.pb.gz pprof "$F" || fail "dask example" "python/examples/dask_merge.py failed"
  "$TACHYON_CLI" --quiet merge "$F" --to pprof -o target/fleet/cli.pb.gz || fail "dask example" "tachyon merge failed"
  cmp target/fleet/dask.pb.gz target/fleet/cli.pb.gz || fail "dask example" "the example's output differs from tachyon merge's"
  rm -rf target/fleet
fi

part push || exit 0
step "push: OTLP/HTTP and Pyroscope /ingest against a scripted receiver on the loopback answering 200, 429, 503, 400 … (python/tests/test_push.py)"
"$C/venv/bin/python" python/tests/test_push.py || fail "test_push.py" "see above"

step "push --follow: 200 files arriving (Tachyon written slowly, MOJO in pieces, a journaled writer's rotated periods) while the receiver goes down twice and the follower is SIGKILLed twice; every file received, twice only if logged so; peak RSS for 200 and 2,000 files (python/tests/test_follow.py)"
FLEET_FILES=$PWD/target/release/fleet_files "$C/venv/bin/python" python/tests/test_follow.py || fail "test_follow.py" "see above"

step "the fleet benchmark, once (one run: a smoke run; docs/fleet.md's figures come from three)"
RUNS=1 DEEP_COPIES=20 VARIED_COPIES=1 SMALL_COPIES=300 bash scripts/fleet-bench.sh || fail "fleet benchmark" "see above"
