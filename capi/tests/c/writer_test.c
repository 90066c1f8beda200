/* writer_test: writes a pseudo-random but fixed stream of thread samples through the C API
 * (caller memory at an odd address, FILE* callbacks) and, beside it, the same stream as
 * CPython writer input (JSON lines: the writer's arguments, then one write_sample call per
 * line). scripts/capi.sh has `tachyon encode` (the Rust writer) write the JSON lines and
 * compares the two files byte for byte.
 *
 * usage: writer_test OUT.pyb OUT.jsonl native|little|big none|zstd [SEED]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tachyon.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next(uint32_t bound) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % bound);
}

static int fail(const char *what, int status, tachyon_writer *w) {
    fprintf(stderr, "writer_test: %s: %s (%s)\n", what, tachyon_status_message(status),
            w ? tachyon_writer_last_error(w) : "");
    return 1;
}

/* The sink: a FILE*. */
static ptrdiff_t file_write(void *ctx, const uint8_t *data, size_t len) {
    size_t n = fwrite(data, 1, len, (FILE *)ctx);
    return n == 0 ? -1 : (ptrdiff_t)n;
}
static int file_seek(void *ctx, uint64_t offset) {
    return fseek((FILE *)ctx, (long)offset, SEEK_SET) == 0 ? 0 : -1;
}
static int file_flush(void *ctx) { return fflush((FILE *)ctx) == 0 ? 0 : -1; }

/* A JSON string (the names are valid UTF-8). */
static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

#define FRAMES 48
#define MAX_DEPTH 300
static tachyon_frame pool[FRAMES];
static char names[FRAMES][2][400];

static void make_pool(void) {
    static const char *files[] = {"/app/main.py", "/app/util.py", "<frozen importlib._bootstrap>",
                                  "/srv/caf\xc3\xa9/\xe6\xb5\x8b\xe8\xaf\x95.py", "", "/a \"quoted\" \\ path.lua"};
    static const int opcodes[] = {-1, 0, 100, 254, 255, 300, -7};
    for (int i = 0; i < FRAMES; i++) {
        snprintf(names[i][0], sizeof names[i][0], "%s", files[i % 6]);
        if (i == 5) { /* a long name */
            memset(names[i][1], 'x', 350);
            names[i][1][350] = 0;
        } else {
            snprintf(names[i][1], sizeof names[i][1], "%s_%d", i % 3 ? "func" : "r\xc3\xa9" "cursion", i / 2);
        }
        tachyon_frame *f = &pool[i];
        f->filename = names[i][0];
        f->filename_len = TACHYON_NUL_TERMINATED;
        f->funcname = names[i][1];
        f->funcname_len = strlen(names[i][1]); /* both ways of giving a length */
        switch (i % 4) {
        case 0: f->lineno = 10 + i; f->end_lineno = 12 + i; f->col = 4; f->end_col = 20; break;
        case 1: f->lineno = 7 * i; f->end_lineno = -1; f->col = -1; f->end_col = -1; break;
        case 2: f->lineno = f->end_lineno = f->col = f->end_col = -1; break;
        default: f->lineno = 100000 + i; f->end_lineno = 99990 + i; f->col = 0; f->end_col = 0; break;
        }
        f->opcode = opcodes[i % 7];
    }
}

static void json_frame(FILE *out, const tachyon_frame *f) {
    fputc('[', out);
    json_string(out, f->filename);
    fputc(',', out);
    json_string(out, f->funcname);
    fprintf(out, ",[%d,%d,%d,%d],", f->lineno, f->end_lineno, f->col, f->end_col);
    if (f->opcode == TACHYON_NO_OPCODE)
        fputs("null", out);
    else
        fprintf(out, "%d", f->opcode);
    fputc(']', out);
}

struct thread { uint64_t tid; uint32_t iid; int depth; tachyon_frame stack[MAX_DEPTH]; };

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: writer_test OUT.pyb OUT.jsonl native|little|big none|zstd [SEED]\n");
        return 2;
    }
    if (argc > 5) rng ^= strtoull(argv[5], NULL, 0);
    make_pool();
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.start_time_us = 1700000000000000ULL;
    o.sample_interval_us = 250;
    o.byte_order = !strcmp(argv[3], "little") ? TACHYON_BYTE_ORDER_LITTLE
                   : !strcmp(argv[3], "big")  ? TACHYON_BYTE_ORDER_BIG
                                              : TACHYON_BYTE_ORDER_NATIVE;
    o.compression = !strcmp(argv[4], "zstd") ? TACHYON_COMPRESSION_ZSTD : TACHYON_COMPRESSION_NONE;
    o.threads = 8;
    o.frames = 64;
    o.strings = 64;
    o.string_bytes = 8192;
    /* The zstd files also say what they measured: CPU time, every thread and native frames
     * (CPython's get_info() shows mode 1 and capture_features 3); the raw ones leave both
     * unknown (None). */
    if (o.compression == TACHYON_COMPRESSION_ZSTD) {
        o.mode = TACHYON_MODE_CPU;
        o.capture_features = TACHYON_CAPTURE_FEATURE_ALL_THREADS | TACHYON_CAPTURE_FEATURE_NATIVE;
    }

    size_t bytes = 0;
    int s = tachyon_writer_memory_size(&o, &bytes);
    if (s != TACHYON_OK) return fail("memory_size", s, NULL);
    unsigned char *memory = malloc(bytes + 1);
    FILE *file = fopen(argv[1], "wb");
    FILE *json = fopen(argv[2], "w");
    if (!memory || !file || !json) { perror("writer_test"); return 1; }
    tachyon_sink sink = {file, file_write, file_seek, file_flush};
    tachyon_writer *w = NULL;
    /* memory + 1: the library aligns what it places. */
    s = tachyon_writer_init(memory + 1, bytes, &o, &sink, &w);
    if (s != TACHYON_OK) return fail("init", s, NULL);

    fprintf(json, "{\"start_time_us\":%" PRIu64 ",\"sample_interval_us\":%" PRIu64
                  ",\"compression\":%u,\"mode\":%d,\"capture_features\":%d,"
                  "\"stats\":[12.5,3999.75,0.125,1.5]}\n",
            o.start_time_us, o.sample_interval_us, o.compression, o.mode, o.capture_features);

    static struct thread threads[5] = {
        {1, 0, 0, {{0}}}, {2, 0, 0, {{0}}}, {0xFFFFFFFFFFFFFFFFULL, 0, 0, {{0}}},
        {7, 1, 0, {{0}}}, {1, 1, 0, {{0}}}};
    uint64_t ts = o.start_time_us;
    for (int n = 0; n < 4000; n++) {
        struct thread *t = &threads[next(5)];
        switch (next(8)) {
        case 0: case 1: case 2: break; /* same stack: REPEAT runs */
        case 3: if (t->depth < MAX_DEPTH) t->stack[t->depth++] = pool[next(FRAMES)]; break;
        case 4: if (t->depth > 0) t->depth--; break;
        case 5: if (t->depth > 0) t->stack[t->depth - 1] = pool[next(FRAMES)]; break;
        case 6: t->depth = next(4) == 0 ? (int)next(MAX_DEPTH + 1) : (int)next(12);
                for (int i = 0; i < t->depth; i++) t->stack[i] = pool[next(FRAMES)];
                break;
        default: if (t->depth > 2) t->depth -= 2; t->stack[t->depth++] = pool[next(FRAMES)]; break;
        }
        /* Time mostly moves on; now and then it stands still or goes back. */
        uint32_t step = next(20);
        ts = step == 0 ? ts - 300 : ts + (step == 1 ? 0 : next(3000));
        uint8_t status = (uint8_t)next(4) == 0 ? (uint8_t)next(256) : 3;
        /* The stack is kept outermost first; the API takes it innermost first. */
        tachyon_frame inner[MAX_DEPTH];
        for (int i = 0; i < t->depth; i++) inner[i] = t->stack[t->depth - 1 - i];
        if (next(2)) {
            s = tachyon_writer_write_sample(w, ts, t->iid, t->tid, status, inner, (size_t)t->depth);
        } else {
            uint32_t ids[MAX_DEPTH];
            int kept = t->depth < 256 ? t->depth : 256; /* what the writer keeps */
            for (int i = 0; i < kept; i++) {
                s = tachyon_writer_intern_frame(w, &inner[i], &ids[i]);
                if (s != TACHYON_OK) return fail("intern_frame", s, w);
            }
            s = tachyon_writer_write_sample_ids(w, ts, t->iid, t->tid, status, ids, (size_t)t->depth);
        }
        if (s != TACHYON_OK) return fail("write_sample", s, w);
        fprintf(json, "{\"ts\":%" PRIu64 ",\"interpreters\":[{\"iid\":%u,\"threads\":[{\"tid\":%" PRIu64
                      ",\"status\":%u,\"frames\":[",
                ts, t->iid, t->tid, status);
        for (int i = 0; i < t->depth; i++) {
            if (i) fputc(',', json);
            json_frame(json, &inner[i]);
        }
        fputs("]}]}]}\n", json);
    }
    tachyon_stats st = {12.5, 3999.75, 0.125, 1.5, 1, 1};
    s = tachyon_writer_set_stats(w, &st);
    if (s != TACHYON_OK) return fail("set_stats", s, w);
    tachyon_writer_counts c;
    if ((s = tachyon_writer_get_counts(w, &c)) != TACHYON_OK) return fail("counts", s, w);
    uint64_t size = 0;
    s = tachyon_writer_finalize(w, &size);
    if (s != TACHYON_OK) return fail("finalize", s, w);
    if ((s = tachyon_writer_close(w)) != TACHYON_OK) return fail("close", s, NULL);
    fclose(file);
    fclose(json);
    free(memory);
    printf("%s: %" PRIu64 " samples, %zu threads, %zu frames, %" PRIu64 " bytes\n", argv[1], c.samples,
           c.threads, c.frames, size);
    return 0;
}
