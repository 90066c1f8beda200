/* firmware_link: a C program for a Cortex-M4 with no C library and no heap, linked against
 * the no_std static library (scripts/capi.sh builds it with clang for thumbv7em-none-eabihf
 * and links it with arm-none-eabi-ld): proof that a C firmware can use the writer. The
 * profile goes into a static buffer through the callbacks; the writer's memory is a static
 * array sized at run time by tachyon_writer_memory_size.
 */
#include "tachyon.h"

static unsigned char file[16384];
static size_t file_pos, file_len;
static unsigned char memory[160 * 1024];

static ptrdiff_t ram_write(void *ctx, const uint8_t *data, size_t len) {
    (void)ctx;
    if (file_pos + len > sizeof file) return -1;
    for (size_t i = 0; i < len; i++) file[file_pos + i] = data[i];
    file_pos += len;
    if (file_pos > file_len) file_len = file_pos;
    return (ptrdiff_t)len;
}

static int ram_seek(void *ctx, uint64_t offset) {
    (void)ctx;
    if (offset > sizeof file) return -1;
    file_pos = (size_t)offset;
    return 0;
}

int main(void) {
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.strings = o.frames = 32;
    o.string_bytes = 1024;
    o.threads = 1;
    o.rle_budget = 64; /* a small REPEAT budget saves RAM; the file stays valid */
    size_t bytes = 0;
    if (tachyon_writer_memory_size(&o, &bytes) != TACHYON_OK || bytes > sizeof memory) return 1;
    tachyon_sink sink = {0, ram_write, ram_seek, 0};
    tachyon_writer *w = 0;
    if (tachyon_writer_init(memory, sizeof memory, &o, &sink, &w) != TACHYON_OK) return 2;
    tachyon_frame stack[2] = {
        {"fw.c", TACHYON_NUL_TERMINATED, "leaf", TACHYON_NUL_TERMINATED, 12, 12, -1, -1, TACHYON_NO_OPCODE},
        {"fw.c", TACHYON_NUL_TERMINATED, "main", TACHYON_NUL_TERMINATED, 30, 30, -1, -1, TACHYON_NO_OPCODE},
    };
    for (uint64_t t = 0; t < 100; t++)
        if (tachyon_writer_write_sample(w, 1000 * t, 0, 1, 3, stack, 1 + (size_t)(t % 2)) != TACHYON_OK) return 3;
    uint64_t size = 0;
    if (tachyon_writer_finalize(w, &size) != TACHYON_OK || size != file_len) return 4;
    return tachyon_writer_close(w) == TACHYON_OK ? 0 : 5;
}
