/* native_lib: the library native_addresses profiles, built as a runtime's dependencies often
 * are (scripts/capture.sh): -O2 with -fomit-frame-pointer, the work in static functions, a
 * helper inlined into its caller. Only native_lib_run is exported, so dladdr could name
 * nothing else; `tachyon symbolize` names all of it from the ELF symbol table and DWARF.
 *
 * The PROBE marks name the lines capture_check.py expects for the probe's sample: the probe
 * is called from inside the inlined helper, so its return address is in hash_block's code
 * and DWARF says mix_round was inlined there.
 */
#include <stddef.h>
#include <stdint.h>

typedef void (*native_lib_probe)(void);

uint64_t native_lib_run(uint64_t *data, size_t blocks, native_lib_probe probe);

static inline __attribute__((always_inline)) uint64_t mix_round(uint64_t h, uint64_t v, native_lib_probe probe) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    if (probe) probe(); /* PROBE: mix_round */
    return h * 0xff51afd7ed558ccdULL;
}

static __attribute__((noinline)) uint64_t hash_block(const uint64_t *block, size_t n, native_lib_probe probe) {
    uint64_t h = n;
    for (size_t i = 0; i < n; i++) {
        h = mix_round(h, block[i], i == 0 ? probe : NULL); /* PROBE: hash_block */
    }
    return h;
}

static __attribute__((noinline)) uint64_t walk_blocks(uint64_t *data, size_t blocks, native_lib_probe probe) {
    uint64_t sum = 0;
    for (size_t b = 0; b < blocks; b++) {
        sum += hash_block(data + b * 64, 64, b == 0 ? probe : NULL); /* PROBE: walk_blocks */
        data[b * 64] ^= sum;
    }
    return sum;
}

uint64_t native_lib_run(uint64_t *data, size_t blocks, native_lib_probe probe) {
    uint64_t sum = walk_blocks(data, blocks, probe); /* PROBE: native_lib_run */
    return sum ^ blocks;
}
