/*
 * Allocation funnel, arenas and string buffers.
 * Out-of-memory ends the process cleanly (a half-built IR cannot be reported
 * on usefully): one message, the tool's cleanup, a distinct exit status.
 * ORION_FAIL_ALLOC makes the funnel fail on purpose, to test that path.
 */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include "orion/support.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- failure injection ---- */

enum { INJECT_UNREAD, INJECT_OFF, INJECT_COUNT, INJECT_EVERY, INJECT_ONCE };
static _Atomic int inject_mode = INJECT_UNREAD;
static _Atomic uint64_t inject_nth;
static _Atomic uint64_t allocations;
static _Atomic bool out_of_memory_seen; /* then nothing more is made to fail */

static const char *failure_program = "orion";
static void (*failure_cleanup)(void *ctx);
static void *failure_ctx;

void xalloc_on_failure(const char *program, void (*cleanup)(void *ctx), void *ctx) {
  failure_program = program;
  failure_cleanup = cleanup;
  failure_ctx = ctx;
}

static void print_allocation_count(void) {
  fprintf(stderr, "%s: %llu allocations\n", failure_program, (unsigned long long)atomic_load(&allocations));
}

/* Read once. Two threads may both get here first: they read the same
 * variable and store the same values. */
static int read_injection(void) {
  const char *v = getenv("ORION_FAIL_ALLOC");
  int mode = INJECT_OFF;
  uint64_t nth = 0;
  if (v && *v) {
    char *end;
    if (strcmp(v, "count") == 0) {
      mode = INJECT_COUNT;
    } else if (*v >= '1' && *v <= '9' && (nth = strtoull(v, &end, 10)) != 0 &&
               (!*end || strcmp(end, ":once") == 0)) {
      mode = *end ? INJECT_ONCE : INJECT_EVERY;
    } else {
      fprintf(stderr, "%s: warning: ignoring ORION_FAIL_ALLOC='%s' (expected N, N:once or count)\n",
              failure_program, v);
    }
  }
  atomic_store(&inject_nth, nth);
  int unread = INJECT_UNREAD;
  if (atomic_compare_exchange_strong(&inject_mode, &unread, mode) && mode == INJECT_COUNT)
    atexit(print_allocation_count);
  return mode;
}

/* Counts the allocation and says whether it is to fail. */
static bool injected_failure(void) {
  int mode = atomic_load_explicit(&inject_mode, memory_order_acquire);
  if (mode == INJECT_OFF) return false;
  if (mode == INJECT_UNREAD && (mode = read_injection()) == INJECT_OFF) return false;
  uint64_t k = atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed) + 1;
  if (mode == INJECT_COUNT || atomic_load(&out_of_memory_seen)) return false;
  uint64_t nth = atomic_load_explicit(&inject_nth, memory_order_relaxed);
  return mode == INJECT_EVERY ? k % nth == 0 : k == nth;
}

/* ---- out of memory ---- */

static ORION_NORETURN void out_of_memory(size_t n) {
  static _Thread_local bool reporting;
  if (reporting) _exit(ORION_EXIT_OUT_OF_MEMORY); /* the cleanup itself ran out */
  reporting = true;
  /* Another thread that runs out meanwhile waits for this one to end the process. */
  if (atomic_exchange(&out_of_memory_seen, true))
    for (;;) pause();
  fprintf(stderr, "%s: error: out of memory (allocating %zu bytes)\n", failure_program, n);
  if (failure_cleanup) failure_cleanup(failure_ctx);
  /* Not exit(): other threads still run, and stdio buffers hold partial output. */
  _exit(ORION_EXIT_OUT_OF_MEMORY);
}

/* ---- large buffers on huge pages ---- */

/* Buffers of at least this many bytes are offered transparent huge pages. */
#define HUGE_PAGE_MIN ((size_t)4 << 20)

/* Asks that the whole 2 MiB pages inside the n bytes at p be backed by huge
 * pages, where the kernel offers them on request (Linux's THP "madvise"
 * mode). A large buffer's first touch otherwise takes a fault per 4 KiB
 * page, and a write after a read of a fresh page (calloc's zeros, then an
 * optimizer's update) another with a TLB shootdown to every core the
 * process runs on: GPT-2's first training step spent more time in those
 * faults than in its arithmetic (docs/architecture.md, "Memory"). Only
 * advice: nothing changes if it is refused. */
static void *advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  if (p && n >= HUGE_PAGE_MIN) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
  }
#else
  (void)n;
#endif
  return p;
}

void *xmalloc(size_t n) {
  void *p = injected_failure() ? NULL : malloc(n ? n : 1);
  if (!p) out_of_memory(n);
  return advise_huge(p, n);
}

void *xcalloc(size_t count, size_t size) {
  void *p = injected_failure() ? NULL : calloc(count ? count : 1, size ? size : 1);
  if (!p) out_of_memory(count * size);
  return advise_huge(p, count * size);
}

void *xrealloc(void *p, size_t n) {
  void *q = injected_failure() ? NULL : realloc(p, n ? n : 1);
  if (!q) out_of_memory(n);
  return advise_huge(q, n);
}

char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

void *try_malloc(size_t n) { return advise_huge(injected_failure() ? NULL : malloc(n ? n : 1), n); }

void *try_calloc(size_t count, size_t size) {
  return advise_huge(injected_failure() ? NULL : calloc(count ? count : 1, size ? size : 1), count * size);
}

void *try_realloc(void *p, size_t n) { return advise_huge(injected_failure() ? NULL : realloc(p, n ? n : 1), n); }

void *try_aligned_alloc(size_t align, size_t n) {
  return advise_huge(injected_failure() ? NULL : aligned_alloc(align, n), n);
}

void xgrow(void **p, size_t elem_size, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return;
  uint64_t c = *cap ? *cap : 8;
  while (c < need) c *= 2;
  if (c > UINT32_MAX) c = UINT32_MAX;
  *p = xrealloc(*p, (size_t)c * elem_size);
  *cap = (uint32_t)c;
}

/* ---- arena ---- */

struct ArenaBlock {
  ArenaBlock *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

#define ARENA_BLOCK_SIZE (64u * 1024u)

void arena_init(Arena *a) { a->head = NULL; a->total = 0; }

void arena_free(Arena *a) {
  for (ArenaBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
  a->total = 0;
}

void *arena_alloc(Arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  ArenaBlock *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t size = n > ARENA_BLOCK_SIZE ? n : ARENA_BLOCK_SIZE;
    b = xmalloc(sizeof *b + size);
    b->size = size;
    b->used = 0;
    /* A big one-off block goes behind the current one so the current one keeps filling. */
    if (a->head && n > ARENA_BLOCK_SIZE) {
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

void *arena_memdup(Arena *a, const void *p, size_t n) {
  void *q = arena_alloc(a, n);
  if (n) memcpy(q, p, n);
  return q;
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) ice("bad format '%s'", fmt);
  char *p = arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

/* ---- string buffer ---- */

void sb_init(StrBuf *sb) { sb->data = NULL; sb->len = sb->cap = 0; }
void sb_free(StrBuf *sb) { free(sb->data); sb_init(sb); }

static void sb_reserve(StrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t c = sb->cap ? sb->cap : 64;
  while (c < sb->len + extra + 1) c *= 2;
  sb->data = xrealloc(sb->data, c);
  sb->cap = c;
}

void sb_putn(StrBuf *sb, const char *s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void sb_putc(StrBuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(StrBuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  sb_reserve(sb, (size_t)n);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  sb->len += (size_t)n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

void sb_put_double(StrBuf *sb, double v) {
  if (v != v) { sb_puts(sb, "nan"); return; }
  if (v == 1.0 / 0.0) { sb_puts(sb, "inf"); return; }
  if (v == -1.0 / 0.0) { sb_puts(sb, "-inf"); return; }
  char buf[40];
  if (v > -1e15 && v < 1e15 && v == (double)(long long)v) { /* integral: no exponent */
    snprintf(buf, sizeof buf, "%.1f", v);
    sb_puts(sb, buf);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  /* Keep a float looking like a float so it reads back as one. */
  if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
  sb_puts(sb, buf);
}

/* ---- hashing ---- */

uint64_t fnv1a64(const void *data, size_t n, uint64_t h) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += SPLITMIX64_GAMMA);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- string map ---- */

void strmap_init(StrMap *m) { memset(m, 0, sizeof *m); }

void strmap_free(StrMap *m) {
  free(m->keys);
  free(m->vals);
  strmap_init(m);
}

static uint32_t strmap_slot(const char **keys, uint32_t cap, const char *key) {
  uint32_t i = (uint32_t)fnv1a64(key, strlen(key), FNV1A64_INIT) & (cap - 1);
  while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
  return i;
}

uint32_t strmap_get(const StrMap *m, const char *key) {
  if (!m->cap) return 0;
  uint32_t i = strmap_slot(m->keys, m->cap, key);
  return m->keys[i] ? m->vals[i] : 0;
}

void strmap_put(StrMap *m, const char *key, uint32_t val) {
  if ((m->count + 1) * 2 > m->cap) {
    uint32_t ncap = m->cap ? m->cap * 2 : 64;
    const char **nk = xcalloc(ncap, sizeof *nk);
    uint32_t *nv = xcalloc(ncap, sizeof *nv);
    for (uint32_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        uint32_t j = strmap_slot(nk, ncap, m->keys[i]);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
      }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
  }
  uint32_t i = strmap_slot(m->keys, m->cap, key);
  if (!m->keys[i]) m->count++;
  m->keys[i] = key;
  m->vals[i] = val;
}
