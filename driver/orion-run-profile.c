/*
 * The profile orion-run prints after its runs (--profile), shared by
 * orion-run itself and orion-run train: every op kind (statements, total
 * time, share) and the 10 slowest statements with their place in the MIL.
 */
#include "orion-run.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_ms_desc(const void *a, const void *b) {
  const OrionStmtTime *x = *(const OrionStmtTime *const *)a, *y = *(const OrionStmtTime *const *)b;
  if (x->ms != y->ms) return x->ms < y->ms ? 1 : -1;
  return x->stmt < y->stmt ? -1 : x->stmt > y->stmt;
}

typedef struct OpKind {
  const char *op;
  uint32_t count;
  double ms;
} OpKind;

static int kind_by_ms_desc(const void *a, const void *b) {
  const OpKind *x = a, *y = b;
  if (x->ms != y->ms) return x->ms < y->ms ? 1 : -1;
  return strcmp(x->op, y->op);
}

void orion_run_print_profile(const char *what, const OrionStmtTime *entries, uint32_t n, SourceSet *sources,
                             uint64_t runs, const char *ran_at, const char *shown_as) {
  const OrionStmtTime **order = xcalloc(n + 1, sizeof *order);
  OpKind *kinds = xcalloc(n + 1, sizeof *kinds);
  uint32_t nk = 0;
  double total = 0;
  for (uint32_t i = 0; i < n; i++) {
    const OrionStmtTime *e = &entries[i];
    order[i] = e;
    total += e->ms;
    uint32_t k = 0;
    while (k < nk && strcmp(kinds[k].op, e->op)) k++;
    if (k == nk) kinds[nk++] = (OpKind){.op = e->op};
    kinds[k].count++;
    kinds[k].ms += e->ms;
  }
  qsort(kinds, nk, sizeof *kinds, kind_by_ms_desc);
  qsort(order, n, sizeof *order, by_ms_desc);
  fprintf(stderr, "orion-run: %s of %llu run%s, %.3f ms in ops (%.3f ms per run)\n", what, (unsigned long long)runs,
          runs == 1 ? "" : "s", total, runs ? total / (double)runs : 0.0);
  fprintf(stderr, "  %-30s %6s %12s %7s\n", "op", "count", "total ms", "share");
  for (uint32_t k = 0; k < nk; k++)
    fprintf(stderr, "  %-30s %6u %12.3f %6.1f%%\n", kinds[k].op, kinds[k].count, kinds[k].ms,
            total > 0 ? 100 * kinds[k].ms / total : 0.0);
  uint32_t top = n < 10 ? n : 10;
  fprintf(stderr, "  slowest statements:\n");
  for (uint32_t i = 0; i < top; i++) {
    const OrionStmtTime *e = order[i];
    uint32_t line = 0, col = 0;
    const SourceFile *sf = e->loc.file ? srcset_get(sources, e->loc.file) : NULL;
    if (sf) srcset_linecol(sources, e->loc.file, e->loc.start, &line, &col);
    const char *file = sf ? sf->name : "?";
    size_t skip = ran_at ? strlen(ran_at) : 0;
    bool moved = sf && skip && !strncmp(file, ran_at, skip) && file[skip] == '/';
    fprintf(stderr, "  %12.3f ms %6.1f%%  %s%s:%u:%u  %s '%s'\n", e->ms, total > 0 ? 100 * e->ms / total : 0.0,
            moved ? shown_as : "", moved ? file + skip : file, line, col, e->op, e->name);
  }
  free(order);
  free(kinds);
}
