/*
 * orion support library: memory arenas, source files with byte-offset spans,
 * and the one diagnostics module every part of the toolchain reports through.
 *
 * Locations are byte offsets into a source buffer; they become line:column
 * only when a diagnostic is printed (the line table is built once per file).
 */
#ifndef ORION_SUPPORT_H
#define ORION_SUPPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ORION_VERSION "0.1.0"

#if defined(__GNUC__)
#define ORION_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ORION_NORETURN __attribute__((noreturn))
#else
#define ORION_PRINTF(f, a)
#define ORION_NORETURN
#endif

/* ---- allocation ------------------------------------------------------- */

/* Every heap allocation goes through these; on exhaustion they print
 * "PROGRAM: error: out of memory (allocating N bytes)", run the cleanup given
 * to xalloc_on_failure and end the process with ORION_EXIT_OUT_OF_MEMORY (an
 * out-of-memory compiler cannot produce anything useful).
 * ORION_FAIL_ALLOC=N makes every Nth allocation through them (and the try_
 * ones) fail, N:once only the Nth, and count prints the total at exit
 * (docs/testing.md). */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* For large buffers whose failure the caller reports as an ordinary error:
 * NULL when out of memory (or made to fail). */
void *try_malloc(size_t n);
void *try_calloc(size_t count, size_t size);
void *try_realloc(void *p, size_t n);
void *try_aligned_alloc(size_t align, size_t n);

/* Exit status after running out of memory (1 and 2 are the tools' input and usage errors). */
#define ORION_EXIT_OUT_OF_MEMORY 3
/* Names the program in the message and sets what is undone first (say, a
 * temporary directory removed); cleanup must not need new memory to work.
 * A tool calls it once in main; the default is "orion" and no cleanup. */
void xalloc_on_failure(const char *program, void (*cleanup)(void *ctx), void *ctx);
/* Grows *p (an array of elem_size elements with capacity *cap) to hold need. */
void xgrow(void **p, size_t elem_size, uint32_t *cap, uint32_t need);

/* Bump allocator: many small objects, freed all at once. */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head;
  size_t total; /* bytes handed out, for statistics */
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n); /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) ORION_PRINTF(2, 3);
void *arena_memdup(Arena *a, const void *p, size_t n);

/* Growable string buffer (heap). */
typedef struct StrBuf {
  char *data;
  size_t len, cap;
} StrBuf;
void sb_init(StrBuf *sb);
void sb_free(StrBuf *sb);
void sb_putc(StrBuf *sb, char c);
void sb_puts(StrBuf *sb, const char *s);
void sb_putn(StrBuf *sb, const char *s, size_t n);
void sb_printf(StrBuf *sb, const char *fmt, ...) ORION_PRINTF(2, 3);
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) ORION_PRINTF(2, 0);

/* Writes a double so that strtod reads back exactly the same value, in the
 * shortest %g form that does; inf/nan spelled "inf", "-inf", "nan". */
void sb_put_double(StrBuf *sb, double v);

/* ---- files ------------------------------------------------------------- */

/* Largest source file we read; larger input is refused with a named limit. */
#define MAX_SOURCE_BYTES (64u * 1024u * 1024u)

/* Reads a whole file. Returns false and fills err (a static message) on failure. */
bool read_file(const char *path, size_t limit, char **data, size_t *len, const char **err);
/* The same from an open descriptor (which stays open, read from where it is). */
bool read_fd(int fd, size_t limit, char **data, size_t *len, const char **err);

/* Writes all len bytes to fd (a write cut short or interrupted goes on); false with errno set. */
bool write_fd_all(int fd, const void *data, size_t len);
/* Writes data to path atomically: a temporary file beside it, fsync, rename.
 * A path that is a device or a pipe (/dev/null, /dev/stdout) is written in place. */
bool write_file_atomic(const char *path, const void *data, size_t len, const char **err);
/* Removes a file or a directory tree (not following symbolic links); best effort. */
void remove_tree(const char *path);

/* ---- sources and spans --------------------------------------------------- */

typedef struct SrcSpan {
  uint32_t file; /* index into the SourceSet; 0 = no location */
  uint32_t start, end; /* byte offsets, end exclusive */
} SrcSpan;

typedef struct SourceFile {
  char *name;
  char *text; /* NUL-terminated copy */
  size_t len;
  uint32_t *line_starts; /* built lazily */
  uint32_t nlines;
} SourceFile;

typedef struct SourceSet {
  SourceFile *files; /* files[0] is unused so that file id 0 means "none" */
  uint32_t count, cap;
} SourceSet;

void srcset_init(SourceSet *ss);
void srcset_free(SourceSet *ss);
/* Adds a source held in memory (copied); returns its file id. */
uint32_t srcset_add(SourceSet *ss, const char *name, const char *text, size_t len);
const SourceFile *srcset_get(const SourceSet *ss, uint32_t id);
/* Registers a source file for a reader: "-" reads standard input (named
 * "<stdin>"), the size limit is MAX_SOURCE_BYTES. Returns the file id, or 0
 * after reporting through d ("cannot read ...", "... is too large ..."). */
struct Diag;
uint32_t srcset_load(const char *path, struct Diag *d);
/* The same for text in memory (copied); 0 after reporting a size over the limit. */
uint32_t srcset_load_string(const char *name, const char *text, size_t len, struct Diag *d);
/* 1-based line and column (column counts bytes) of an offset. */
void srcset_linecol(SourceSet *ss, uint32_t file, uint32_t off, uint32_t *line, uint32_t *col);

/* ---- diagnostics ----------------------------------------------------------- */

typedef enum DiagLevel { DIAG_NOTE, DIAG_WARNING, DIAG_ERROR } DiagLevel;

#define DEFAULT_ERROR_LIMIT 20

typedef struct Diag {
  SourceSet *sources;
  FILE *out;          /* where messages go (stderr by default) */
  StrBuf *capture;    /* if set, messages are appended here instead of out */
  uint32_t nerrors, nwarnings;
  uint32_t error_limit;   /* 0 = unlimited */
  bool warnings_as_errors;
  bool suppress_warnings; /* -w: warnings (and remarks) are neither printed nor counted */
  bool last_suppressed;   /* the last message was dropped, so are its notes */
  bool limit_reported;    /* the "too many errors" line was printed */
  bool color;
  const char *program; /* prefix of messages without a location (default "orionc") */
  /* If set, told of every message that is reported (not of suppressed ones),
   * before it is printed: lets a caller keep where and what an error was,
   * e.g. to report it again in its own words. */
  void (*observe)(void *ctx, DiagLevel level, SrcSpan span, const char *message);
  void *observe_ctx;
} Diag;

void diag_init(Diag *d, SourceSet *sources);
/* Reports at a span; span.file == 0 reports without a location.
 * Messages are lowercase, without a trailing period. */
void diag_report(Diag *d, DiagLevel level, SrcSpan span, const char *fmt, ...) ORION_PRINTF(4, 5);
void diag_vreport(Diag *d, DiagLevel level, SrcSpan span, const char *fmt, va_list ap) ORION_PRINTF(4, 0);
/* A report at a place in a file that is no registered source (a manifest,
 * whose lines libxml2 gives): "file:line:col: level: ...", without ":col"
 * when col is 0; no source line is shown. An observer (Diag.observe),
 * which knows spans only, is given "file:line:col: ..." as the message, so
 * that the place is not lost. */
void diag_report_line(Diag *d, DiagLevel level, const char *file, uint32_t line, uint32_t col, const char *fmt, ...)
    ORION_PRINTF(6, 7);
/* diag_error(d, span, fmt, ...) and friends (span may be a compound literal). */
#define diag_error(d, ...) diag_report((d), DIAG_ERROR, __VA_ARGS__)
#define diag_warning(d, ...) diag_report((d), DIAG_WARNING, __VA_ARGS__)
#define diag_note(d, ...) diag_report((d), DIAG_NOTE, __VA_ARGS__)
/* A note on its own (advice, not about the message before it, such as the
 * ANE binding order): printed as a note, but -w (suppress_warnings) drops
 * it with the warnings, and the notes that follow it with it. */
void diag_remark(Diag *d, SrcSpan span, const char *fmt, ...) ORION_PRINTF(3, 4);
/* True once the error limit is reached: callers stop producing more work. */
bool diag_should_stop(const Diag *d);
bool diag_has_errors(const Diag *d);

/* Command-line misuse, for every driver: prints "PROGRAM: error: MESSAGE" and
 * "Try 'PROGRAM --help' ..." to stderr and returns 2, the usage exit status. */
int cli_usage_error(const char *program, const char *fmt, ...) ORION_PRINTF(2, 3);

/* Internal compiler error: a bug in orion, not in the input. Aborts. */
ORION_NORETURN void ice(const char *fmt, ...) ORION_PRINTF(1, 2);

/* ---- suggestions for misspelt names (support/suggest.c) --------------------- */

/* Levenshtein distance; UINT32_MAX for names over 64 bytes. */
unsigned edit_distance(const char *a, const char *b);
/* The nearest of the candidates offered, if it is close enough to be a typo
 * of `name` (fewer edits than a third of its length, plus one); the first of
 * equally near ones. `best` is NULL when none is. */
typedef struct Suggestion {
  const char *name;
  const char *best;
  unsigned limit; /* a candidate must be nearer than this */
} Suggestion;
void suggestion_init(Suggestion *s, const char *name);
void suggestion_consider(Suggestion *s, const char *candidate);

/* ---- string map ------------------------------------------------------------ */

/* Open-addressing map from strings (not copied: keep them alive) to ids. */
typedef struct StrMap {
  const char **keys;
  uint32_t *vals;
  uint32_t cap, count;
} StrMap;
void strmap_init(StrMap *m);
void strmap_free(StrMap *m);
/* 0 if absent. */
uint32_t strmap_get(const StrMap *m, const char *key);
void strmap_put(StrMap *m, const char *key, uint32_t val);

/* ---- hashing and random numbers ---------------------------------------------- */

uint64_t fnv1a64(const void *data, size_t n, uint64_t h);
#define FNV1A64_INIT 0xcbf29ce484222325ull
/* SplitMix64: each call adds the gamma to the state and mixes it, so the
 * k-th output from state s is the first output from s + k * gamma (jump-ahead). */
#define SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull
uint64_t splitmix64(uint64_t *state);

#endif
