#!/usr/bin/env bash
# The cross-endian exchange matrix (issue 4): x86_64, s390x, powerpc and powerpc64 each write
# the same generated streams natively and read everyone's files; big-endian files must equal
# CPython's s390x output, little-endian ones CPython's x86_64 output; CPython's readers decode
# the PowerPC files. Needs scripts/oracle.sh and the cross set-up of scripts/test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
{
DIR=${1:-$PWD/target/exchange}
TARGETS=(s390x-unknown-linux-gnu powerpc-unknown-linux-gnu powerpc64-unknown-linux-gnu)
rm -rf "$DIR" && mkdir -p "$DIR"
# The checked profile (see Cargo.toml), built by the test command's earlier steps: the
# big-endian programs by the big-endian suite's test build (the same binaries, the same
# features), the host's by the host's tests: `--tests` makes the selection below theirs, and
# so its features, the dev-dependencies' included (without it cargo resolved other features
# and compiled the std layer's tree again: 34 s in a warm run). Then each phase's programs run
# side by side, each an emulated process of its own: the writers (and CPython writing), then
# the readers (and CPython reading). Each one's output is kept and shown in order.
cargo build -q --profile checked --workspace --all-features --exclude tachyon-capi --tests --bin exchange
cargo build -q --profile checked -p qemu-tests --bin exchange "${TARGETS[@]/#/--target=}"
exe() { # exe TARGET|host: the exchange binary and the runner it needs
  case $1 in
    host) echo "target/checked/exchange" ;;
    s390x-*) echo "qemu-s390x -L /usr/s390x-linux-gnu target/$1/checked/exchange" ;;
    powerpc-*) echo "qemu-ppc -L /usr/powerpc-linux-gnu target/$1/checked/exchange" ;;
    powerpc64-*) echo "qemu-ppc64 -L /usr/powerpc64-linux-gnu target/$1/checked/exchange" ;;
  esac
}
$(exe host) docs "$DIR"
# (together, together_wait: scripts/harness.sh; a failed program's log is shown.)
together "$DIR" write-host $(exe host) write "$DIR"
for t in "${TARGETS[@]}"; do together "$DIR" "write-$t" $(exe "$t") write "$DIR"; done
for arch in amd64 s390x; do
  together "$DIR" "cpython-write-$arch" scripts/oracle-python.sh "$arch" qemu-tests/oracle/cpython_batch.py write "$DIR/write-$arch.tsv"
done
together_wait --failed-only
for t in host "${TARGETS[@]}"; do cat "$DIR/write-$t.log"; done
for arch in amd64 s390x; do
  together "$DIR" "cpython-dump-$arch" scripts/oracle-python.sh "$arch" qemu-tests/oracle/cpython_batch.py dump "$DIR/dump-$arch.tsv"
done
together "$DIR" read-host $(exe host) read "$DIR"
for t in "${TARGETS[@]}"; do together "$DIR" "read-$t" $(exe "$t") read "$DIR"; done
together_wait --failed-only
{ cat "$DIR/read-host.log"; for t in "${TARGETS[@]}"; do cat "$DIR/read-$t.log"; done; } | tee "$DIR/matrix.txt"
$(exe host) check "$DIR"

echo
echo "Exchange matrix: rows = reader, columns = writer; samples matched (files)"
awk '{for(i=1;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]} r=v["reader"]; w=v["writer"]; cell[r","w]=v["samples"] " (" v["files"] ")"; if(v["mismatches"]!=0) bad=1; rs[r]=1; ws[w]=1}
END {printf "%-10s", "reader"; n=split("x86_64 s390x powerpc powerpc64", order, " ");
     for(i=1;i<=n;i++) printf " | %-16s", order[i]; printf "\n";
     for(j=1;j<=n;j++){printf "%-10s", order[j]; for(i=1;i<=n;i++) printf " | %-16s", cell[order[j]","order[i]]; printf "\n"}
     exit bad}' "$DIR/matrix.txt"
exit 0
}
