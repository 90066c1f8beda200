/* lua_timer: Lua 5.4 sampled by time, the way signal profilers sample, through tachyon.h's
 * capture rings, into a stream that survives the process being killed.
 *
 *   lua_timer OUT.pyb SCRIPT.lua THREADS SECONDS HZ [--progress FILE] [--exit-without-finalize]
 *             [--work N] [--every N]
 *
 * THREADS OS threads each run SCRIPT's run() in their own lua_State. Each thread has a
 * CPU-time timer (timer_create on the thread's CPU clock, delivered to it with
 * SIGEV_THREAD_ID) raising SIGPROF HZ times a second of its CPU time. The handler only arms
 * a count hook with lua_sethook, which Lua's manual allows in a signal handler; the hook
 * fires at the next instruction, disarms itself, walks the stack and pushes it into the
 * thread's ring as (code id, line) pairs — a code id is the function's address, and the
 * hook notes each new function's source and name in the thread's table of code (published
 * with a release store, so the writer thread reads it without a lock). The main thread
 * drains every ring each 10 ms into one writer, resolving code ids through those tables, and
 * flushes the stream every 250 ms (writing "flushed N" to the progress file after each).
 *
 * The writer is tachyon_writer_open_journal: OUT.pyb holds the journaled stream while the
 * program runs and the Tachyon file once it finalizes (CPython reads it as it is). If the
 * process was killed, `tachyon receive OUT.pyb -o SALVAGED.pyb` makes a file with every
 * sample up to the last flush. With --exit-without-finalize the program exits without
 * finalizing: the writer registered with tachyon_writer_finalize_at_exit is finalized by
 * exit().
 *
 * For the benchmark (scripts/capture-bench.sh): --work N calls run(N) (fixed work) instead
 * of running for SECONDS, and HZ 0 sets no timer (the unprofiled run).
 *
 * --every N (with HZ 0) samples by work instead of time: a count hook each N Lua
 * instructions, which waits for the drain when the ring is full. Where each sample lands then
 * depends on the script alone, not on the machine's clocks or load, so a check of the
 * profile's content holds on any machine (scripts/capture.sh).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "tachyon.h"

#define MAX_THREADS 16
#define MAX_FRAMES 256
#define MAX_CODE 1024
#define STATUS_RUNNING (TACHYON_THREAD_STATUS_HAS_GIL | TACHYON_THREAD_STATUS_ON_CPU)

/* A function the hook has seen: its address (the code id) and names. */
struct code {
    uint64_t id;
    char source[96];
    char name[64];
};

struct worker {
    pthread_t thread;
    int index;
    lua_State *L;
    tachyon_capture *ring;
    void *ring_memory;
    timer_t timer;
    struct code code[MAX_CODE];
    atomic_size_t code_count; /* entries below it are complete (release/acquire) */
    uint64_t pushed, full;
    int64_t spent_heavy, spent_light; /* the script's own measure of its split, µs */
};

static struct worker workers[MAX_THREADS];
static int threads;
static __thread struct worker *self;
static atomic_int stop;
static atomic_int running;
static long rounds; /* 0: until stop */
static long every;  /* --every N: a count hook each N Lua instructions */
static const char *script;
static long interval_ns;
static uint64_t start_wall_us, start_mono_us;

static uint64_t clock_us(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static uint64_t now_us(void) { return start_wall_us + (clock_us(CLOCK_MONOTONIC) - start_mono_us); }

/* The thread's entry for function address `id`, added if new (this thread only adds). */
static void note_code(struct worker *w, uint64_t id, lua_Debug *ar) {
    size_t n = atomic_load_explicit(&w->code_count, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        if (w->code[i].id == id) return;
    if (n == MAX_CODE) return;
    struct code *c = &w->code[n];
    c->id = id;
    snprintf(c->source, sizeof c->source, "%s", ar->short_src);
    if (ar->name)
        snprintf(c->name, sizeof c->name, "%s", ar->name);
    else if (*ar->what == 'm')
        snprintf(c->name, sizeof c->name, "<main>");
    else
        snprintf(c->name, sizeof c->name, "<anonymous:%d>", ar->linedefined);
    atomic_store_explicit(&w->code_count, n + 1, memory_order_release);
}

/* Walks L's stack and pushes it into the thread's ring. With `wait`, a full ring is waited
 * on (for the drain, every 10 ms) instead of counted as a drop: only the count hook, which
 * is no signal's doing, may wait. */
static void sample(lua_State *L, int wait) {
    struct worker *w = self;
    tachyon_code_frame frames[MAX_FRAMES];
    lua_Debug ar;
    int depth = 0;
    for (int level = 0; depth < MAX_FRAMES && lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Slnf", &ar);
        uint64_t id = (uint64_t)(uintptr_t)lua_topointer(L, -1);
        lua_pop(L, 1);
        note_code(w, id, &ar);
        frames[depth].code = id;
        frames[depth].offset = (uint32_t)ar.currentline; /* -1 (C) becomes 0xFFFFFFFF */
        depth++;
    }
    uint64_t at = now_us();
    int s;
    /* A second's wait bounds a sample the ring could never hold: it counts as dropped. */
    for (int tries = 0;; tries++) {
        s = tachyon_capture_push_code(w->ring, at, 0, (uint64_t)(w->index + 1), STATUS_RUNNING, frames, (size_t)depth);
        if (!wait || s != TACHYON_E_FULL || tries == 1000) break;
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    if (s == TACHYON_OK)
        w->pushed++;
    else
        w->full++;
}

/* The hook the signal armed: disarm, then sample. Runs in the Lua thread, not in the
 * handler. */
static void hook(lua_State *L, lua_Debug *unused) {
    (void)unused;
    lua_sethook(L, NULL, 0, 0);
    sample(L, 0);
}

/* --every N: called by Lua every N instructions, it stays set. */
static void count_hook(lua_State *L, lua_Debug *unused) {
    (void)unused;
    sample(L, 1);
}

/* SIGPROF: arm the hook (lua_sethook is safe to call from a signal handler). */
static void on_sigprof(int signo) {
    (void)signo;
    struct worker *w = self;
    if (w != NULL && w->L != NULL) lua_sethook(w->L, hook, LUA_MASKCOUNT, 1);
}

/* The drain's resolve callback: the function's names from whichever thread noted it. */
static int resolve(void *context, uint64_t id, uint32_t line, tachyon_frame *frame) {
    (void)context;
    for (int t = 0; t < threads; t++) {
        struct worker *w = &workers[t];
        size_t n = atomic_load_explicit(&w->code_count, memory_order_acquire);
        for (size_t i = 0; i < n; i++) {
            if (w->code[i].id != id) continue;
            frame->filename = w->code[i].source;
            frame->filename_len = TACHYON_NUL_TERMINATED;
            frame->funcname = w->code[i].name;
            frame->funcname_len = TACHYON_NUL_TERMINATED;
            frame->lineno = frame->end_lineno = line == UINT32_MAX ? -1 : (int32_t)line;
            return 0;
        }
    }
    return 1;
}

static int should_stop(lua_State *L) {
    lua_pushboolean(L, atomic_load_explicit(&stop, memory_order_relaxed));
    return 1;
}

/* The calling thread's CPU time in µs, for the script to measure its own split. */
static int thread_cpu_us(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)clock_us(CLOCK_THREAD_CPUTIME_ID));
    return 1;
}

static void *work(void *arg) {
    struct worker *w = arg;
    self = w;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_register(L, "should_stop", should_stop);
    lua_register(L, "thread_cpu_us", thread_cpu_us);
    if (luaL_dofile(L, script) != 0) {
        fprintf(stderr, "lua_timer: %s\n", lua_tostring(L, -1));
        exit(1);
    }
    w->L = L;
    if (every > 0) lua_sethook(L, count_hook, LUA_MASKCOUNT, (int)every);
    if (interval_ns == 0) goto run;
    clockid_t cpu;
    pthread_getcpuclockid(pthread_self(), &cpu);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(cpu, &sev, &w->timer) != 0) {
        perror("timer_create");
        exit(1);
    }
    struct itimerspec spec = {{0, interval_ns}, {0, interval_ns}};
    timer_settime(w->timer, 0, &spec, NULL);
run:
    lua_getglobal(L, "run");
    if (rounds > 0)
        lua_pushinteger(L, rounds);
    else
        lua_pushnil(L);
    if (lua_pcall(L, 1, 1, 0) != 0) {
        fprintf(stderr, "lua_timer: %s\n", lua_tostring(L, -1));
        exit(1);
    }
    if (interval_ns > 0) timer_delete(w->timer);
    lua_getglobal(L, "spent_heavy");
    lua_getglobal(L, "spent_light");
    w->spent_heavy = lua_tointeger(L, -2);
    w->spent_light = lua_tointeger(L, -1);
    /* The timer is gone, but a signal may be pending: no hook may run on a closed state. */
    w->L = NULL;
    lua_sethook(L, NULL, 0, 0);
    lua_close(L);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

static void drain_all(tachyon_writer *writer, uint64_t *taken) {
    for (int i = 0; i < threads; i++) {
        size_t n = 0;
        if (tachyon_capture_drain(workers[i].ring, writer, resolve, NULL, SIZE_MAX, &n) != TACHYON_OK) {
            fprintf(stderr, "lua_timer: drain: %s\n", tachyon_writer_last_error(writer));
            exit(1);
        }
        *taken += n;
    }
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: lua_timer OUT.pyb SCRIPT.lua THREADS SECONDS HZ [--progress FILE] "
                        "[--exit-without-finalize] [--work N] [--every N]\n");
        return 2;
    }
    const char *out = argv[1];
    script = argv[2];
    threads = atoi(argv[3]);
    double seconds = atof(argv[4]);
    long hz = atol(argv[5]);
    const char *progress = NULL;
    int exit_without_finalize = 0;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--progress") == 0 && i + 1 < argc)
            progress = argv[++i];
        else if (strcmp(argv[i], "--exit-without-finalize") == 0)
            exit_without_finalize = 1;
        else if (strcmp(argv[i], "--work") == 0 && i + 1 < argc)
            rounds = atol(argv[++i]);
        else if (strcmp(argv[i], "--every") == 0 && i + 1 < argc)
            every = atol(argv[++i]);
        else
            return 2;
    }
    if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || hz < 0 || every < 0 || every > INT32_MAX ||
        (every > 0 && hz > 0))
        return 2;
    interval_ns = hz > 0 ? 1000000000L / hz : 0;
    start_wall_us = clock_us(CLOCK_REALTIME);
    start_mono_us = clock_us(CLOCK_MONOTONIC);

    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.start_time_us = start_wall_us;
    o.sample_interval_us = hz > 0 ? (uint64_t)(1000000 / hz) : 1000;
    o.threads = (size_t)threads;
    tachyon_flush_policy policy = {0, 100000}; /* and every 100 ms of sample time */
    tachyon_writer *writer;
    int s = tachyon_writer_open_journal(out, &o, &policy, &writer);
    if (s != TACHYON_OK) {
        fprintf(stderr, "lua_timer: %s\n", tachyon_status_message(s));
        return 1;
    }
    tachyon_writer_finalize_at_exit(writer);
    size_t bytes = tachyon_capture_memory_size(256, 8, 1);
    for (int i = 0; i < threads; i++) {
        workers[i].index = i;
        workers[i].ring_memory = malloc(bytes);
        if (!workers[i].ring_memory ||
            tachyon_capture_init(workers[i].ring_memory, bytes, &workers[i].ring) != TACHYON_OK)
            return 1;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigprof;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPROF, &action, NULL);
    FILE *log = progress ? fopen(progress, "w") : NULL;

    atomic_store(&running, threads);
    for (int i = 0; i < threads; i++) pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    uint64_t end = clock_us(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e6), taken = 0;
    uint64_t next_flush = clock_us(CLOCK_MONOTONIC) + 250000;
    while (rounds > 0 ? atomic_load(&running) > 0 : clock_us(CLOCK_MONOTONIC) < end) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        drain_all(writer, &taken);
        if (clock_us(CLOCK_MONOTONIC) >= next_flush) {
            if (tachyon_writer_flush(writer) != TACHYON_OK) {
                fprintf(stderr, "lua_timer: flush: %s\n", tachyon_writer_last_error(writer));
                return 1;
            }
            tachyon_writer_counts c;
            tachyon_writer_get_counts(writer, &c);
            if (log) {
                fprintf(log, "flushed %" PRIu64 "\n", c.samples);
                fflush(log);
            }
            next_flush += 250000;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(workers[i].thread, NULL);
    drain_all(writer, &taken);
    const tachyon_capture *rings[MAX_THREADS];
    uint64_t pushed = 0, full = 0;
    int64_t spent_heavy = 0, spent_light = 0;
    for (int i = 0; i < threads; i++) {
        rings[i] = workers[i].ring;
        pushed += workers[i].pushed;
        full += workers[i].full;
        spent_heavy += workers[i].spent_heavy;
        spent_light += workers[i].spent_light;
    }
    tachyon_capture_set_stats(writer, rings, (size_t)threads);
    tachyon_writer_counts counts;
    tachyon_writer_get_counts(writer, &counts);
    printf("%s: %d threads, %" PRIu64 " samples written, %" PRIu64 " taken, %" PRIu64 " pushed, %" PRIu64
           " dropped; the threads' CPU clocks: heavy %" PRId64 " us, light %" PRId64 " us\n",
           out, threads, counts.samples, taken, pushed, full, spent_heavy, spent_light);
    fflush(stdout);
    if (exit_without_finalize) exit(0); /* the at-exit handler finalizes */
    if ((s = tachyon_writer_finalize(writer, NULL)) != TACHYON_OK) {
        fprintf(stderr, "lua_timer: finalize: %s\n", tachyon_writer_last_error(writer));
        return 1;
    }
    tachyon_writer_close(writer);
    return 0;
}
