#!/usr/bin/env bash
# The Python package (python/): built with maturin from the package index into
# target/wheels/, installed with pip into Debian's Python 3.11 (a virtual environment) and
# into the oracle's CPython 3.15.2 (pip --target: the oracle has no pip of its own); then
# CPython's own test_binary_format runs on 3.15.2 with our BinaryWriter and BinaryReader in
# place of _remote_debugging's, and python/tests/test_package.py on 3.11 compares the package
# with CPython 3.15.2 and with the `tachyon` command; the benchmark runs once. Needs
# scripts/oracle.sh first; the `tachyon` command it compares with is $TACHYON_CLI, else the
# release build's (target/release/tachyon, built here as scripts/harness.sh's release_build
# builds it: after the test command, nothing is compiled).
#
# Cache: ~/.cache/tachyon-python (maturin's and 3.11's environments, the test suite package,
# the 3.15 install). Every failure names its step.
#
#   bash scripts/python.sh --prepare    only what is downloaded (maturin, the test suite,
#                                       CPython 3.13 and 3.14): the test command does this
#                                       beside its other downloads
#   bash scripts/python.sh --wheel      only build the wheel into target/wheels/
#   bash scripts/python.sh --built      everything after the build, with the wheel already
#                                       in target/wheels/ (the test command builds it first,
#                                       then runs this beside scripts/fleet.sh, which installs
#                                       the same wheel)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
PREPARE= BUILD=1 TEST=1
case "${1:-}" in
  --prepare) PREPARE=1 ;;
  --wheel) TEST= ;;
  --built) BUILD= ;;
  "") ;;
  *) printf 'usage: bash scripts/python.sh [--prepare | --wheel | --built]\n' >&2; exit 2 ;;
esac
C=${TACHYON_PYTHON_CACHE:-$HOME/.cache/tachyon-python}
A=${TACHYON_ORACLE_DIR:-$HOME/.cache/tachyon-oracle}
fail() { printf 'python package failed at step "%s": %s\n' "$1" "$2" >&2; exit 1; }
step() { printf -- '--> %s\n' "$*"; }
export MATURIN_VERSION=1.16.0
PY311=/usr/bin/python3.11
mkdir -p "$C"

step "Debian's Python 3.11 with venv and pip"
if ! "$PY311" -m venv --help >/dev/null 2>&1 || ! "$PY311" -m ensurepip --version >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || fail "python3.11" "python3.11 with venv is missing and this is not root (apt-get install python3.11-venv)"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv python3-pip >/dev/null \
    || fail "python3.11" "apt-get install python3.11 python3.11-venv failed"
fi

step "maturin $MATURIN_VERSION from the package index (cached environment)"
if [ "$("$C/maturin/bin/maturin" --version 2>/dev/null)" != "maturin $MATURIN_VERSION" ]; then
  rm -rf "$C/maturin"
  "$PY311" -m venv "$C/maturin" || fail "maturin" "cannot make a virtual environment"
  timed download "$C/maturin/bin/pip" install -q "maturin==$MATURIN_VERSION" || fail "maturin" "pip install maturin==$MATURIN_VERSION failed"
fi

step "Debian's libpython3.15-testsuite (CPython's own tests), cached"
T=$C/testsuite
if [ ! -f "$T/ready" ]; then
  rm -rf "$T" && mkdir -p "$T/dl"
  # apt-get download writes into the current folder.
  (cd "$T/dl" && APT_CONFIG=$A/apt.conf timed download apt-get download libpython3.15-testsuite:amd64 >"$T/download.log" 2>&1) \
    || fail "test suite" "apt-get download libpython3.15-testsuite failed (see $T/download.log)"
  deb=$(find "$T/dl" -name 'libpython3.15-testsuite_*.deb' | head -1)
  [ -n "$deb" ] || fail "test suite" "the .deb was not downloaded (see $T/download.log)"
  dpkg-deb -x "$deb" "$T/root" || fail "test suite" "dpkg-deb -x $deb"
  touch "$T/ready"
fi

# Debian unstable's CPython 3.13 and 3.14, unpacked as scripts/oracle.sh unpacks 3.15 (with
# its private package lists) and run through their own loader: the abi3 wheel on two more
# versions, against CPython 3.15.2's committed outputs (python/tests/versions.py).
sid_root() { # sid_root VERSION: Debian unstable's python$VERSION unpacked into $C/python$VERSION/root
  local v=$1 R=$C/python$1
  if [ ! -f "$R/ready" ]; then
    rm -rf "$R" && mkdir -p "$R/dl/partial" "$R/root"
    APT_CONFIG=$A/apt.conf timed download apt-get install -y -qq --download-only -o Dir::Cache::archives="$R/dl/" "python$v:amd64" \
      >"$R/download.log" 2>&1 || fail "python$v" "apt-get download of Debian unstable's python$v failed (see $R/download.log)"
    for deb in "$R"/dl/*.deb; do
      dpkg-deb -x "$deb" "$R/root" || fail "python$v" "dpkg-deb -x $deb"
    done
    (cd "$R/root" && for d in lib lib64 bin sbin; do [ -e "usr/$d" ] && ln -sfn "usr/$d" "$d"; done; true)
    rm -rf "$R/dl"
    touch "$R/ready"
  fi
}
if [ -n "$PREPARE" ]; then
  step "CPython 3.13 and 3.14 from Debian unstable (cached)"
  sid_root 3.13
  sid_root 3.14
  exit 0
fi

if [ -n "$BUILD" ]; then
  step "build the abi3 wheel into target/wheels/"
  rm -f target/wheels/tachyon_profiles-*.whl
  # In the main target folder, beside the release build it shares most crates with (64 of 82,
  # measured; PyO3's proc-macros ask syn for more features, so what derives through syn — serde,
  # clap, tachyon — is built again). The release build is the one without rlibs
  # (scripts/harness.sh), whose crates are bitcode as a cdylib's are.
  (cd python && CARGO_TARGET_DIR="$PWD/../target" timed build "$C/maturin/bin/maturin" build --release --locked \
    --out ../target/wheels -i "$PY311") || fail "maturin build" "see above"
fi
wheel=$(ls target/wheels/tachyon_profiles-*-cp39-abi3-manylinux*.whl) || fail "maturin build" "no abi3 wheel in target/wheels/"
echo "$wheel"
[ -n "$TEST" ] || exit 0

step "pip install the wheel into Python 3.11 (a fresh virtual environment)"
rm -rf "$C/py311"
"$PY311" -m venv "$C/py311" || fail "python 3.11 environment" "cannot make a virtual environment"
"$C/py311/bin/pip" install -q "$wheel" || fail "pip install (3.11)" "pip install $wheel failed"

step "pip install the wheel into CPython 3.15.2 (the oracle's, with --target)"
rm -rf "$C/site315"
"$C/py311/bin/pip" install -q --target "$C/site315" "$wheel" || fail "pip install (3.15)" "pip install --target failed"

step "CPython 3.15.2's test_binary_format with tachyon_profiles' BinaryWriter and BinaryReader"
PYTHONPATH="$C/site315" scripts/oracle-python.sh amd64 python/tests/cpython_suite.py "$T/root/usr/lib/python3.15" \
  || fail "CPython's test_binary_format" "see above"

step "the package on Python 3.11 against CPython 3.15.2 and the tachyon command (python/tests/test_package.py)"
if [ -z "${TACHYON_CLI:-}" ]; then
  cargo build --release --locked -q -p tachyon --bin tachyon || fail "the tachyon command" "cargo build --release failed"
  export TACHYON_CLI=$PWD/target/release/tachyon
fi
"$C/py311/bin/python" python/tests/test_package.py || fail "test_package.py" "see above"

step "threads and fork on 3.11 and CPython 3.15.2: writers beside finalize, readers replayed together, a writer inherited by a child (python/tests/test_threads.py; each scenario in a child with a time-out)"
"$C/py311/bin/python" python/tests/test_threads.py || fail "test_threads.py (3.11)" "see above"
TACHYON_CHILD_PYTHON="scripts/oracle-python.sh amd64" PYTHONPATH="$C/site315" \
  scripts/oracle-python.sh amd64 python/tests/test_threads.py || fail "test_threads.py (3.15)" "see above"

step "a newcomer: docs/python.md's install lines verbatim in a fresh .venv on 3.11, then its sampler example, read by CPython 3.15.2, and the tachyon command pip installed against the cargo-built one (python/tests/newcomer.sh)"
bash python/tests/newcomer.sh || fail "newcomer.sh" "see above"

sid_python() {
  local v=$1 R=$C/python$1
  sid_root "$v"
  PYTHONPATH="$C/site315" "$R/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$R/root/usr/lib/x86_64-linux-gnu" \
    "$R/root/usr/bin/python$v" python/tests/versions.py || fail "python$v" "python/tests/versions.py failed on $v"
}

step "the same wheel on Python 3.11, CPython 3.13 and 3.14 (Debian unstable's) and 3.15.2: vectors written and read as CPython 3.15.2 did (python/tests/versions.py)"
"$C/py311/bin/python" python/tests/versions.py || fail "python3.11" "python/tests/versions.py failed on 3.11"
sid_python 3.13
sid_python 3.14
PYTHONPATH="$C/site315" scripts/oracle-python.sh amd64 python/tests/versions.py || fail "python3.15" "python/tests/versions.py failed on 3.15"

step "the package's benchmark, once (one run on examples/stdlib_work.pyb, replay, collapsed and 240,000 write_sample calls: a smoke run; docs/benchmarks.md's figures come from the long profiles)"
PYTHONPATH="$C/site315" scripts/oracle-python.sh amd64 python/bench/bench.py --runs 1 --python "scripts/oracle-python.sh amd64" \
  examples/stdlib_work.pyb || fail "benchmark" "see above"
