#!/usr/bin/env bash
# The cross-endian exchange matrix (issue 4): x86_64, s390x, powerpc and powerpc64 each write
# the same generated streams natively and read everyone's files; big-endian files must equal
# CPython's s390x output, little-endian ones CPython's x86_64 output; CPython's readers decode
# the PowerPC files. Needs scripts/oracle.sh and the cross set-up of scripts/test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
{
DIR=${1:-$PWD/target/exchange}
TARGETS=(s390x-unknown-linux-gnu powerpc-unknown-linux-gnu powerpc64-unknown-linux-gnu)
rm -rf "$DIR" && mkdir -p "$DIR"
# The qemu profile (see Cargo.toml): the big-endian suite has built the big-endian binaries
# with it already; the host one is built here.
run_host() { cargo run -q --profile qemu -p qemu-tests --bin exchange -- "$@"; }
run_on() { local t=$1; shift; cargo run -q --profile qemu -p qemu-tests --bin exchange --target "$t" -- "$@"; }

run_host docs "$DIR"
run_host write "$DIR"
for t in "${TARGETS[@]}"; do run_on "$t" write "$DIR"; done
for arch in amd64 s390x; do
  scripts/oracle-python.sh "$arch" qemu-tests/oracle/cpython_batch.py write "$DIR/write-$arch.tsv"
  scripts/oracle-python.sh "$arch" qemu-tests/oracle/cpython_batch.py dump "$DIR/dump-$arch.tsv"
done
{
  run_host read "$DIR"
  for t in "${TARGETS[@]}"; do run_on "$t" read "$DIR"; done
} | tee "$DIR/matrix.txt"
run_host check "$DIR"

echo
echo "Exchange matrix: rows = reader, columns = writer; samples matched (files)"
awk '{for(i=1;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]} r=v["reader"]; w=v["writer"]; cell[r","w]=v["samples"] " (" v["files"] ")"; if(v["mismatches"]!=0) bad=1; rs[r]=1; ws[w]=1}
END {printf "%-10s", "reader"; n=split("x86_64 s390x powerpc powerpc64", order, " ");
     for(i=1;i<=n;i++) printf " | %-16s", order[i]; printf "\n";
     for(j=1;j<=n;j++){printf "%-10s", order[j]; for(i=1;i<=n;i++) printf " | %-16s", cell[order[j]","order[i]]; printf "\n"}
     exit bad}' "$DIR/matrix.txt"
exit 0
}
