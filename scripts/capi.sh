#!/usr/bin/env bash
# The C API's proofs (issue 13): the committed header is what cbindgen makes of the sources;
# C tests built with gcc and clang against it, on the static and the shared library and
# through pkg-config: the C writer's files are byte-identical to the Rust writer's (`tachyon
# encode` of the same samples) in both byte orders, raw and zstd, and CPython 3.15.2 reads
# them as our C reader does; the C reader decodes CPython's vectors to CPython's samples;
# every documented error code. The same tests under AddressSanitizer + UBSan and valgrind
# memcheck (no errors, no leaks), and cross-compiled for s390x, powerpc and powerpc64 and run
# under qemu-user. The no_std static library for thumbv7em-none-eabihf links into a C
# program with no C library. Then the Lua 5.4 profiler (capi/examples/lua) on its programs:
# CPython reads each profile as our reader does, and the collapsed stacks and flame graph
# show the Lua functions. The library as installed (scripts/capi-install.sh) by programs
# outside the tree (capi/tests/installed/check.sh). Leaves the Lua profiles in
# target/lua-profiles/*.pyb.
# Installs what it needs on a fresh Debian machine (as root); says which step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/harness.sh
. scripts/harness.sh
ROOT=$PWD
OUT="$ROOT/target/capi"
LUA_OUT="$ROOT/target/lua-profiles"
VECTORS="$ROOT/qemu-tests/vectors/cpython-3.15.2"
fail() { printf 'C API FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf '  capi: %s\n' "$*"; }

# --- set-up -------------------------------------------------------------------------------
need=()
for pair in cbindgen:cbindgen clang:clang valgrind:valgrind pkg-config:pkg-config gcc:gcc \
  lua5.4:lua5.4 cmake:cmake g++:g++ qemu-s390x:qemu-user s390x-linux-gnu-gcc:gcc-s390x-linux-gnu \
  powerpc-linux-gnu-gcc:gcc-powerpc-linux-gnu powerpc64-linux-gnu-gcc:gcc-powerpc64-linux-gnu \
  arm-none-eabi-ld:binutils-arm-none-eabi python3:python3; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
[ -f /usr/include/lua5.4/lua.h ] || need+=(liblua5.4-dev)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${need[*]} and this is not root"
  log "installing ${need[*]}"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || fail "apt-get install ${need[*]}"
fi
CROSS_TARGETS=(s390x-unknown-linux-gnu powerpc-unknown-linux-gnu powerpc64-unknown-linux-gnu)
for target in "${CROSS_TARGETS[@]}" thumbv7em-none-eabihf; do
  grep -qx "$target" <<<"$(rustup target list --installed)" || rustup target add "$target" || fail "rustup target add $target"
done
bash scripts/oracle.sh >/dev/null || fail "setting up the CPython 3.15.2 oracle"

rm -rf "$OUT" "$LUA_OUT"
mkdir -p "$OUT" "$LUA_OUT"

# --- the header -----------------------------------------------------------------------------
log "include/tachyon.h is what cbindgen $(cbindgen --version | cut -d' ' -f2) makes of capi/src"
(cd capi && cbindgen -q --config cbindgen.toml --crate tachyon-capi --output "$OUT/tachyon.h" .) \
  || fail "cbindgen"
diff -u capi/include/tachyon.h "$OUT/tachyon.h" \
  || fail "capi/include/tachyon.h is stale: regenerate it (cd capi && cbindgen --config cbindgen.toml --crate tachyon-capi --output include/tachyon.h .)"

# --- libraries ------------------------------------------------------------------------------
# In the checked profile (dev's debug assertions and overflow checks at opt-level 1), as the
# cross-compiled tests below link it: under valgrind, errors_test's 145,638 checks took 137 s
# against the dev build's library and 10 s against this one (writer_test 18 s and 6.6 s;
# 2026-11-28), and valgrind was the step's long pole.
cargo build -q --profile checked -p tachyon-capi || fail "building the C library"
# The same functions called from Rust as C calls them (capi/tests/api; scripts/miri.sh runs
# them under Miri).
cargo test -q --profile checked -p tachyon-capi --test api || fail "the C API's Rust tests"
release_build || fail "building the tachyon command"
TACHYON="$ROOT/target/release/tachyon"
LIB="$ROOT/target/checked"
LIBS="-lpthread -ldl -lm"
# pkg-config file for the build tree (capi/tachyon.pc.in, as an install would fill it in).
mkdir -p "$OUT/pkgconfig"
sed -e "s|@PREFIX@|$ROOT|; s|@LIBDIR@|$LIB|; s|@INCLUDEDIR@|$ROOT/capi/include|; s|@VERSION@|$(cargo pkgid -p tachyon-capi | sed 's/.*[#@]//')|" \
  capi/tachyon.pc.in > "$OUT/pkgconfig/tachyon.pc"
export PKG_CONFIG_PATH="$OUT/pkgconfig"
pkg-config --exists tachyon || fail "pkg-config does not find tachyon.pc"

CFLAGS_STRICT="-std=c99 -Wall -Wextra -Werror -pedantic -O1 -g"
# build CC DIR LIBFILE EXTRA...: the three tests with CC against the header and LIBFILE.
build_tests() {
  local cc=$1 dir=$2 lib=$3
  shift 3
  mkdir -p "$dir"
  for t in writer_test reader_test errors_test; do
    $cc $CFLAGS_STRICT -I capi/include "capi/tests/c/$t.c" "$lib" $LIBS "$@" -o "$dir/$t" \
      || fail "$cc: compiling capi/tests/c/$t.c"
  done
}

# run_writer DIR RUN ORDER_OF_NATIVE: writer_test in every byte order and compression; each
# file byte-identical to `tachyon encode` of the same samples (the Rust writer).
run_writer() {
  local dir=$1 run=$2 native=$3 order
  for order in native little big; do
    for comp in none zstd; do
      local name="$dir/w-$order-$comp"
      $run "$dir/writer_test" "$name.pyb" "$name.jsonl" "$order" "$comp" >/dev/null \
        || fail "$dir: writer_test $order $comp"
      local as=$order
      [ "$order" = native ] && as=$native
      "$TACHYON" encode "$name.jsonl" -o "$name.rust.pyb" --byte-order "$as" || fail "tachyon encode $name.jsonl"
      cmp "$name.pyb" "$name.rust.pyb" || fail "$name.pyb: the C API's file differs from the Rust writer's"
    done
  done
  log "${dir#"$ROOT"/}: writer_test's files (native, little, big; raw and zstd) are the Rust writer's, byte for byte"
}

# run_reader DIR RUN: reader_test on every vector (from the file and from memory) reads what
# CPython read.
run_reader() {
  local dir=$1 run=$2 n=0
  for bin in "$VECTORS"/*.bin; do
    local base expected
    base=$(basename "$bin" .bin)
    expected="$VECTORS/${base%.*}.expected.jsonl"
    $run "$dir/reader_test" "$bin" > "$dir/$base.txt" || fail "$dir: reader_test $base"
    $run "$dir/reader_test" "$bin" memory > "$dir/$base.memory.txt" || fail "$dir: reader_test $base memory"
    cmp "$dir/$base.txt" "$dir/$base.memory.txt" || fail "$dir: $base reads differently from memory"
    python3 capi/tests/compare_reader.py "$expected" "$dir/$base.txt" >/dev/null || fail "$dir: $base"
    n=$((n + 1))
  done
  log "${dir#"$ROOT"/}: reader_test reads the $n vector files (from the file and from memory) as CPython does"
}

run_errors() {
  local dir=$1 run=$2
  mkdir -p "$dir/scratch"
  $run "$dir/errors_test" "$dir/scratch" > "$dir/errors.log" || { cat "$dir/errors.log"; fail "$dir: errors_test"; }
  log "${dir#"$ROOT"/}: $(tail -1 "$dir/errors.log")"
}

native_order=$([ "$(printf '\1\0' | od -An -t u2 | tr -d ' ')" = 1 ] && echo little || echo big)

# The groups below share nothing but the libraries and the header, and each runs one
# single-threaded program after another (valgrind, qemu-user, the sanitizers), so they run
# side by side (measured: 5 min 04 s one after another); each one's log is shown in order
# when all have ended (together, together_wait: scripts/harness.sh).
native_tests() {
  for cc in gcc clang; do
    log "$cc: the tests against the static library"
    build_tests "$cc" "$OUT/$cc" "$LIB/libtachyon_c.a"
    run_writer "$OUT/$cc" "" "$native_order"
    run_reader "$OUT/$cc" ""
    run_errors "$OUT/$cc" ""
  done

  log "the header as C11 and C++17, its constants in use"
  printf '#include "tachyon.h"\nint main(void) { return TACHYON_ABI_VERSION == 2 && TACHYON_MODE_CPU == 1 && TACHYON_THREAD_STATUS_MAIN_THREAD == 32 && TACHYON_CAPTURE_FEATURE_BLOCKING == 16 ? 0 : 1; }\n' \
    > "$OUT/header_use.c"
  gcc -std=c11 -Wall -Wextra -Werror -pedantic -I capi/include "$OUT/header_use.c" -o "$OUT/header_use_c" || fail "the header as C11"
  g++ -std=c++17 -Wall -Wextra -Werror -pedantic -x c++ -I capi/include "$OUT/header_use.c" -o "$OUT/header_use_cpp" \
    || fail "the header as C++17"
  "$OUT/header_use_c" && "$OUT/header_use_cpp" || fail "the header's constants"

  log "the shared library, and flags from pkg-config"
  mkdir -p "$OUT/shared" "$OUT/pkgconfig-build"
  gcc $CFLAGS_STRICT -I capi/include capi/tests/c/errors_test.c -L "$LIB" -ltachyon_c -o "$OUT/shared/errors_test" \
    || fail "linking errors_test against libtachyon_c.so"
  # (grep reads a variable: `grep -q` at the end of a pipe may end ldd early, which pipefail
  # counts as a failure.)
  linked=$(ldd "$OUT/shared/errors_test") || fail "ldd errors_test"
  grep -q libtachyon_c.so <<<"$linked" || fail "errors_test is not linked to libtachyon_c.so"
  LD_LIBRARY_PATH="$LIB" run_errors "$OUT/shared" ""
  # shellcheck disable=SC2046
  gcc $CFLAGS_STRICT $(pkg-config --cflags tachyon) capi/tests/c/writer_test.c $(pkg-config --static --libs tachyon) \
    -o "$OUT/pkgconfig-build/writer_test" || fail "building writer_test with pkg-config's flags"
  LD_LIBRARY_PATH="$LIB" "$OUT/pkgconfig-build/writer_test" "$OUT/pkgconfig-build/w.pyb" "$OUT/pkgconfig-build/w.jsonl" \
    native zstd >/dev/null || fail "writer_test built through pkg-config"

  log "CPython 3.15.2 reads the C writer's files as our C reader does"
  local manifest="$OUT/cpython.tsv" f pyb jsonl
  : > "$manifest"
  for f in "$OUT"/gcc/w-*.pyb; do
    case "$f" in *.rust.pyb) continue ;; esac
    printf '%s\t%s\n' "$f" "${f%.pyb}.cpython.jsonl" >> "$manifest"
  done
  "$ROOT/scripts/oracle-python.sh" amd64 "$ROOT/qemu-tests/oracle/cpython_batch.py" dump "$manifest" \
    || fail "CPython's reader failed on a file of the C writer"
  while IFS=$'\t' read -r pyb jsonl; do
    "$OUT/gcc/reader_test" "$pyb" > "${pyb%.pyb}.txt" || fail "reader_test $pyb"
    python3 capi/tests/compare_reader.py "$jsonl" "${pyb%.pyb}.txt" >/dev/null || fail "$pyb: CPython and the C reader disagree"
  done < "$manifest"
  # The options' mode and capture features, as CPython's get_info() shows them: writer_test
  # sets TACHYON_MODE_CPU and ALL_THREADS | NATIVE for its zstd files, nothing for the raw.
  for f in "$OUT"/gcc/w-*-zstd.cpython.jsonl "$OUT"/gcc/w-*-none.cpython.jsonl; do
    case "$f" in *-zstd.*) want="1 3" ;; *) want="None None" ;; esac
    got=$(head -1 "$f" | python3 -c 'import json, sys; i = json.load(sys.stdin); print(i["mode"], i["capture_features"])') \
      || fail "$f: no info line"
    [ "$got" = "$want" ] || fail "$f: CPython's get_info() gives mode and capture_features $got, the options said $want"
  done
  log "CPython's get_info() shows the options' mode and capture features (cpu, all_threads | native)"
}

sanitizer_tests() {
  log "AddressSanitizer + UndefinedBehaviorSanitizer"
  build_tests gcc "$OUT/asan" "$LIB/libtachyon_c.a" -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_writer "$OUT/asan" "" "$native_order"
  run_reader "$OUT/asan" ""
  run_errors "$OUT/asan" ""
}

# valgrind_tests writer|readers-and-errors: one half of the memcheck runs. In one job they
# were the step's longest (3 min 12 s of its 3 min 27 s, the cores 70 % busy); the halves run
# side by side, each with its own build of the tests.
valgrind_tests() {
  local part=$1 dir="$OUT/valgrind-$1" v
  local valgrind="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible"
  log "valgrind memcheck, $part (no errors, no leaks definitely, indirectly or possibly lost)"
  build_tests gcc "$dir" "$LIB/libtachyon_c.a"
  case $part in
    writer) run_writer "$dir" "$valgrind" "$native_order" ;;
    readers-and-errors)
      for v in 09_zstd.s390x 12_empty_and_deep_stack.x86_64 10_stats_mode.s390x; do
        $valgrind "$dir/reader_test" "$VECTORS/$v.bin" > /dev/null || fail "valgrind: reader_test $v"
      done
      run_errors "$dir" "$valgrind"
      ;;
  esac
}

cross_tests() { # cross_tests TARGET
  local target=$1 arch=${1%%-*} cc qemu
  case "$arch" in
    s390x) cc=s390x-linux-gnu-gcc qemu="qemu-s390x -L /usr/s390x-linux-gnu" ;;
    powerpc) cc=powerpc-linux-gnu-gcc qemu="qemu-ppc -L /usr/powerpc-linux-gnu" ;;
    powerpc64) cc=powerpc64-linux-gnu-gcc qemu="qemu-ppc64 -L /usr/powerpc64-linux-gnu" ;;
  esac
  log "$arch: the tests cross-compiled, under qemu-user"
  build_tests "$cc" "$OUT/$arch" "$ROOT/target/$target/checked/libtachyon_c.a"
  run_writer "$OUT/$arch" "$qemu" big
  run_reader "$OUT/$arch" "$qemu"
  run_errors "$OUT/$arch" "$qemu"
}

# The checked profile (dev's checks at opt-level 1), as the big-endian suite and the exchange
# matrix build for these targets: the dependencies they built are reused, not built again.
cargo build -q --profile checked -p tachyon-capi "${CROSS_TARGETS[@]/#/--target=}" \
  || fail "building the C library for ${CROSS_TARGETS[*]}"

together "$OUT/logs" native native_tests
together "$OUT/logs" sanitizers sanitizer_tests
together "$OUT/logs" valgrind-writer valgrind_tests writer
together "$OUT/logs" valgrind-readers-and-errors valgrind_tests readers-and-errors
for target in "${CROSS_TARGETS[@]}"; do together "$OUT/logs" "${target%%-*}" cross_tests "$target"; done
together_wait || fail "the groups above that failed"

log "no_std: the static library for thumbv7em-none-eabihf links into a C program without a C library"
# Only the static library (a cdylib means nothing there), at opt-level "s" as firmware builds.
CARGO_PROFILE_RELEASE_OPT_LEVEL=s cargo rustc -q -p tachyon-capi --lib --crate-type staticlib --release \
  --no-default-features --target thumbv7em-none-eabihf || fail "building the no_std C library"
NOSTD_LIB="$ROOT/target/thumbv7em-none-eabihf/release/libtachyon_c.a"
mkdir -p "$OUT/thumbv7em"
clang --target=thumbv7em-none-eabihf -mcpu=cortex-m4 -mfloat-abi=hard -ffreestanding -nostdlib -std=c99 -Wall -Wextra \
  -Werror -Os -DTACHYON_NO_STD -DTACHYON_NO_ZSTD -I capi/include -c capi/tests/c/firmware_link.c \
  -o "$OUT/thumbv7em/firmware_link.o" || fail "compiling capi/tests/c/firmware_link.c for thumbv7em"
arm-none-eabi-ld --gc-sections -e main -o "$OUT/thumbv7em/firmware_link.elf" "$OUT/thumbv7em/firmware_link.o" \
  "$NOSTD_LIB" || fail "linking a C program with the no_std library (unresolved symbols above)"
log "thumbv7em: $(arm-none-eabi-size -A "$OUT/thumbv7em/firmware_link.elf" | awk '$1==".text"{print $2}') bytes of .text with the writer linked"

log "installed: scripts/capi-install.sh's prefix used by a C and a C++ program outside the tree (pkg-config, CMake; shared, static)"
bash capi/tests/installed/check.sh || fail "the installed C library (capi/tests/installed/check.sh)"

log "Lua 5.4: the profiler on its programs"
# shellcheck disable=SC2046
gcc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -g -I capi/include $(pkg-config --cflags lua5.4) \
  capi/examples/lua/lua_profile.c "$LIB/libtachyon_c.a" $(pkg-config --libs lua5.4) $LIBS -o "$OUT/lua_profile" \
  || fail "compiling the Lua profiler"
declare -A FUNCTIONS=(
  [recursion]="fib ackermann make_tree tree_sum"
  [coroutines]="consume <coroutine> <anonymous:4> <anonymous:14>"
  [strings]="build_text count_words shout checksum gsub"
)
manifest="$OUT/lua-cpython.tsv"
: > "$manifest"
for program in recursion coroutines strings; do
  (cd capi/examples/lua && "$OUT/lua_profile" "$LUA_OUT/$program.pyb" "$program.lua") > "$LUA_OUT/$program.log" \
    || { cat "$LUA_OUT/$program.log"; fail "lua_profile $program.lua"; }
  log "$(tail -1 "$LUA_OUT/$program.log" | sed "s|^$ROOT/||")"
  "$TACHYON" verify "$LUA_OUT/$program.pyb" >/dev/null || fail "tachyon verify $program.pyb"
  "$TACHYON" convert "$LUA_OUT/$program.pyb" --to collapsed -o "$LUA_OUT/$program.collapsed" || fail "collapsed $program"
  "$TACHYON" convert "$LUA_OUT/$program.pyb" --to flamegraph -o "$LUA_OUT/$program.svg" || fail "flame graph $program"
  for fn in ${FUNCTIONS[$program]}; do
    grep -qF ":$fn:" "$LUA_OUT/$program.collapsed" || fail "$program: no $fn in the collapsed stacks"
    # The SVG escapes < and >.
    esc=$(printf '%s' "$fn" | sed 's/</\&lt;/g; s/>/\&gt;/g')
    grep -qF "$esc" "$LUA_OUT/$program.svg" || fail "$program: no $fn in the flame graph"
  done
  printf '%s\t%s\n' "$LUA_OUT/$program.pyb" "$OUT/lua-$program.cpython.jsonl" >> "$manifest"
done
"$ROOT/scripts/oracle-python.sh" amd64 "$ROOT/qemu-tests/oracle/cpython_batch.py" dump "$manifest" \
  || fail "CPython's reader failed on a Lua profile"
for program in recursion coroutines strings; do
  "$OUT/gcc/reader_test" "$LUA_OUT/$program.pyb" > "$OUT/lua-$program.txt" || fail "reader_test $program.pyb"
  python3 capi/tests/compare_reader.py "$OUT/lua-$program.cpython.jsonl" "$OUT/lua-$program.txt" >/dev/null \
    || fail "$program.pyb: CPython and the C reader disagree"
  samples=$(sed -n 's/.*: \([0-9]*\) samples.*/\1/p' "$LUA_OUT/$program.log")
  [ "$(grep -c '^S ' "$OUT/lua-$program.txt")" = "$samples" ] || fail "$program: the profiler wrote $samples samples, the file holds others"
done
log "the Lua profiles: CPython 3.15.2 reads every sample as our reader does; the Lua functions are in the collapsed stacks and flame graphs"
log "all passed"
