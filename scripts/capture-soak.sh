#!/usr/bin/env bash
# The capture ring's long soak (issue 38): from a fresh ring past the first wrap of the old
# 32-bit position counters — 2^32 + 2^28 words through each of rings of 1,000, 1,024 and
# 4,099 words, a producer and a consumer thread, every entry's every word checked, the
# drops counted exactly (qemu-tests/examples/capture_soak.rs). About 11 s a ring in a
# release build; the test command runs the same soak for 2^28 words a ring from counters
# started just below 2^32 (core's tests). WORDS overrides the words a ring.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q --release -p qemu-tests --example capture_soak -- ${WORDS:+"$WORDS"}
