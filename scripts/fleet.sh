#!/usr/bin/env bash
# Fleet scale (docs/fleet.md): OTLP output read by OpenTelemetry's own Python messages
# (opentelemetry-proto from the package index), `tachyon merge` of thousands of profiles in
# bounded memory. Needs the `tachyon` command built (target/debug/tachyon, or $TACHYON_CLI),
# the wheel scripts/python.sh built into target/wheels/, and go (scripts/viewer-tools.sh).
#
# Cache: ~/.cache/tachyon-fleet (a Python 3.11 environment with the pinned packages; only the
# wheel is installed again each run). Every failure names its step.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${TACHYON_FLEET_CACHE:-$HOME/.cache/tachyon-fleet}
fail() { printf 'fleet failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
step() { printf -- '--> %s\n' "$*"; }
PY311=/usr/bin/python3.11
# opentelemetry-proto 1.45.2 is generated from opentelemetry-proto v1.10.0, the release
# src/otlp implements (its PyPI description says so).
PINNED=(opentelemetry-proto==1.45.2 protobuf==7.36.2)
export TACHYON_CLI=${TACHYON_CLI:-$PWD/target/debug/tachyon}
[ -x "$TACHYON_CLI" ] || fail "tachyon command" "$TACHYON_CLI is not built"
command -v go >/dev/null || fail "go" "go tool pprof is needed (scripts/viewer-tools.sh installs it)"

step "Python 3.11 environment with ${PINNED[*]} (cached)"
if [ "$(cat "$C/venv/pinned" 2>/dev/null)" != "${PINNED[*]}" ]; then
  rm -rf "$C/venv"
  "$PY311" -m venv "$C/venv" || fail "environment" "cannot make a virtual environment"
  "$C/venv/bin/pip" install -q "${PINNED[@]}" || fail "environment" "pip install ${PINNED[*]} failed"
  echo "${PINNED[*]}" > "$C/venv/pinned"
fi
wheel=$(ls target/wheels/tachyon_profiles-*-cp39-abi3-*.whl 2>/dev/null) || fail "wheel" "no wheel in target/wheels/ (scripts/python.sh builds it)"
"$C/venv/bin/pip" install -q --force-reinstall --no-deps "$wheel" || fail "wheel" "pip install $wheel failed"

step "OTLP: every committed and recorded real profile of every format, --to otlp and --to otlp-json, decoded by opentelemetry-proto, equal to its collapsed stacks (python/tests/test_otlp.py)"
"$C/venv/bin/python" python/tests/test_otlp.py || fail "test_otlp.py" "see above"
