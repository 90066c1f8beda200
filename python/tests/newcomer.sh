#!/usr/bin/env bash
# A newcomer's first hour, as docs/python.md tells it (issue 40): the "Install from source"
# lines run verbatim at the repository's root, on Debian's Python 3.11 (a fresh `.venv`), then
# the docs' sampler example, whose file CPython 3.15.2's own reader must read.
#
#     bash python/tests/newcomer.sh        (scripts/python.sh; needs the oracle, scripts/oracle.sh)
#
# What the docs do not say and this adds: CARGO_TARGET_DIR points at the repository's target/
# (the test command's wheel build is there, so pip's build reuses its crates), `python3`
# is Debian's 3.11 whatever the PATH had first, and pip's build uses the maturin the test
# command pins (MATURIN_VERSION, when scripts/python.sh runs this), not whichever is newest.
# Then the `tachyon` command pip installed is compared with the cargo-built one
# (python/tests/test_command.py).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
W=$(mktemp -d)
# (pip's build also leaves its wheel, tagged linux_x86_64, in target/wheels/, beside the test
# command's manylinux one that the other steps install; it goes too.)
trap 'rm -rf "$W" "$ROOT/.venv" "$ROOT"/target/wheels/tachyon_profiles-*-linux_x86_64.whl' EXIT
fail() { printf 'newcomer: %s\n' "$*" >&2; exit 1; }

# The fenced block after the marker line, as the page shows it.
block() { # block MARKER
  awk -v m="<!-- newcomer: $1 -->" '
    $0 == m { found = 1; next }
    found == 1 && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' docs/python.md
}
block install >"$W/install.sh"
block sampler >"$W/sampler.py"
[ -s "$W/install.sh" ] || fail "docs/python.md has no install lines under <!-- newcomer: install -->"
[ -s "$W/sampler.py" ] || fail "docs/python.md has no sampler under <!-- newcomer: sampler -->"
grep -q 'write_sample' "$W/sampler.py" || fail "the docs' sampler does not call write_sample"

mkdir -p "$W/bin"
ln -s /usr/bin/python3.11 "$W/bin/python3"
if [ -n "${MATURIN_VERSION:-}" ]; then
  echo "maturin==$MATURIN_VERSION" >"$W/constraints.txt"
  export PIP_CONSTRAINT="$W/constraints.txt"
fi
rm -rf .venv
echo "--> the install lines of docs/python.md, verbatim:"
sed 's/^/    /' "$W/install.sh"
PATH="$W/bin:$PATH" CARGO_TARGET_DIR="$ROOT/target" bash -euo pipefail -c "$(cat "$W/install.sh")
python -c 'import sys, tachyon_profiles; assert sys.version_info[:2] == (3, 11), sys.version; print(\"installed\", tachyon_profiles.__version__, \"on\", sys.version.split()[0])'
python '$W/sampler.py' '$W/sampler.pyb'" || fail "the install lines or the sampler failed (see above)"

echo "--> CPython 3.15.2 reads the sampler's file"
cat >"$W/check.py" <<'PY'
import sys
import _remote_debugging as rd

class Count:
    samples = 0
    work = 0
    def collect(self, stack_frames, timestamps_us=None):
        for interp in stack_frames:
            for thread in interp.threads:
                self.samples += len(timestamps_us)
                if any(f.funcname in ("work", "<genexpr>", "work.<locals>.<genexpr>") for f in thread.frame_info):
                    self.work += len(timestamps_us)

reader = rd.BinaryReader(sys.argv[1])
c = Count()
reader.replay(c)
info = reader.get_info()
assert info["sample_count"] == c.samples and c.samples > 20, (info, c.samples)
assert c.work > c.samples // 2, ("work() should be in most samples", c.work, c.samples)
assert info["compression_type"] == 1 and info["duration_sec"] > 0, info
print(f"CPython {sys.version.split()[0]} read {c.samples} samples, {c.work} in work()")
PY
scripts/oracle-python.sh amd64 "$W/check.py" "$W/sampler.pyb" || fail "CPython 3.15.2 could not read the sampler's file"

echo "--> the tachyon command pip installed is the cargo-built one (python/tests/test_command.py)"
out=$(.venv/bin/python python/tests/test_command.py 2>&1) \
  || { printf '%s\n' "$out"; fail "the installed tachyon command differs from the cargo-built one"; }
tail -3 <<<"$out"
