/* lua_profile: a sampling profiler for Lua 5.4 that writes CPython 3.15's Tachyon format
 * through tachyon.h, so CPython's own tools (`python -m profiling.sampling replay`) and the
 * `tachyon` command read Lua profiles. An example for runtime authors: about 150 lines.
 *
 *   lua_profile [-n INSTRUCTIONS] OUT.pyb SCRIPT.lua [ARGS...]
 *
 * How it samples: a count hook fires every INSTRUCTIONS virtual-machine instructions (1000
 * by default) and walks the running stack with lua_getstack/lua_getinfo. Each Lua frame
 * becomes (source as the file name, function name, current line); a C function has no
 * line. Timestamps are wall-clock microseconds. Coroutines run on the one OS thread, so all
 * samples are on thread 1; a coroutine's stack (Lua shows only the coroutine's own frames)
 * sits under a frame named <coroutine>.
 *
 * Memory: the writer lives in one block whose size tachyon_writer_memory_size gives; no
 * allocation happens while sampling. Output: a FILE* behind the write and seek callbacks.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "tachyon.h"

#define MAX_FRAMES 256 /* what a Tachyon stack holds */
/* CPython's status bits: holds the GIL (1), on CPU (2), main thread (32). */
#define STATUS_RUNNING (1 | 2 | 32)

static struct {
    tachyon_writer *writer;
    lua_State *main;
    uint64_t start_us, start_mono_us;
    uint64_t samples, refused;
    int last_error;
} prof;

static uint64_t clock_us(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static ptrdiff_t file_write(void *file, const uint8_t *data, size_t len) {
    size_t n = fwrite(data, 1, len, file);
    return n == 0 ? -1 : (ptrdiff_t)n;
}
static int file_seek(void *file, uint64_t offset) { return fseek(file, (long)offset, SEEK_SET) ? -1 : 0; }
static int file_flush(void *file) { return fflush(file) ? -1 : 0; }

/* The hook: one sample of the running stack, innermost frame first. */
static void sample(lua_State *L, lua_Debug *hook_ar) {
    (void)hook_ar;
    static tachyon_frame frames[MAX_FRAMES];
    static lua_Debug ar[MAX_FRAMES]; /* names live in these until the sample is written */
    static char anonymous[MAX_FRAMES][96];
    int depth = 0;
    for (int level = 0; depth < MAX_FRAMES && lua_getstack(L, level, &ar[depth]); level++) {
        lua_Debug *a = &ar[depth];
        lua_getinfo(L, "Sln", a);
        const char *name = a->name;
        if (name == NULL) {
            if (*a->what == 'm')
                name = "<main>";
            else if (*a->what == 'C')
                name = "<C function>";
            else {
                snprintf(anonymous[depth], sizeof anonymous[depth], "<anonymous:%d>", a->linedefined);
                name = anonymous[depth];
            }
        }
        tachyon_frame *f = &frames[depth++];
        f->filename = a->short_src;
        f->filename_len = TACHYON_NUL_TERMINATED;
        f->funcname = name;
        f->funcname_len = TACHYON_NUL_TERMINATED;
        f->lineno = f->end_lineno = a->currentline; /* -1 for C functions */
        f->col = f->end_col = -1;
        f->opcode = TACHYON_NO_OPCODE;
    }
    if (L != prof.main && depth < MAX_FRAMES) {
        tachyon_frame root = {"[coroutine]", TACHYON_NUL_TERMINATED, "<coroutine>", TACHYON_NUL_TERMINATED,
                              -1, -1, -1, -1, TACHYON_NO_OPCODE};
        frames[depth++] = root;
    }
    uint64_t now = prof.start_us + (clock_us(CLOCK_MONOTONIC) - prof.start_mono_us);
    int s = tachyon_writer_write_sample(prof.writer, now, 0, 1, STATUS_RUNNING, frames, (size_t)depth);
    if (s == TACHYON_OK) {
        prof.samples++;
    } else {
        /* A full table refuses only this sample; an I/O error is retried with the next. */
        prof.refused++;
        prof.last_error = s;
    }
}

int main(int argc, char **argv) {
    int every = 1000, arg = 1;
    if (argc > 2 && strcmp(argv[1], "-n") == 0) {
        every = atoi(argv[2]);
        arg = 3;
    }
    if (argc - arg < 2 || every <= 0) {
        fprintf(stderr, "usage: lua_profile [-n INSTRUCTIONS] OUT.pyb SCRIPT.lua [ARGS...]\n");
        return 2;
    }
    const char *out = argv[arg], *script = argv[arg + 1];

    tachyon_writer_options o;
    tachyon_writer_options_init(&o);
    o.sample_interval_us = 100; /* nominal: samples follow instructions, not time */
    o.strings = o.frames = 16384;
    o.string_bytes = 1 << 20;
    o.threads = 1;
    size_t bytes;
    int s = tachyon_writer_memory_size(&o, &bytes);
    void *memory = s == TACHYON_OK ? malloc(bytes) : NULL;
    FILE *file = fopen(out, "wb");
    if (!memory || !file) {
        fprintf(stderr, "lua_profile: cannot set up %s\n", out);
        return 1;
    }
    prof.start_us = clock_us(CLOCK_REALTIME);
    prof.start_mono_us = clock_us(CLOCK_MONOTONIC);
    o.start_time_us = prof.start_us;
    tachyon_sink sink = {file, file_write, file_seek, file_flush};
    if ((s = tachyon_writer_init(memory, bytes, &o, &sink, &prof.writer)) != TACHYON_OK) {
        fprintf(stderr, "lua_profile: %s\n", tachyon_status_message(s));
        return 1;
    }

    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    prof.main = L;
    /* Coroutines made later inherit the hook (lua_newthread copies it). */
    lua_sethook(L, sample, LUA_MASKCOUNT, every);
    lua_newtable(L);
    for (int i = arg + 2; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - arg - 1);
    }
    lua_setglobal(L, "arg");
    int failed = luaL_dofile(L, script);
    if (failed) fprintf(stderr, "lua_profile: %s\n", lua_tostring(L, -1));
    lua_sethook(L, NULL, 0, 0);
    lua_close(L);

    double seconds = (double)(clock_us(CLOCK_MONOTONIC) - prof.start_mono_us) / 1e6;
    tachyon_stats stats = {seconds, seconds > 0 ? (double)prof.samples / seconds : 0, 0, 0, 0, 0};
    tachyon_writer_set_stats(prof.writer, &stats);
    uint64_t size = 0;
    if ((s = tachyon_writer_finalize(prof.writer, &size)) != TACHYON_OK) {
        fprintf(stderr, "lua_profile: finalize: %s\n", tachyon_writer_last_error(prof.writer));
        return 1;
    }
    tachyon_writer_counts counts;
    tachyon_writer_get_counts(prof.writer, &counts);
    tachyon_writer_close(prof.writer);
    fclose(file);
    free(memory);
    printf("%s: %" PRIu64 " samples (%" PRIu64 " refused%s%s), %zu frames, %" PRIu64 " bytes, %.2f s\n", out,
           prof.samples, prof.refused, prof.refused ? ": " : "",
           prof.refused ? tachyon_status_message(prof.last_error) : "", counts.frames, size, seconds);
    return failed || prof.refused ? 1 : 0;
}
