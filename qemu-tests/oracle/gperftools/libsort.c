/* A shared library of the workload (built with symbols and debug info): a recursive merge
 * sort that calls back into the main binary, so stacks cross a second mapping and back. */
#include <stddef.h>
#include <string.h>

typedef int (*compare_fn)(unsigned, unsigned);

static void merge_runs(unsigned *keys, unsigned *tmp, size_t mid, size_t n, compare_fn cmp) {
  size_t i = 0, j = mid, k = 0;
  while (i < mid && j < n) tmp[k++] = cmp(keys[i], keys[j]) <= 0 ? keys[i++] : keys[j++];
  while (i < mid) tmp[k++] = keys[i++];
  while (j < n) tmp[k++] = keys[j++];
  for (k = 0; k < n; k++) keys[k] = tmp[k];
}

/* Static, so that GCC makes no `.localalias` of it for the recursive calls (google-pprof
 * would name the frames by that alias, from nm, where DWARF says `sort_range`). */
static __attribute__((noinline)) void sort_range(unsigned *keys, unsigned *tmp, size_t n, compare_fn cmp) {
  if (n < 2) return;
  size_t mid = n / 2;
  sort_range(keys, tmp, mid, cmp);
  sort_range(keys + mid, tmp, n - mid, cmp);
  merge_runs(keys, tmp, mid, n, cmp);
}

void lib_sort(unsigned *keys, unsigned *tmp, size_t n, compare_fn cmp) { sort_range(keys, tmp, n, cmp); }
