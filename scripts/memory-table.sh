#!/usr/bin/env bash
# Peak RSS and output size of every `tachyon convert --to` output of one input (docs/memory.md's
# tables): `bash scripts/memory-table.sh [TACHYON] FILE`. Each conversion runs as a whole
# process; peak RSS is the kernel's (GNU time's %M, from wait4), median of RUNS (default 3).
# Without TACHYON, the release build's command (built here, as scripts/harness.sh builds it).
set -euo pipefail
TACHYON=${2:+$1}
FILE=${2:-$1}
if [ -z "$TACHYON" ]; then
  (cd "$(dirname "$0")/.." && cargo build --release --locked -q -p tachyon --bin tachyon) >&2
  TACHYON=$(cd "$(dirname "$0")/.." && pwd)/target/release/tachyon
fi
RUNS=${RUNS:-3}
[ -x /usr/bin/time ] || { echo "needs GNU time (Debian: time)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
printf '| output | peak RSS | wall | output size |\n|---|---:|---:|---:|\n'
for to in jsonl pstats pstats-text dot mojo tachyon collapsed austin flamegraph pprof speedscope otlp-json otlp gecko; do
  rss=() walls=()
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f '%M %e' -o "$OUT/time" "$TACHYON" -q convert --to "$to" -o "$OUT/out" "$FILE" ||
      { echo "| $to | failed (exit $?) | | |"; continue 2; }
    read -r kb wall <"$OUT/time"
    rss+=("$kb") walls+=("$wall")
  done
  mid=$((RUNS / 2))
  kb=$(printf '%s\n' "${rss[@]}" | sort -n | sed -n "$((mid + 1))p")
  wall=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$((mid + 1))p")
  size=$(stat -c %s "$OUT/out")
  printf '| %s | %s MB | %s s | %s |\n' "$to" "$((kb / 1024))" "$wall" \
    "$(numfmt --to=iec --suffix=B "$size")"
done
