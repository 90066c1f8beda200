/* tripwire: an LD_PRELOAD library that counts calls of malloc, calloc, realloc, free,
 * pthread_mutex_lock/trylock/unlock and write made while a signal handler runs.
 *
 * It wraps sigaction: every handler the program installs is replaced by a trampoline that
 * marks the thread as "in a handler", calls the program's handler and clears the mark, so the
 * program need not cooperate (SA_SIGINFO handlers too). At exit it writes the count to
 * $TRIPWIRE_OUT, and to stderr with the handler runs and the count of each kind.
 * Build: gcc -shared -fPIC -ftls-model=initial-exec -O2 tripwire.c -o tripwire.so -ldl
 * (initial-exec TLS: reading the mark never allocates).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread int in_handler;
static atomic_ulong calls;
static atomic_ulong handled;
/* By kind: allocator calls, mutex calls, writes. */
enum { ALLOCATOR, MUTEX, WRITE };
static atomic_ulong by_kind[3];

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);
static int (*real_unlock)(pthread_mutex_t *);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

/* dlsym may allocate before real_calloc is known: serve it from a static arena. */
static char arena[4096];
static size_t arena_used;

static void count_kind(int kind) {
    if (in_handler) {
        atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&by_kind[kind], 1, memory_order_relaxed);
    }
}

__attribute__((constructor)) static void resolve(void) {
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    real_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    real_unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
    real_write = dlsym(RTLD_NEXT, "write");
    real_sigaction = dlsym(RTLD_NEXT, "sigaction");
}

void *malloc(size_t n) {
    count_kind(ALLOCATOR);
    if (!real_malloc) resolve();
    return real_malloc(n);
}

void *calloc(size_t n, size_t size) {
    count_kind(ALLOCATOR);
    if (!real_calloc) {
        size_t bytes = (n * size + 15) & ~(size_t)15;
        if (arena_used + bytes > sizeof arena) return NULL;
        void *p = arena + arena_used;
        arena_used += bytes;
        return p; /* the arena is zeroed */
    }
    return real_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    count_kind(ALLOCATOR);
    if (!real_realloc) resolve();
    return real_realloc(p, n);
}

void free(void *p) {
    count_kind(ALLOCATOR);
    if ((char *)p >= arena && (char *)p < arena + sizeof arena) return;
    if (!real_free) resolve();
    real_free(p);
}

int pthread_mutex_lock(pthread_mutex_t *m) {
    count_kind(MUTEX);
    return real_lock(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m) {
    count_kind(MUTEX);
    return real_trylock(m);
}

int pthread_mutex_unlock(pthread_mutex_t *m) {
    count_kind(MUTEX);
    return real_unlock(m);
}

ssize_t write(int fd, const void *buf, size_t n) {
    count_kind(WRITE);
    return real_write(fd, buf, n);
}

/* The program's handlers, by signal number (SA_SIGINFO ones apart). */
static void (*handlers[NSIG])(int);
static void (*info_handlers[NSIG])(int, siginfo_t *, void *);

static void trampoline(int signo) {
    in_handler++;
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
    handlers[signo](signo);
    in_handler--;
}

static void info_trampoline(int signo, siginfo_t *info, void *context) {
    in_handler++;
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
    info_handlers[signo](signo, info, context);
    in_handler--;
}

int sigaction(int signo, const struct sigaction *action, struct sigaction *old) {
    if (!real_sigaction) resolve();
    if (action == NULL || signo <= 0 || signo >= NSIG) return real_sigaction(signo, action, old);
    struct sigaction wrapped = *action;
    if (action->sa_flags & SA_SIGINFO) {
        info_handlers[signo] = action->sa_sigaction;
        wrapped.sa_sigaction = info_trampoline;
    } else {
        if (action->sa_handler == SIG_DFL || action->sa_handler == SIG_IGN) return real_sigaction(signo, action, old);
        handlers[signo] = action->sa_handler;
        wrapped.sa_handler = trampoline;
    }
    return real_sigaction(signo, &wrapped, old);
}

__attribute__((destructor)) static void report(void) {
    unsigned long n = atomic_load(&calls), h = atomic_load(&handled);
    char line[192];
    int len = snprintf(line, sizeof line, "%lu calls inside %lu handler runs (allocator %lu, mutex %lu, write %lu)\n", n,
                       h, atomic_load(&by_kind[ALLOCATOR]), atomic_load(&by_kind[MUTEX]), atomic_load(&by_kind[WRITE]));
    const char *path = getenv("TRIPWIRE_OUT");
    if (path) {
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%lu\n", n);
            fclose(f);
        }
    }
    if (len > 0) real_write(2, line, (size_t)len);
}
