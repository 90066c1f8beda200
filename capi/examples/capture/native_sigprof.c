/* native_sigprof: a native C workload sampled the way gperftools and async-profiler sample,
 * through tachyon.h's capture rings.
 *
 *   native_sigprof OUT.pyb SECONDS HZ RING_ENTRIES [--malloc-in-handler] [--work N] [--threads T]
 *                  [--rotate] [--period-ms MS] [--ledger FILE] [--kill]
 *
 * Eight threads each keep a shadow stack of frame ids (as instrumented engines and
 * interpreters keep one): the ids were interned with tachyon_writer_intern_frame before the
 * threads start. Each thread has its own timer (timer_create on CLOCK_MONOTONIC, delivered
 * to that thread with SIGEV_THREAD_ID) raising SIGPROF HZ times a second; the handler itself
 * pushes the shadow stack into the thread's ring with tachyon_capture_push_ids, and counts
 * what the ring refused. A writer thread drains every ring each 20 ms into one file. Rings
 * of RING_ENTRIES entries overflow on purpose at high rates: the file's stats trailer says
 * how many samples were missed, and the program prints the drops it counted itself.
 *
 * --rotate writes OUT as rotating journaled periods (tachyon_writer_open_rotating: a new file
 * OUT.SEQUENCE.START.pyb each second of sample time), flushed by this program every 100 ms.
 * --kill ends the run as a crash would: the threads stop, the rings are drained into the
 * writer without a flush, the program prints what it knows (what the handlers pushed and
 * counted as dropped, and how many written samples were not flushed: the current period's
 * samples since its last flush) and kills itself with SIGKILL, so nothing more reaches the
 * file. Every sample pushed is then in a period file, dropped, or among the unflushed.
 *
 * --period-ms MS sets the rotation's period (1000 by default). --ledger FILE keeps, in FILE
 * mapped shared (it outlives a SIGKILL from outside, which the caller sends at any instant),
 * what a check of the files needs: each handler's pushes (counted before the push) and
 * refusals, each ended period's final sample count (tachyon_writer_on_period_end), and the
 * period and sample count of the last flush that returned (at least that much is on disk).
 *
 * --malloc-in-handler makes the handler call malloc and free too: the LD_PRELOAD tripwire
 * (tripwire.c) must see those calls, which shows it can see any.
 *
 * For the benchmark (scripts/capture-bench.sh): --work N gives each thread N rounds of work
 * instead of running for SECONDS, --threads T runs T threads (up to 8), and HZ 0 sets no
 * timer (the unprofiled run, or one profiled by libprofiler through LD_PRELOAD);
 * --empty-handler keeps the timers and a handler that does nothing (what the signals alone
 * cost).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tachyon.h"

#define THREADS 8
#define MAX_DEPTH 64
#define FUNCTIONS 6

static const char *NAMES[FUNCTIONS] = {"thread_main", "render", "physics", "collide", "integrate", "mix_audio"};
static uint32_t ids[FUNCTIONS];

struct worker {
    pthread_t thread;
    int index;
    tachyon_capture *ring;
    void *ring_memory;
    /* The shadow stack: the handler reads `depth` entries of `stack`. */
    uint32_t stack[MAX_DEPTH];
    volatile sig_atomic_t depth;
    /* Written only by this thread's handler: pushes tried, and refused for a full ring. */
    volatile uint64_t attempts;
    volatile uint64_t full;
    timer_t timer;
    uint64_t sink; /* keeps the work from being optimised away */
};

static struct worker workers[THREADS];
static __thread struct worker *self;
static atomic_int stop;
static atomic_int running;
static long rounds; /* 0: until stop */
static int malloc_in_handler;
static int empty_handler; /* the benchmark's baseline: the signal's own cost */
static int rotate;
static int kill_at_end;
static long period_ms = 1000;

/* The ledger's layout, 64-bit words (capture_check.py's `killed` reads it). */
#define LEDGER_PERIODS 4096
struct ledger {
    uint64_t magic; /* "TACHLEDG" */
    uint64_t threads;
    volatile uint64_t attempts[THREADS];
    volatile uint64_t full[THREADS];
    /* (sequence << 32 | samples) + 1 of the last flush that returned; 0 before one. */
    volatile uint64_t flushed;
    /* told[sequence]: the ended period's samples + 1; 0 while not told. */
    volatile uint64_t told[LEDGER_PERIODS];
};
static struct ledger *ledger;

static void on_period_end(void *context, const tachyon_period *p) {
    (void)context;
    if (p->sequence < LEDGER_PERIODS) ledger->told[p->sequence] = p->samples + 1;
}
static uint64_t start_us;

static uint64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* SIGPROF: push this thread's shadow stack. clock_gettime is async-signal-safe (POSIX);
 * tachyon_capture_push_ids allocates nothing, locks nothing, calls nothing. */
static void on_sigprof(int signo) {
    (void)signo;
    int saved = errno;
    struct worker *w = self;
    if (w != NULL && !empty_handler) {
        int depth = w->depth;
        atomic_signal_fence(memory_order_acquire);
        /* Counted before the push: a kill between the two over-counts, never under. */
        if (ledger) ledger->attempts[w->index]++;
        int s = tachyon_capture_push_ids(w->ring, now_us(), 0, (uint64_t)(w->index + 1),
                                         TACHYON_THREAD_STATUS_HAS_GIL | TACHYON_THREAD_STATUS_ON_CPU,
                                         w->stack, (size_t)depth, TACHYON_CAPTURE_ROOT_FIRST);
        w->attempts++;
        if (s == TACHYON_E_FULL) {
            w->full++;
            if (ledger) ledger->full[w->index]++;
        }
        if (malloc_in_handler) {
            /* volatile: a compiler may drop a malloc whose block is only freed. */
            void *volatile block = malloc(16);
            free(block);
        }
    }
    errno = saved;
}

static void enter(struct worker *w, int function) {
    w->stack[w->depth] = ids[function];
    atomic_signal_fence(memory_order_release);
    w->depth = w->depth + 1;
}

static void leave(struct worker *w) { w->depth = w->depth - 1; }

static uint64_t spin(uint64_t n, uint64_t x) {
    for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005u + 1442695040888963407u;
    return x;
}

static void *work(void *arg) {
    struct worker *w = arg;
    self = w;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    extern long interval_ns;
    if (interval_ns > 0) {
        if (timer_create(CLOCK_MONOTONIC, &sev, &w->timer) != 0) {
            perror("timer_create");
            exit(1);
        }
        struct itimerspec spec = {{0, interval_ns}, {0, interval_ns}};
        timer_settime(w->timer, 0, &spec, NULL);
    }
    enter(w, 0);
    uint64_t x = (uint64_t)w->index;
    for (long round = 0; rounds == 0 || round < rounds; round++) {
        if (rounds == 0 && atomic_load_explicit(&stop, memory_order_relaxed)) break;
        enter(w, 1);
        x = spin(20000, x);
        enter(w, 2);
        enter(w, 3);
        x = spin(10000, x);
        leave(w);
        enter(w, 4);
        x = spin(10000, x);
        leave(w);
        leave(w);
        leave(w);
        enter(w, 5);
        x = spin(5000, x);
        leave(w);
    }
    if (interval_ns > 0) {
        struct itimerspec off = {{0, 0}, {0, 0}};
        timer_settime(w->timer, 0, &off, NULL);
        timer_delete(w->timer);
    }
    leave(w);
    w->sink = x;
    atomic_fetch_sub(&running, 1);
    return NULL;
}

long interval_ns;

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: native_sigprof OUT.pyb SECONDS HZ RING_ENTRIES [--malloc-in-handler]\n");
        return 2;
    }
    const char *out = argv[1];
    double seconds = atof(argv[2]);
    long hz = atol(argv[3]);
    size_t entries = (size_t)atol(argv[4]);
    int threads = THREADS;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--malloc-in-handler") == 0)
            malloc_in_handler = 1;
        else if (strcmp(argv[i], "--empty-handler") == 0)
            empty_handler = 1;
        else if (strcmp(argv[i], "--work") == 0 && i + 1 < argc)
            rounds = atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rotate") == 0)
            rotate = 1;
        else if (strcmp(argv[i], "--kill") == 0)
            kill_at_end = 1;
        else if (strcmp(argv[i], "--period-ms") == 0 && i + 1 < argc)
            period_ms = atol(argv[++i]);
        else if (strcmp(argv[i], "--ledger") == 0 && i + 1 < argc) {
            int fd = open(argv[++i], O_RDWR | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || ftruncate(fd, sizeof *ledger) != 0) return 2;
            ledger = mmap(NULL, sizeof *ledger, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (ledger == MAP_FAILED) return 2;
            memcpy(&ledger->magic, "TACHLEDG", 8);
        }
        else
            return 2;
    }
    if (seconds <= 0 || hz < 0 || entries == 0 || threads < 1 || threads > THREADS || period_ms <= 0) return 2;
    if (ledger) ledger->threads = (uint64_t)threads;
    interval_ns = hz > 0 ? 1000000000L / hz : 0;

    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    start_us = now_us();
    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.start_time_us = start_us; /* timestamps are CLOCK_MONOTONIC µs */
    o.sample_interval_us = hz > 0 ? (uint64_t)(1000000 / hz) : 1000;
    o.threads = THREADS;
    tachyon_writer *writer;
    int s;
    if (rotate) {
        tachyon_rotation every = {(uint64_t)period_ms * 1000, 0};
        tachyon_flush_policy by_hand = {0, 0}; /* this program flushes, so it knows when */
        s = tachyon_writer_open_rotating(out, &o, &every, &by_hand, &writer);
        if (s == TACHYON_OK && ledger) s = tachyon_writer_on_period_end(writer, on_period_end, NULL);
    } else {
        s = tachyon_writer_open_file(out, &o, &writer);
    }
    if (s != TACHYON_OK) {
        fprintf(stderr, "native_sigprof: %s\n", tachyon_status_message(s));
        return 1;
    }
    for (int f = 0; f < FUNCTIONS; f++) {
        tachyon_frame frame = {"native.c", TACHYON_NUL_TERMINATED, NAMES[f], TACHYON_NUL_TERMINATED,
                               10 * (f + 1), 10 * (f + 1), -1, -1, TACHYON_NO_OPCODE};
        if ((s = tachyon_writer_intern_frame(writer, &frame, &ids[f])) != TACHYON_OK) return 1;
    }
    size_t bytes = tachyon_capture_memory_size(entries, 4, 0);
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = i;
        workers[i].ring_memory = malloc(bytes);
        if (!workers[i].ring_memory ||
            tachyon_capture_init(workers[i].ring_memory, bytes, &workers[i].ring) != TACHYON_OK)
            return 1;
    }
    /* Without our timers SIGPROF is left to whoever else profiles (libprofiler). */
    if (interval_ns > 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_sigprof;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        sigaction(SIGPROF, &action, NULL);
    }

    atomic_store(&running, threads);
    for (int i = 0; i < threads; i++) pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    /* This thread drains every ring each 20 ms. */
    uint64_t end = now_us() + (uint64_t)(seconds * 1e6);
    size_t taken = 0;
    /* What the last flush left on disk: the period it was in and that period's samples. */
    uint64_t flushed_period = 0, flushed_samples = 0;
    /* The longest two drain rounds in a row took, flush included: a sample taken in a round
     * was pushed after the round before read its ring, so it is no older than this when the
     * writer gets it, and no older by more than this than a period the writer began meanwhile. */
    uint64_t round_start = 0, longest_two_rounds = 0;
    for (unsigned loop = 1; rounds > 0 ? atomic_load(&running) > 0 : now_us() < end; loop++) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        uint64_t previous_start = round_start;
        round_start = now_us();
        if (rotate && loop % 5 == 0) {
            tachyon_writer_counts c;
            if (tachyon_writer_flush(writer) != TACHYON_OK || tachyon_writer_get_counts(writer, &c) != TACHYON_OK ||
                tachyon_writer_get_period(writer, &flushed_period, NULL) != TACHYON_OK) {
                fprintf(stderr, "native_sigprof: flush: %s\n", tachyon_writer_last_error(writer));
                return 1;
            }
            flushed_samples = c.samples;
            if (ledger) ledger->flushed = (flushed_period << 32 | flushed_samples) + 1;
        }
        for (int i = 0; i < threads; i++) {
            size_t n = 0;
            if ((s = tachyon_capture_drain(workers[i].ring, writer, NULL, NULL, SIZE_MAX, &n)) != TACHYON_OK) {
                fprintf(stderr, "native_sigprof: drain: %s\n", tachyon_writer_last_error(writer));
                return 1;
            }
            taken += n;
        }
        uint64_t two_rounds = now_us() - previous_start;
        if (previous_start && two_rounds > longest_two_rounds) longest_two_rounds = two_rounds;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(workers[i].thread, NULL);
    const tachyon_capture *rings[THREADS];
    uint64_t counted = 0, dropped = 0, pushed = 0, attempts = 0;
    for (int i = 0; i < threads; i++) {
        size_t n = 0;
        tachyon_capture_drain(workers[i].ring, writer, NULL, NULL, SIZE_MAX, &n);
        taken += n;
        tachyon_capture_counts64 c;
        tachyon_capture_get_counts64(workers[i].ring, &c);
        dropped += c.dropped;
        pushed += c.pushed;
        counted += workers[i].full;
        attempts += workers[i].attempts;
        rings[i] = workers[i].ring;
    }
    /* The drain after the threads stopped is a round too. */
    uint64_t last_two_rounds = now_us() - round_start;
    if (round_start && last_two_rounds > longest_two_rounds) longest_two_rounds = last_two_rounds;
    if (kill_at_end) {
        /* The current period's samples since its last flush are only in this process. */
        tachyon_writer_counts c;
        uint64_t period = 0;
        tachyon_writer_get_counts(writer, &c);
        tachyon_writer_get_period(writer, &period, NULL);
        uint64_t unflushed = period == flushed_period ? c.samples - flushed_samples : c.samples;
        printf("%s: %" PRIu64 " pushes by the handlers, %" PRIu64 " refused as full (the rings counted %" PRIu64
               " dropped, %" PRIu64 " kept), %zu taken, %" PRIu64 " unflushed in period %" PRIu64
               " at the kill; two drain rounds in a row took at most %" PRIu64 " us\n",
               out, attempts, counted, dropped, pushed, taken, unflushed, period, longest_two_rounds);
        fflush(stdout);
        raise(SIGKILL);
    }
    if ((s = tachyon_capture_set_stats(writer, rings, (size_t)threads)) != TACHYON_OK ||
        (s = tachyon_writer_finalize(writer, NULL)) != TACHYON_OK) {
        fprintf(stderr, "native_sigprof: %s\n", tachyon_writer_last_error(writer));
        return 1;
    }
    tachyon_writer_counts counts;
    tachyon_writer_get_counts(writer, &counts);
    tachyon_writer_close(writer);
    for (int i = 0; i < THREADS; i++) free(workers[i].ring_memory);
    printf("%s: %" PRIu64 " samples written, %zu taken, %" PRIu64 " pushed, %" PRIu64
           " dropped by the rings, %" PRIu64 " counted by the handlers\n",
           out, counts.samples, taken, pushed, dropped, counted);
    return 0;
}
