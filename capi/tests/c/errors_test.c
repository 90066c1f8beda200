/* errors_test: every documented error of the C API, each provoked and checked — NULL
 * pointers, bad options, too little memory, wrong order of calls, double finalize and
 * close, closed and foreign handles, full tables, unknown frame ids, failing sinks (after
 * which finalize still makes a valid file of the accepted samples, read back here), bad and
 * truncated files for the reader. Prints one line per check group; exit status 1 at the
 * first failed check.
 *
 * usage: errors_test SCRATCH_DIR
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tachyon.h"

static int checks = 0;
#define CHECK(expr)                                                                          \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(expr)) {                                                                       \
            fprintf(stderr, "errors_test: %s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define EXPECT(call, status) CHECK((call) == (status))

/* A sink into a growable buffer that can be told to fail: the k-th write (or seek) returns
 * an error, or takes only part of its buffer. */
struct memsink {
    unsigned char *data;
    size_t len, cap, pos;
    int writes, seeks;
    int fail_write_at, fail_seek_at; /* 1-based call numbers; 0 never */
    int short_writes;                /* non-zero: every write takes at most 7 bytes */
};

static ptrdiff_t mem_write(void *ctx, const uint8_t *p, size_t n) {
    struct memsink *m = ctx;
    if (++m->writes == m->fail_write_at) return -5;
    if (m->short_writes && n > 7) n = 7;
    if (m->pos + n > m->cap) {
        size_t cap = (m->pos + n) * 2;
        unsigned char *d = realloc(m->data, cap);
        if (!d) return -1;
        memset(d + m->cap, 0, cap - m->cap);
        m->data = d;
        m->cap = cap;
    }
    memcpy(m->data + m->pos, p, n);
    m->pos += n;
    if (m->pos > m->len) m->len = m->pos;
    return (ptrdiff_t)n;
}

static int mem_seek(void *ctx, uint64_t offset) {
    struct memsink *m = ctx;
    if (++m->seeks == m->fail_seek_at) return -3;
    m->pos = (size_t)offset;
    return 0;
}

static tachyon_frame frame(const char *file, const char *func, int line) {
    tachyon_frame f = {file, TACHYON_NUL_TERMINATED, func, TACHYON_NUL_TERMINATED, line, line, -1, -1,
                       TACHYON_NO_OPCODE};
    return f;
}

static tachyon_writer_options small_options(void) {
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.threads = 2;
    o.frames = 4;
    o.strings = 8;
    o.string_bytes = 256;
    return o;
}

/* Counts the samples of a file with the reader; -1 if it does not read whole. */
static long samples_in(const unsigned char *data, size_t len) {
    tachyon_reader *r = NULL;
    if (tachyon_reader_open_memory(data, len, &r) != TACHYON_OK) return -1;
    tachyon_sample s;
    long n = 0;
    int status;
    while ((status = tachyon_reader_next_sample(r, &s)) == TACHYON_OK) n++;
    tachyon_reader_close(r);
    return status == TACHYON_END ? n : -1;
}

static void status_messages(void) {
    for (int s = -15; s <= 1; s++) {
        const char *m = tachyon_status_message(s);
        CHECK(m != NULL && strlen(m) > 0);
        CHECK(strcmp(m, "unknown status code") != 0);
    }
    CHECK(strcmp(tachyon_status_message(-99), "unknown status code") == 0);
    CHECK(strcmp(tachyon_status_message(TACHYON_E_CLOSED), "the handle was closed") == 0);
    CHECK(strlen(tachyon_version()) >= 5);
    printf("status messages: every code named, unknown ones said to be unknown\n");
}

static void options_and_memory(void) {
    tachyon_writer_options o = small_options();
    size_t bytes = 0;
    EXPECT(tachyon_writer_options_init(NULL), TACHYON_E_NULL);
    EXPECT(tachyon_writer_memory_size(NULL, &bytes), TACHYON_E_NULL);
    EXPECT(tachyon_writer_memory_size(&o, NULL), TACHYON_E_NULL);
    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    CHECK(bytes > 0);

    tachyon_writer_options bad = o;
    bad.frames = 0;
    EXPECT(tachyon_writer_memory_size(&bad, &bytes), TACHYON_E_ARGUMENT);
    bad = o;
    bad.rle_budget = 5; /* below one REPEAT entry */
    EXPECT(tachyon_writer_memory_size(&bad, &bytes), TACHYON_E_ARGUMENT);
    bad = o;
    bad.compression = 9;
    EXPECT(tachyon_writer_memory_size(&bad, &bytes), TACHYON_E_ARGUMENT);
    bad = o;
    bad.threads = SIZE_MAX / 4; /* beyond the address space */
    EXPECT(tachyon_writer_memory_size(&bad, &bytes), TACHYON_E_ARGUMENT);

    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    unsigned char *memory = malloc(bytes + 1);
    struct memsink m = {0};
    tachyon_sink sink = {&m, mem_write, mem_seek, NULL};
    tachyon_writer *w = (tachyon_writer *)1;
    /* malloc's memory is aligned, so memory + 1 needs all the alignment slack the size
     * includes: one byte less is too little, the size itself enough. */
    EXPECT(tachyon_writer_init(memory + 1, bytes - 1, &o, &sink, &w), TACHYON_E_MEMORY);
    CHECK(w == NULL); /* cleared on failure */
    EXPECT(tachyon_writer_init(memory + 1, bytes, &o, &sink, &w), TACHYON_OK);
    EXPECT(tachyon_writer_close(w), TACHYON_OK);
    EXPECT(tachyon_writer_init(NULL, bytes, &o, &sink, &w), TACHYON_E_NULL);
    EXPECT(tachyon_writer_init(memory, bytes, NULL, &sink, &w), TACHYON_E_NULL);
    EXPECT(tachyon_writer_init(memory, bytes, &o, NULL, &w), TACHYON_E_NULL);
    EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, NULL), TACHYON_E_NULL);
    tachyon_sink no_seek = {&m, mem_write, NULL, NULL};
    EXPECT(tachyon_writer_init(memory, bytes, &o, &no_seek, &w), TACHYON_E_NULL);
    bad = o;
    bad.byte_order = 7;
    EXPECT(tachyon_writer_init(memory, bytes, &bad, &sink, &w), TACHYON_E_ARGUMENT);
    EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, &w), TACHYON_OK);
    CHECK(w != NULL);
    EXPECT(tachyon_writer_close(w), TACHYON_OK);
    free(memory);
    free(m.data);
    printf("options and memory: NULLs, zero and overflowing capacities, bad byte order and compression, one byte too few\n");
}

static void handles_and_order(void) {
    tachyon_writer_options o = small_options();
    size_t bytes;
    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    unsigned char *memory = malloc(bytes);
    struct memsink m = {0};
    tachyon_sink sink = {&m, mem_write, mem_seek, NULL};
    tachyon_writer *w = NULL;
    EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, &w), TACHYON_OK);

    tachyon_frame f = frame("main.lua", "main", 1);
    uint32_t id;
    tachyon_writer_counts c;
    EXPECT(tachyon_writer_write_sample(NULL, 1, 0, 1, 0, &f, 1), TACHYON_E_NULL);
    EXPECT(tachyon_writer_write_sample(w, 1, 0, 1, 0, NULL, 1), TACHYON_E_NULL);
    CHECK(strstr(tachyon_writer_last_error(w), "NULL") != NULL);
    EXPECT(tachyon_writer_write_sample(w, 1, 0, 1, 0, NULL, 0), TACHYON_OK); /* an empty stack */
    EXPECT(tachyon_writer_intern_frame(w, NULL, &id), TACHYON_E_NULL);
    EXPECT(tachyon_writer_intern_frame(w, &f, NULL), TACHYON_E_NULL);
    tachyon_frame nameless = f;
    nameless.funcname = NULL;
    nameless.funcname_len = 3;
    EXPECT(tachyon_writer_intern_frame(w, &nameless, &id), TACHYON_E_NULL);
    EXPECT(tachyon_writer_write_sample(w, 2, 0, 1, 0, &nameless, 1), TACHYON_E_NULL);
    nameless.funcname_len = 0; /* NULL with length 0 is the empty name */
    EXPECT(tachyon_writer_intern_frame(w, &nameless, &id), TACHYON_OK);
    EXPECT(tachyon_writer_intern_frame(w, &f, &id), TACHYON_OK);
    EXPECT(tachyon_writer_write_sample_ids(w, 3, 0, 1, 0, NULL, 2), TACHYON_E_NULL);
    uint32_t unknown = 1000;
    EXPECT(tachyon_writer_write_sample_ids(w, 3, 0, 1, 0, &unknown, 1), TACHYON_E_UNKNOWN_FRAME);
    CHECK(strstr(tachyon_writer_last_error(w), "1000") != NULL);
    EXPECT(tachyon_writer_write_sample_ids(w, 3, 0, 1, 0, &id, 1), TACHYON_OK);
    EXPECT(tachyon_writer_set_stats(w, NULL), TACHYON_E_NULL);
    tachyon_stats bad_stats = {NAN, 1.0, 0, 0, 0, 0};
    EXPECT(tachyon_writer_set_stats(w, &bad_stats), TACHYON_E_ARGUMENT);
    tachyon_stats negative = {1.0, 1.0, -2.0, 0, 1, 0};
    EXPECT(tachyon_writer_set_stats(w, &negative), TACHYON_E_ARGUMENT);
    EXPECT(tachyon_writer_get_counts(w, NULL), TACHYON_E_NULL);
    EXPECT(tachyon_writer_get_counts(w, &c), TACHYON_OK);
    CHECK(c.samples == 2 && c.threads == 1 && c.frames == 2 && c.limit_reached == 0);

    uint64_t size = 0;
    EXPECT(tachyon_writer_finalize(NULL, &size), TACHYON_E_NULL);
    EXPECT(tachyon_writer_finalize(w, &size), TACHYON_OK);
    CHECK(size == m.len);
    EXPECT(tachyon_writer_finalize(w, &size), TACHYON_E_FINALIZED); /* double finalize */
    EXPECT(tachyon_writer_write_sample(w, 4, 0, 1, 0, &f, 1), TACHYON_E_FINALIZED);
    EXPECT(tachyon_writer_write_sample_ids(w, 4, 0, 1, 0, &id, 1), TACHYON_E_FINALIZED);
    EXPECT(tachyon_writer_intern_frame(w, &f, &id), TACHYON_E_FINALIZED);
    EXPECT(tachyon_writer_get_counts(w, &c), TACHYON_OK); /* read-only still works */
    CHECK(c.samples == 2);
    CHECK(samples_in(m.data, m.len) == 2);
    EXPECT(tachyon_writer_close(w), TACHYON_OK);
    EXPECT(tachyon_writer_close(w), TACHYON_E_CLOSED); /* double close */
    EXPECT(tachyon_writer_write_sample(w, 5, 0, 1, 0, &f, 1), TACHYON_E_CLOSED);
    EXPECT(tachyon_writer_finalize(w, NULL), TACHYON_E_CLOSED);
    EXPECT(tachyon_writer_get_counts(w, &c), TACHYON_E_CLOSED);
    CHECK(strcmp(tachyon_writer_last_error(w), tachyon_status_message(TACHYON_E_CLOSED)) == 0);

    /* Memory that never held a writer, and a misaligned pointer. */
    uint64_t zeros[64] = {0};
    EXPECT(tachyon_writer_write_sample((tachyon_writer *)zeros, 1, 0, 1, 0, &f, 1), TACHYON_E_BAD_HANDLE);
    EXPECT(tachyon_writer_close((tachyon_writer *)zeros), TACHYON_E_BAD_HANDLE);
    EXPECT(tachyon_writer_finalize((tachyon_writer *)((char *)zeros + 1), NULL), TACHYON_E_BAD_HANDLE);
    free(memory);
    free(m.data);
    printf("handles and order: NULL arguments, unknown ids, bad stats, calls after finalize, double finalize and close, closed and foreign handles\n");
}

static void full_tables(void) {
    tachyon_writer_options o = small_options();
    o.frames = 2;
    o.threads = 1;
    size_t bytes;
    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    unsigned char *memory = malloc(bytes);
    struct memsink m = {0};
    tachyon_sink sink = {&m, mem_write, mem_seek, NULL};
    tachyon_writer *w = NULL;
    EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, &w), TACHYON_OK);
    tachyon_frame a = frame("a.lua", "a", 1), b = frame("b.lua", "b", 2), c3 = frame("c.lua", "c", 3);
    tachyon_frame ab[2] = {a, b};
    EXPECT(tachyon_writer_write_sample(w, 10, 0, 1, 0, ab, 2), TACHYON_OK);
    EXPECT(tachyon_writer_write_sample(w, 20, 0, 1, 0, &c3, 1), TACHYON_E_CAPACITY); /* a third frame */
    CHECK(strstr(tachyon_writer_last_error(w), "Frames") != NULL);
    EXPECT(tachyon_writer_write_sample(w, 30, 0, 2, 0, &a, 1), TACHYON_E_CAPACITY); /* a second thread */
    EXPECT(tachyon_writer_write_sample(w, 40, 0, 1, 0, &a, 1), TACHYON_OK); /* still usable */
    tachyon_writer_counts c;
    EXPECT(tachyon_writer_get_counts(w, &c), TACHYON_OK);
    CHECK(c.samples == 2 && c.limit_reached == 1);
    EXPECT(tachyon_writer_finalize(w, NULL), TACHYON_OK);
    EXPECT(tachyon_writer_close(w), TACHYON_OK);
    CHECK(samples_in(m.data, m.len) == 2);
    free(memory);
    free(m.data);
    printf("full tables: the refused samples are left out, the file holds the two accepted\n");
}

/* For every k: the k-th write fails (or the k-th seek); the call reports TACHYON_E_IO, the
 * writer goes on, and finalize (retried after its own failures) gives a file of exactly the
 * accepted samples. Also with a sink that takes 7 bytes per call. */
static void failing_sinks(int compression) {
    tachyon_writer_options o = small_options();
    o.compression = (uint32_t)compression;
    size_t bytes;
    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    unsigned char *memory = malloc(bytes);
    tachyon_frame fs[3] = {frame("x.lua", "leaf", 3), frame("x.lua", "mid", 2), frame("x.lua", "main", 1)};
    int runs = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (int k = 1; k <= 40; k++) {
            struct memsink m = {0};
            if (mode == 0) m.fail_write_at = k;
            if (mode == 1) m.fail_seek_at = k;
            if (mode == 2) { m.short_writes = 1; m.fail_write_at = k; }
            tachyon_sink sink = {&m, mem_write, mem_seek, NULL};
            tachyon_writer *w = NULL;
            EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, &w), TACHYON_OK);
            long accepted = 0;
            for (int n = 0; n < 600; n++) {
                size_t depth = 1 + (size_t)(n % 3);
                int s = tachyon_writer_write_sample(w, 1000u * (uint64_t)n, 0, 1 + (uint64_t)(n % 2), 0,
                                                    fs + 3 - depth, depth);
                CHECK(s == TACHYON_OK || s == TACHYON_E_IO);
                if (s == TACHYON_OK) accepted++;
            }
            int s, tries = 0;
            while ((s = tachyon_writer_finalize(w, NULL)) == TACHYON_E_IO) CHECK(++tries < 5);
            EXPECT(s, TACHYON_OK);
            EXPECT(tachyon_writer_close(w), TACHYON_OK);
            CHECK(samples_in(m.data, m.len) == accepted);
            free(m.data);
            runs++;
        }
    }
    free(memory);
    printf("failing sinks (%s): %d runs, the k-th write or seek failing or writes cut short; every file holds exactly the accepted samples\n",
           compression ? "zstd" : "raw", runs);
}

static void reader_errors(const char *dir) {
    tachyon_reader *r = (tachyon_reader *)1;
    EXPECT(tachyon_reader_open_file(NULL, &r), TACHYON_E_NULL);
    CHECK(r == NULL);
    EXPECT(tachyon_reader_open_file("x", NULL), TACHYON_E_NULL);
    EXPECT(tachyon_reader_open_memory(NULL, 5, &r), TACHYON_E_NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/does/not/exist.pyb", dir);
    EXPECT(tachyon_reader_open_file(path, &r), TACHYON_E_IO);
    CHECK(strstr(tachyon_last_error(), "exist.pyb") != NULL);

    /* A valid file to damage: two samples. */
    tachyon_writer_options o = small_options();
    size_t bytes;
    EXPECT(tachyon_writer_memory_size(&o, &bytes), TACHYON_OK);
    unsigned char *memory = malloc(bytes);
    struct memsink m = {0};
    tachyon_sink sink = {&m, mem_write, mem_seek, NULL};
    tachyon_writer *w = NULL;
    EXPECT(tachyon_writer_init(memory, bytes, &o, &sink, &w), TACHYON_OK);
    tachyon_frame f = frame("main.lua", "main", 1);
    EXPECT(tachyon_writer_write_sample(w, 10, 0, 1, 0, &f, 1), TACHYON_OK);
    EXPECT(tachyon_writer_write_sample(w, 20, 0, 1, 0, &f, 1), TACHYON_OK);
    EXPECT(tachyon_writer_finalize(w, NULL), TACHYON_OK);
    EXPECT(tachyon_writer_close(w), TACHYON_OK);
    free(memory);

    unsigned char garbage[100];
    memset(garbage, 0x41, sizeof garbage);
    EXPECT(tachyon_reader_open_memory(garbage, sizeof garbage, &r), TACHYON_E_FORMAT);
    CHECK(strstr(tachyon_last_error(), "offset") != NULL); /* names where */
    /* A cut file breaks CPython's open-time rules (its size, its footer): a format error. */
    EXPECT(tachyon_reader_open_memory(m.data, 10, &r), TACHYON_E_FORMAT);
    CHECK(strstr(tachyon_last_error(), "too small") != NULL);
    /* Every truncation is an error, at open or while reading, never a crash. */
    for (size_t cut = 0; cut < m.len; cut++) {
        int st = tachyon_reader_open_memory(m.data, cut, &r);
        if (st == TACHYON_OK) {
            tachyon_sample t;
            while ((st = tachyon_reader_next_sample(r, &t)) == TACHYON_OK) {}
            EXPECT(tachyon_reader_close(r), TACHYON_OK);
        }
        CHECK(st == TACHYON_E_FORMAT || st == TACHYON_E_TRUNCATED);
    }
    EXPECT(tachyon_reader_open_memory(m.data, m.len, &r), TACHYON_OK);
    tachyon_info info;
    tachyon_sample s;
    tachyon_frame out;
    EXPECT(tachyon_reader_info(r, NULL), TACHYON_E_NULL);
    EXPECT(tachyon_reader_info(r, &info), TACHYON_OK);
    CHECK(info.sample_count == 2 && info.frame_count == 1 && info.file_size == m.len);
    EXPECT(tachyon_reader_next_sample(r, NULL), TACHYON_E_NULL);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_OK);
    CHECK(s.timestamp_us == 10 && s.frame_count == 1);
    EXPECT(tachyon_reader_frame(r, s.frame_ids[0], NULL), TACHYON_E_NULL);
    EXPECT(tachyon_reader_frame(r, s.frame_ids[0], &out), TACHYON_OK);
    CHECK(out.funcname_len == 4 && memcmp(out.funcname, "main", 4) == 0 && out.lineno == 1);
    EXPECT(tachyon_reader_frame(r, 7, &out), TACHYON_E_ARGUMENT);
    CHECK(strstr(tachyon_reader_last_error(r), "7") != NULL);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_OK);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_END);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_END); /* stays at the end */
    EXPECT(tachyon_reader_close(r), TACHYON_OK);
    EXPECT(tachyon_reader_close(r), TACHYON_E_CLOSED);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_E_CLOSED);
    EXPECT(tachyon_reader_info(r, &info), TACHYON_E_CLOSED);
    EXPECT(tachyon_reader_close(NULL), TACHYON_E_NULL);
    uint64_t zeros[64] = {0};
    EXPECT(tachyon_reader_next_sample((tachyon_reader *)zeros, &s), TACHYON_E_BAD_HANDLE);

    /* Damage inside the sample region: a format error at a named offset, or samples. Each
     * byte after the header set to 0xFF in turn. */
    int errors = 0;
    for (size_t i = 64; i < m.len; i++) {
        unsigned char *copy = malloc(m.len);
        memcpy(copy, m.data, m.len);
        copy[i] = 0xFF;
        int st = tachyon_reader_open_memory(copy, m.len, &r);
        free(copy);
        if (st != TACHYON_OK) {
            CHECK(st == TACHYON_E_FORMAT || st == TACHYON_E_TRUNCATED || st == TACHYON_E_CAPACITY);
            errors++;
            continue;
        }
        while ((st = tachyon_reader_next_sample(r, &s)) == TACHYON_OK) {
            for (size_t j = 0; j < s.frame_count; j++) CHECK(tachyon_reader_frame(r, s.frame_ids[j], &out) == TACHYON_OK);
        }
        if (st != TACHYON_END) {
            CHECK(st == TACHYON_E_FORMAT || st == TACHYON_E_TRUNCATED);
            CHECK(strstr(tachyon_reader_last_error(r), "offset") != NULL);
            errors++;
        }
        EXPECT(tachyon_reader_close(r), TACHYON_OK);
    }
    CHECK(errors > 0);
    free(m.data);
    printf("reader: NULLs, a missing file, garbage, every truncation, %d damaged bytes refused naming the offset, end repeated, double close, closed and foreign handles\n",
           errors);

    /* The std writer: a path that cannot be created. */
    tachyon_writer *fw = (tachyon_writer *)1;
    EXPECT(tachyon_writer_open_file(path, &o, &fw), TACHYON_E_IO);
    CHECK(fw == NULL && strstr(tachyon_last_error(), "exist.pyb") != NULL);
    snprintf(path, sizeof path, "%s/file-writer.pyb", dir);
    EXPECT(tachyon_writer_open_file(path, NULL, &fw), TACHYON_E_NULL);
    EXPECT(tachyon_writer_open_file(path, &o, &fw), TACHYON_OK);
    EXPECT(tachyon_writer_write_sample(fw, 10, 0, 1, 0, &f, 1), TACHYON_OK);
    EXPECT(tachyon_writer_finalize(fw, NULL), TACHYON_OK);
    EXPECT(tachyon_writer_close(fw), TACHYON_OK);
    EXPECT(tachyon_writer_close(fw), TACHYON_E_CLOSED); /* freed, and known to be closed */
    EXPECT(tachyon_reader_open_file(path, &r), TACHYON_OK);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_OK);
    EXPECT(tachyon_reader_next_sample(r, &s), TACHYON_END);
    EXPECT(tachyon_reader_close(r), TACHYON_OK);
    printf("file writer: an uncreatable path, a file written, closed twice, read back\n");
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    status_messages();
    options_and_memory();
    handles_and_order();
    full_tables();
    failing_sinks(TACHYON_COMPRESSION_NONE);
#ifdef TACHYON_ZSTD
    failing_sinks(TACHYON_COMPRESSION_ZSTD);
#endif
    reader_errors(dir);
    printf("errors_test: %d checks passed\n", checks);
    return 0;
}
