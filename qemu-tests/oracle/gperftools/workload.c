/* A CPU-bound workload with known functions for recording real gperftools CPU profiles:
 * plain calls, recursion, an always-inlined helper (inline frames in DWARF), and a callback
 * called from a shared library of ours (libsort.c: frames of a second mapping between two of
 * the main binary's). No libc call on the hot paths, so every sampled frame but the start-up
 * ones is in a binary with symbols. Work is counted in rounds, not timed, so that no sample
 * lands in the vDSO's clock.
 *
 * Build: cc -O1 -g -fno-omit-frame-pointer -fPIC -shared -o libsort.so libsort.c
 *        cc -O1 -g -fno-omit-frame-pointer -o workload workload.c -L. -lsort -lprofiler \
 *           -Wl,-rpath,'$ORIGIN'
 * Run:   ./workload OUT.prof [ROUNDS]   (profiles itself with ProfilerStart/Stop)
 */
#include <gperftools/profiler.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;

static inline __attribute__((always_inline)) unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

__attribute__((noinline)) unsigned hash_block(unsigned seed, int rounds) {
  unsigned h = seed;
  for (int i = 0; i < rounds; i++) h = mix(h + (unsigned)i);
  return h;
}

__attribute__((noinline)) unsigned recurse(int depth, unsigned seed) {
  if (depth == 0) return hash_block(seed, 4000);
  unsigned r = recurse(depth - 1, seed * 31U + (unsigned)depth);
  return r ^ (unsigned)depth;
}

__attribute__((noinline)) double series(int terms) {
  double s = 0.0;
  for (int k = 1; k <= terms; k++) s += (k & 1 ? 1.0 : -1.0) / (2.0 * k - 1.0);
  return s;
}

void lib_sort(unsigned *keys, unsigned *tmp, size_t n, int (*cmp)(unsigned, unsigned));

__attribute__((noinline)) int compare_keys(unsigned a, unsigned b) {
  unsigned x = mix(a), y = mix(b);
  return (x > y) - (x < y);
}

__attribute__((noinline)) void sort_keys(unsigned *keys, unsigned *tmp, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) keys[i] = mix(seed + (unsigned)i);
  lib_sort(keys, tmp, n, compare_keys);
}

__attribute__((noinline)) void middle(unsigned *keys, unsigned *tmp, unsigned seed) {
  sink += recurse(12, seed);
  sink += (unsigned)(series(20000) * 1000.0);
  sort_keys(keys, tmp, 2048, seed);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s OUT.prof [ROUNDS]\n", argv[0]);
    return 2;
  }
  unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 2000;
  static unsigned keys[2048], tmp[2048];
  if (!ProfilerStart(argv[1])) {
    fprintf(stderr, "ProfilerStart(%s) failed\n", argv[1]);
    return 1;
  }
  for (unsigned round = 0; round < rounds; round++) {
    middle(keys, tmp, round);
    sink += hash_block(round, 20000);
  }
  ProfilerStop();
  printf("sink=%u\n", sink);
  return 0;
}
