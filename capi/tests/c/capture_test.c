/* The capture functions' contract, from C: status codes for bad arguments, a full ring
 * counted exactly, code pairs resolved by the drain's callback, the stats trailer, and a
 * flush asked for by a signal reaching a journaled stream.
 *
 *   capture_test DIR     writes DIR/capture.pyb, DIR/before-signal.stream,
 *                        DIR/after-signal.stream (scripts/capture.sh checks these two with
 *                        `tachyon receive`) and DIR/journal.pyb (a finalized journal: the
 *                        Tachyon file itself)
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tachyon.h"

static int failures;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "capture_test.c:%d: check failed: %s\n", __LINE__, #cond); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static char path_buf[4096];
static const char *in_dir(const char *dir, const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", dir, name);
    return path_buf;
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[4096];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    if (in) fclose(in);
    if (out) fclose(out);
}

/* What tachyon_writer_on_period_end told: each period's numbers, the counts the callback
 * read from the writer itself (the next period's, already under way), and its file's name. */
struct told {
    int n;
    tachyon_period periods[8];
    uint64_t next_samples[8];
    char names[8][64];
    tachyon_writer *writer;
};

static void on_period_end(void *context, const tachyon_period *p) {
    struct told *t = context;
    if (t->n >= 8) return;
    t->periods[t->n] = *p;
    const char *slash = strrchr(p->path, '/');
    snprintf(t->names[t->n], sizeof t->names[t->n], "%s", slash ? slash + 1 : p->path);
    tachyon_writer_counts c;
    t->next_samples[t->n] = tachyon_writer_get_counts(t->writer, &c) == TACHYON_OK ? c.samples : 99;
    t->n++;
}

static int resolve(void *context, uint64_t code, uint32_t offset, tachyon_frame *frame) {
    (void)context;
    static const char *names[] = {"jit_add", "jit_loop"};
    if (code >= 2) return 1;
    frame->filename = "jit.js";
    frame->filename_len = TACHYON_NUL_TERMINATED;
    frame->funcname = names[code];
    frame->funcname_len = TACHYON_NUL_TERMINATED;
    frame->lineno = frame->end_lineno = (int32_t)offset;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *dir = argv[1];
    static uint64_t memory[4096];
    tachyon_capture *ring = NULL;

    /* Arguments. */
    CHECK(tachyon_capture_init(NULL, 100, &ring) == TACHYON_E_NULL && ring == NULL);
    CHECK(tachyon_capture_init(memory, 100, NULL) == TACHYON_E_NULL);
    CHECK(tachyon_capture_init(memory, 8, &ring) == TACHYON_E_MEMORY && ring == NULL);
    CHECK(tachyon_capture_push_ids(NULL, 0, 0, 1, 0, NULL, 0, 0) == TACHYON_E_NULL);
    CHECK(tachyon_capture_push_ids((const tachyon_capture *)memory, 0, 0, 1, 0, NULL, 0, 0) == TACHYON_E_BAD_HANDLE);
    CHECK(tachyon_capture_memory_size(4, 2, 0) >= 5 * 9 * sizeof(uint32_t));
    CHECK(tachyon_capture_memory_size(4, 2, 1) > tachyon_capture_memory_size(4, 2, 0));

    /* A ring of room for four 2-frame entries: the fifth push is dropped and counted. The
     * memory is given one byte off alignment, which init must cope with. */
    size_t bytes = tachyon_capture_memory_size(4, 2, 0);
    CHECK(tachyon_capture_init((char *)memory + 1, bytes, &ring) == TACHYON_OK && ring != NULL);
    uint32_t ids[2] = {1, 0};
    CHECK(tachyon_capture_push_ids(ring, 1, 0, 1, 0, NULL, 2, 0) == TACHYON_E_NULL);
    int kept = 0, full = 0;
    for (int i = 0; i < 8; i++) {
        int s = tachyon_capture_push_ids(ring, 1000 + (uint64_t)i, 0, 1, 0, ids, 2, 0);
        if (s == TACHYON_OK) kept++;
        if (s == TACHYON_E_FULL) full++;
    }
    tachyon_capture_counts counts;
    CHECK(tachyon_capture_get_counts(ring, &counts) == TACHYON_OK);
    CHECK(kept >= 4 && kept + full == 8);
    CHECK(counts.pushed == (uint32_t)kept && counts.dropped == (uint32_t)full && counts.garbled == 0);
    tachyon_capture_counts64 whole;
    CHECK(tachyon_capture_get_counts64(ring, &whole) == TACHYON_OK);
    CHECK(whole.pushed == (uint64_t)kept && whole.dropped == (uint64_t)full && whole.garbled == 0);
    CHECK(tachyon_capture_get_counts64(ring, NULL) == TACHYON_E_NULL);
    CHECK(tachyon_capture_get_counts64(NULL, &whole) == TACHYON_E_NULL);
    CHECK(strcmp(tachyon_status_message(TACHYON_E_FULL), "the capture ring is full; the sample was dropped and counted") == 0);

    /* Drain into a file writer: ids from intern_frame, and code pairs resolved by the
     * callback; the ring's drops go into the stats. */
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    tachyon_writer *w = NULL;
    CHECK(tachyon_writer_open_file(in_dir(dir, "capture.pyb"), &o, &w) == TACHYON_OK);
    tachyon_frame main_frame = {"app.c", TACHYON_NUL_TERMINATED, "main", TACHYON_NUL_TERMINATED, 1, 1, -1, -1, -1};
    tachyon_frame work_frame = {"app.c", TACHYON_NUL_TERMINATED, "work", TACHYON_NUL_TERMINATED, 9, 9, -1, -1, -1};
    CHECK(tachyon_writer_intern_frame(w, &main_frame, &ids[1]) == TACHYON_OK);
    CHECK(tachyon_writer_intern_frame(w, &work_frame, &ids[0]) == TACHYON_OK);
    size_t taken = 99;
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == (size_t)kept);
    tachyon_code_frame code[3] = {{0, 12}, {1, 30}, {7, 1}}; /* code 7 is unknown */
    CHECK(tachyon_capture_push_code(ring, 5000, 0, 2, 0, code, 3) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, resolve, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 1);
    CHECK(tachyon_capture_drain(ring, NULL, resolve, NULL, SIZE_MAX, &taken) == TACHYON_E_NULL);
    const tachyon_capture *rings[1] = {ring};
    CHECK(tachyon_capture_set_stats(w, rings, 1) == TACHYON_OK);
    tachyon_writer_counts wc;
    CHECK(tachyon_writer_get_counts(w, &wc) == TACHYON_OK && wc.samples == (uint64_t)kept + 1 && wc.threads == 2);
    /* main, work, then jit_add, jit_loop and <unknown> from the drain. */
    CHECK(wc.frames == 5);
    CHECK(tachyon_writer_rotate(w) == TACHYON_E_UNSUPPORTED);
    CHECK(tachyon_writer_on_period_end(w, on_period_end, NULL) == TACHYON_E_UNSUPPORTED);
    CHECK(tachyon_writer_on_period_end(NULL, on_period_end, NULL) == TACHYON_E_NULL);
    uint64_t sequence = 9, period_start = 9;
    CHECK(tachyon_writer_get_period(w, &sequence, &period_start) == TACHYON_OK && sequence == 0 && period_start == 0);
    CHECK(tachyon_writer_finalize(w, NULL) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_E_FINALIZED);
    CHECK(tachyon_writer_close(w) == TACHYON_OK);

    /* A journaled stream that never flushes on its own: 50 samples drained stay staged
     * until a SIGUSR2 asks the next drain to flush. */
    tachyon_flush_policy never = {0, 0};
    CHECK(tachyon_writer_open_journal(in_dir(dir, "signal.stream"), &o, &never, &w) == TACHYON_OK);
    CHECK(tachyon_writer_intern_frame(w, &main_frame, &ids[0]) == TACHYON_OK);
    size_t big = tachyon_capture_memory_size(64, 1, 0);
    static uint64_t ring_memory[4096];
    CHECK(big <= sizeof ring_memory && tachyon_capture_init(ring_memory, big, &ring) == TACHYON_OK);
    for (int i = 0; i < 50; i++) CHECK(tachyon_capture_push_ids(ring, 100 * (uint64_t)i, 0, 1, 0, ids, 1, 0) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 50);
    char from[4096];
    snprintf(from, sizeof from, "%s/signal.stream", dir);
    copy_file(from, in_dir(dir, "before-signal.stream"));
    CHECK(tachyon_flush_on_signal(SIGUSR2) == TACHYON_OK);
    CHECK(raise(SIGUSR2) == 0);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 0);
    copy_file(from, in_dir(dir, "after-signal.stream"));
    /* Left unfinished on purpose: the streams are cut. */
    CHECK(tachyon_writer_close(w) == TACHYON_OK);
    CHECK(tachyon_flush_on_signal(-1) == TACHYON_E_ARGUMENT);

    /* A journaled run that finalizes leaves the Tachyon file itself at its path (the
     * stream replaced): its first bytes are the magic, "TACH" in either byte order. */
    CHECK(tachyon_writer_open_journal(in_dir(dir, "journal.pyb"), &o, &never, &w) == TACHYON_OK);
    CHECK(tachyon_writer_intern_frame(w, &main_frame, &ids[0]) == TACHYON_OK);
    for (int i = 0; i < 10; i++) CHECK(tachyon_capture_push_ids(ring, 100 * (uint64_t)i, 0, 1, 0, ids, 1, 0) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 10);
    uint64_t journal_size = 0;
    CHECK(tachyon_writer_finalize(w, &journal_size) == TACHYON_OK);
    CHECK(tachyon_writer_close(w) == TACHYON_OK);
    FILE *journal = fopen(in_dir(dir, "journal.pyb"), "rb");
    char magic[4] = {0};
    long length = -1;
    if (journal) {
        CHECK(fread(magic, 1, 4, journal) == 4);
        CHECK(fseek(journal, 0, SEEK_END) == 0);
        length = ftell(journal);
        fclose(journal);
    }
    CHECK(memcmp(magic, "HCAT", 4) == 0 || memcmp(magic, "TACH", 4) == 0);
    CHECK(length > 0 && (uint64_t)length == journal_size);

    /* Rotation: zstd periods of 1000 µs from start 0, frame ids interned once. Samples at
     * 0..900 make period 0; one at 2500 ends it and starts period 1 on the grid, at 2000 (the
     * quiet millisecond makes no file); a forced rotation starts period 2 at the latest
     * sample, 2500. capture.sh counts each file's samples (10, 1, 1). */
    tachyon_writer_options z;
    tachyon_writer_options_init(&z);
    z.compression = TACHYON_COMPRESSION_ZSTD;
    tachyon_rotation every_ms = {1000, 0};
    CHECK(tachyon_writer_open_rotating(NULL, &z, &every_ms, NULL, &w) == TACHYON_E_NULL && w == NULL);
    CHECK(tachyon_writer_open_rotating(in_dir(dir, "rot"), &z, &every_ms, &never, &w) == TACHYON_E_UNSUPPORTED);
    CHECK(tachyon_writer_open_rotating(in_dir(dir, "rot"), &z, &every_ms, NULL, &w) == TACHYON_OK);
    struct told told = {0};
    told.writer = w;
    CHECK(tachyon_writer_on_period_end(w, on_period_end, &told) == TACHYON_OK);
    CHECK(tachyon_writer_intern_frame(w, &main_frame, &ids[0]) == TACHYON_OK);
    for (int i = 0; i < 10; i++) CHECK(tachyon_capture_push_ids(ring, 100 * (uint64_t)i, 0, 1, 0, ids, 1, 0) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 10);
    CHECK(tachyon_writer_get_period(w, &sequence, &period_start) == TACHYON_OK && sequence == 0 && period_start == 0);
    CHECK(tachyon_capture_push_ids(ring, 2500, 0, 1, 0, ids, 1, 0) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 1);
    CHECK(tachyon_writer_get_period(w, &sequence, &period_start) == TACHYON_OK && sequence == 1 && period_start == 2000);
    CHECK(tachyon_writer_get_counts(w, &wc) == TACHYON_OK && wc.samples == 1 && wc.frames == 1);
    CHECK(tachyon_writer_rotate(w) == TACHYON_OK);
    CHECK(tachyon_writer_get_period(w, &sequence, &period_start) == TACHYON_OK && sequence == 2 && period_start == 2500);
    CHECK(tachyon_writer_get_counts(w, &wc) == TACHYON_OK && wc.samples == 0);
    CHECK(tachyon_capture_push_ids(ring, 2600, 0, 1, 0, ids, 1, 0) == TACHYON_OK);
    CHECK(tachyon_capture_drain(ring, w, NULL, NULL, SIZE_MAX, &taken) == TACHYON_OK && taken == 1);
    uint64_t last_size = 0;
    CHECK(tachyon_writer_finalize(w, &last_size) == TACHYON_OK);
    CHECK(tachyon_writer_rotate(w) == TACHYON_E_FINALIZED);
    CHECK(tachyon_writer_close(w) == TACHYON_OK);
    /* Each period told once, in order, complete, with its final counts; the callback, run
     * after the call's work, read the writer (the next period, its sample not yet written
     * when a sample's write ended the period; finalize's period itself at the end). */
    CHECK(told.n == 3);
    static const uint64_t told_samples[3] = {10, 1, 1}, told_starts[3] = {0, 2000, 2500}, told_next[3] = {1, 0, 1};
    static const char *told_names[3] = {"rot.00000000.0.pyb", "rot.00000001.2000.pyb", "rot.00000002.2500.pyb"};
    for (int i = 0; i < told.n && i < 3; i++) {
        CHECK(told.periods[i].sequence == (uint64_t)i && told.periods[i].start_time_us == told_starts[i]);
        CHECK(told.periods[i].samples == told_samples[i] && told.periods[i].threads == 1);
        CHECK(strcmp(told.names[i], told_names[i]) == 0);
        CHECK(told.next_samples[i] == told_next[i]);
        CHECK(told.periods[i].file_size > 0);
    }
    CHECK(told.n == 3 && told.periods[2].file_size == last_size);

    if (failures) {
        fprintf(stderr, "capture_test: %d checks failed\n", failures);
        return 1;
    }
    printf("capture_test: all checks passed (%d of 8 pushes kept in a 4-entry ring)\n", kept);
    return 0;
}
