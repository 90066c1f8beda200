/* native_addresses: native stacks sampled from SIGPROF as raw addresses, written as
 * MODULE+0xADDRESS frames for `tachyon symbolize` to name (docs/capture.md, "Native stacks").
 *
 *   native_addresses OUT.pyb SECONDS
 *
 * The work is native_lib.c's, a library built without frame pointers, so the handler cannot
 * walk frame pointers through it: it unwinds with libunwind from the signal's context
 * (unw_init_local2 with UNW_INIT_SIGNAL_FRAME, then unw_step over .eh_frame), which
 * libunwind documents as signal-safe for local unwinding, and pushes the addresses with
 * tachyon_capture_push_addresses. The main loop drains the ring between rounds of work with
 * tachyon_modules_resolve, which writes each address as its module, the address as linked
 * and the module's build id.
 *
 * One sample is taken at a known place: on the first round the library calls probe() from
 * inside its inlined helper, and probe raises SIGPROF itself. It prints the samples it
 * pushed, those the ring refused, and the samples written.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <inttypes.h>
#include <libunwind.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "tachyon.h"

typedef void (*native_lib_probe)(void);
uint64_t native_lib_run(uint64_t *data, size_t blocks, native_lib_probe probe);

#define MAX_DEPTH 64

static tachyon_capture *ring;
static volatile uint64_t pushed, refused;

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The handler: libunwind's local unwinding and the push; nothing else. */
static void on_sigprof(int signo, siginfo_t *info, void *context) {
    (void)signo;
    (void)info;
    size_t pcs[MAX_DEPTH];
    size_t depth = 0;
    unw_cursor_t cursor;
    if (unw_init_local2(&cursor, (unw_context_t *)context, UNW_INIT_SIGNAL_FRAME) == 0) {
        do {
            unw_word_t ip;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            pcs[depth++] = (size_t)ip;
        } while (depth < MAX_DEPTH && unw_step(&cursor) > 0);
    }
    if (tachyon_capture_push_addresses(ring, now_us(), 0, 1, 0, pcs, depth) == TACHYON_OK)
        pushed++;
    else
        refused++;
}

/* Called by the library from inside its inlined helper: a sample at a known place. */
static __attribute__((noinline)) void probe(void) {
    raise(SIGPROF);
    __asm__ volatile("" ::: "memory"); /* the call above is not a tail call */
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: native_addresses OUT.pyb SECONDS\n");
        return 2;
    }
    double seconds = atof(argv[2]);
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.start_time_us = now_us();
    o.sample_interval_us = 1000;
    tachyon_writer *writer;
    tachyon_modules *modules;
    int s = tachyon_writer_open_file(argv[1], &o, &writer);
    if (s == TACHYON_OK) s = tachyon_modules_open(&modules);
    size_t bytes = tachyon_capture_memory_size(4096, MAX_DEPTH, 1);
    void *memory = malloc(bytes);
    if (s == TACHYON_OK) s = memory ? tachyon_capture_init(memory, bytes, &ring) : TACHYON_E_NULL;
    if (s != TACHYON_OK) {
        fprintf(stderr, "native_addresses: %s\n", tachyon_status_message(s));
        return 1;
    }
    /* libunwind sets itself up on first use: here, not in the handler. */
    void *warm[4];
    unw_backtrace(warm, 4);

    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigprof;
    action.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPROF, &action, NULL);
    struct itimerval every = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &every, NULL);

    static uint64_t data[64 * 256];
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++) data[i] = i * 2654435761u;
    uint64_t sink = 0, end = now_us() + (uint64_t)(seconds * 1e6);
    for (int round = 0; now_us() < end; round++) {
        sink += native_lib_run(data, 256, round == 0 ? probe : NULL);
        if ((s = tachyon_capture_drain(ring, writer, tachyon_modules_resolve, modules, SIZE_MAX, NULL)) != TACHYON_OK) {
            fprintf(stderr, "native_addresses: drain: %s\n", tachyon_writer_last_error(writer));
            return 1;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    tachyon_capture_drain(ring, writer, tachyon_modules_resolve, modules, SIZE_MAX, NULL);
    const tachyon_capture *rings[1] = {ring};
    tachyon_writer_counts counts;
    if (tachyon_capture_set_stats(writer, rings, 1) != TACHYON_OK ||
        tachyon_writer_get_counts(writer, &counts) != TACHYON_OK || tachyon_writer_finalize(writer, NULL) != TACHYON_OK) {
        fprintf(stderr, "native_addresses: finalize: %s\n", tachyon_writer_last_error(writer));
        return 1;
    }
    tachyon_writer_close(writer);
    tachyon_modules_close(modules);
    printf("%s: %" PRIu64 " samples pushed, %" PRIu64 " refused, %" PRIu64 " written (checksum %" PRIu64 ")\n",
           argv[1], pushed, refused, counts.samples, sink);
    return 0;
}
