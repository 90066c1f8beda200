#!/usr/bin/env bash
# Installs what the conversion tests check our outputs with, into ~/.cache/tachyon-tools
# (or $TACHYON_TOOLS_DIR): Debian's golang-go (go tool pprof) and librsvg2-bin (rsvg-convert),
# Python 3.11 (pstats of older Pythons), a venv with jsonschema and gprof2dot (PyPI
# 2025.4.14, the call graphs `--to dot` is compared with; perfetto 0.59.1, whose trace protos
# decode `--to perfetto`), Graphviz (dot, to render them), and
# speedscope's published file-format schema from its npm package; Debian's Chromium and the
# playwright-core that qemu-tests/browser/package-lock.json pins (into $T/browser), which drive
# the pages we write. Idempotent; each failure names its step.
set -euo pipefail
T=${TACHYON_TOOLS_DIR:-$HOME/.cache/tachyon-tools}
SPEEDSCOPE_VERSION=1.25.0
GPROF2DOT_VERSION=2025.4.14
# The trace protos compiled for Python: what `--to perfetto` is decoded with.
PERFETTO_VERSION=0.59.1
step() { echo "viewer-tools: $*" >&2; }
fail() { echo "viewer-tools: FAILED: $*" >&2; exit 1; }
mkdir -p "$T"

need_apt=()
command -v go >/dev/null || need_apt+=(golang-go)
command -v rsvg-convert >/dev/null || need_apt+=(librsvg2-bin)
command -v python3.11 >/dev/null || need_apt+=(python3.11 python3.11-venv)
python3.11 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3.11-venv)
command -v npm >/dev/null || need_apt+=(npm)
command -v dot >/dev/null || need_apt+=(graphviz)
# The browser alone, without what it recommends (a print server, avahi, ...): the pages need
# only it and a font.
need_bare=()
command -v chromium >/dev/null || need_bare+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_bare+=(fonts-dejavu-core)
if [ ${#need_bare[@]} -gt 0 ]; then
  step "apt-get install --no-install-recommends ${need_bare[*]}"
  if [ "$(id -u)" != 0 ]; then fail "need root to install ${need_bare[*]}"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_bare[@]}" >"$T/apt-bare.log" 2>&1 \
    || { apt-get update -q >>"$T/apt-bare.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "${need_bare[@]}" >>"$T/apt-bare.log" 2>&1; } \
    || fail "apt-get install ${need_bare[*]} (log: $T/apt-bare.log)"
fi
chromium --headless --no-sandbox --disable-gpu --dump-dom about:blank >/dev/null 2>&1 || fail "chromium does not start headless"
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt-get install ${need_apt[*]}"
  if [ "$(id -u)" != 0 ]; then fail "need root to install ${need_apt[*]}"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >"$T/apt.log" 2>&1 \
    || { apt-get update -q >>"$T/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >>"$T/apt.log" 2>&1; } \
    || fail "apt-get install ${need_apt[*]} (log: $T/apt.log)"
fi
go version >/dev/null || fail "go does not run"
go tool pprof -h >/dev/null 2>&1 || fail "go tool pprof missing"

if [ ! -x "$T/venv/bin/python" ] || ! "$T/venv/bin/python" -c 'import jsonschema' 2>/dev/null; then
  step "venv with jsonschema"
  python3.11 -m venv "$T/venv" || fail "python3.11 -m venv"
  "$T/venv/bin/pip" install -q jsonschema >"$T/pip.log" 2>&1 || fail "pip install jsonschema (log: $T/pip.log)"
fi
if [ "$("$T/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("gprof2dot"))' 2>/dev/null)" != "$GPROF2DOT_VERSION" ]; then
  step "gprof2dot $GPROF2DOT_VERSION into the venv"
  "$T/venv/bin/pip" install -q "gprof2dot==$GPROF2DOT_VERSION" >>"$T/pip.log" 2>&1 \
    || fail "pip install gprof2dot==$GPROF2DOT_VERSION (log: $T/pip.log)"
fi
if [ "$("$T/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("perfetto"))' 2>/dev/null)" != "$PERFETTO_VERSION" ]; then
  step "perfetto $PERFETTO_VERSION (its trace protos) into the venv"
  "$T/venv/bin/pip" install -q "perfetto==$PERFETTO_VERSION" >>"$T/pip.log" 2>&1 \
    || fail "pip install perfetto==$PERFETTO_VERSION (log: $T/pip.log)"
fi
# The module itself, so that CPython 3.15 can run it on files only 3.15 loads.
GPROF2DOT=$("$T/venv/bin/python" -c 'import gprof2dot; print(gprof2dot.__file__)') || fail "gprof2dot not importable"
ln -sf "$GPROF2DOT" "$T/gprof2dot.py"

SCHEMA=$T/speedscope-$SPEEDSCOPE_VERSION/package/dist/release/file-format-schema.json
if [ ! -f "$SCHEMA" ]; then
  step "speedscope $SPEEDSCOPE_VERSION schema from npm"
  mkdir -p "$T/speedscope-$SPEEDSCOPE_VERSION"
  (cd "$T/speedscope-$SPEEDSCOPE_VERSION" && npm pack -q "speedscope@$SPEEDSCOPE_VERSION" >/dev/null 2>"$T/npm.log" \
    && tar xzf "speedscope-$SPEEDSCOPE_VERSION.tgz") || fail "npm pack speedscope (log: $T/npm.log)"
  [ -f "$SCHEMA" ] || fail "speedscope package has no dist/release/file-format-schema.json"
fi
ln -sf "$SCHEMA" "$T/speedscope-schema.json"

# playwright-core as the lock file pins it (the browser itself is Debian's).
LOCK=$(dirname "$0")/../qemu-tests/browser/package-lock.json
if ! cmp -s "$LOCK" "$T/browser/package-lock.json" || [ ! -d "$T/browser/node_modules/playwright-core" ]; then
  step "playwright-core from npm, as qemu-tests/browser/package-lock.json pins it"
  rm -rf "$T/browser" && mkdir -p "$T/browser"
  cp "$LOCK" "$(dirname "$LOCK")/package.json" "$T/browser/"
  (cd "$T/browser" && npm ci -q --no-audit --no-fund >"$T/npm-browser.log" 2>&1) \
    || fail "npm ci playwright-core (log: $T/npm-browser.log)"
fi
touch "$T/ready"
step "ready in $T"
