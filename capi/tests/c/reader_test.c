/* reader_test: prints what the C API's reader finds in a Tachyon file, one line for the
 * metadata and one per sample and frame (names in hex), for scripts/capi_compare.py to set
 * beside CPython's own reading of the same file (the vectors' *.expected.jsonl).
 *
 * usage: reader_test FILE [memory]   (memory: read the file into a buffer first)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tachyon.h"

static void hex(const char *p, size_t n) {
    if (n == 0) fputc('-', stdout);
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)p[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: reader_test FILE [memory]\n");
        return 2;
    }
    tachyon_reader *r = NULL;
    int s;
    unsigned char *buffer = NULL;
    if (argc > 2) {
        FILE *f = fopen(argv[1], "rb");
        if (!f) { perror(argv[1]); return 1; }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        buffer = malloc(len > 0 ? (size_t)len : 1);
        if (!buffer || fread(buffer, 1, (size_t)len, f) != (size_t)len) { perror(argv[1]); return 1; }
        fclose(f);
        s = tachyon_reader_open_memory(buffer, (size_t)len, &r);
        free(buffer); /* the reader has its own copy */
    } else {
        s = tachyon_reader_open_file(argv[1], &r);
    }
    if (s != TACHYON_OK) {
        printf("E %d %s\n", s, tachyon_last_error());
        return 0;
    }
    tachyon_info info;
    if ((s = tachyon_reader_info(r, &info)) != TACHYON_OK) return 1;
    printf("M %u.%u.%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %u %u %u\n", info.python_version[0],
           info.python_version[1], info.python_version[2], info.start_time_us, info.sample_interval_us,
           info.sample_count, info.thread_count, info.string_count, info.frame_count, info.compression);
    tachyon_sample sample;
    while ((s = tachyon_reader_next_sample(r, &sample)) == TACHYON_OK) {
        printf("S %" PRIu64 " %u %" PRIu64 " %u %zu\n", sample.timestamp_us, sample.interpreter_id,
               sample.thread_id, sample.status, sample.frame_count);
        for (size_t i = 0; i < sample.frame_count; i++) {
            tachyon_frame f;
            if ((s = tachyon_reader_frame(r, sample.frame_ids[i], &f)) != TACHYON_OK) {
                printf("E %d %s\n", s, tachyon_reader_last_error(r));
                return 1;
            }
            fputs("F ", stdout);
            hex(f.filename, f.filename_len);
            fputc(' ', stdout);
            hex(f.funcname, f.funcname_len);
            printf(" %d %d %d %d %d\n", f.lineno, f.end_lineno, f.col, f.end_col, f.opcode);
        }
    }
    if (s != TACHYON_END) printf("E %d %s\n", s, tachyon_reader_last_error(r));
    if (tachyon_reader_close(r) != TACHYON_OK) return 1;
    return 0;
}
