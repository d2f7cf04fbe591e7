/*
 * npy_compare: compares an output .npy that orion wrote with an expected
 * .npy made independently (testsuite/e2e/make_fixtures.py), so the end-to-end
 * tests need no numpy. Reads both with the runtime's .npy reader.
 *
 *   npy_compare ACTUAL EXPECTED --atol A --rtol R [--rows I,J,...]
 *   npy_compare ACTUAL --row-norms NORMS --rtol R
 *
 * An element passes when |actual - expected| <= A + R * |expected| (NaN and
 * infinities never pass, unless equal); int32 against int32 must be equal.
 * --rows views ACTUAL as a matrix of rows of its last dimension and
 * compares only rows I, J, ... with EXPECTED,
 * which holds just those rows (how a big output is checked from a small
 * fixture). --row-norms compares the L2 norm of every row of ACTUAL with
 * NORMS (one value per row) within relative R. fp16, fp32 and int32 data are
 * compared as doubles. Prints the largest errors; exit 0 if everything
 * passes, 1 if not, 2 on bad usage or unreadable files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/npy.h"

enum { MAX_ROWS = 64 };

/* Element i of a as a double (fp16, fp32 or int32). */
static double elem(const NpyArray *a, size_t i) {
  switch (a->dtype) {
  case ORION_DT_FP16: return (double)fp16_to_float(((const uint16_t *)a->data)[i]);
  case ORION_DT_FP32: return (double)((const float *)a->data)[i];
  case ORION_DT_INT32: return (double)((const int32_t *)a->data)[i];
  default: return NAN;
  }
}

static size_t count(const NpyArray *a) {
  size_t n = 1;
  for (uint32_t k = 0; k < a->rank; k++) n *= (size_t)a->dims[k];
  return n;
}

static bool readable(const char *path, NpyArray *a, Diag *d) {
  if (!npy_read(path, a, d)) return false;
  if (a->dtype != ORION_DT_FP16 && a->dtype != ORION_DT_FP32 && a->dtype != ORION_DT_INT32) {
    fprintf(stderr, "npy_compare: '%s' is not fp16, fp32 or int32\n", path);
    return false;
  }
  return true;
}

static void put_shape(const NpyArray *a, FILE *f) {
  fputc('[', f);
  for (uint32_t k = 0; k < a->rank; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)a->dims[k]);
  fputc(']', f);
}

/* Rows of `a` when viewed as [rows, last dimension]. */
static size_t row_len(const NpyArray *a) { return a->rank ? (size_t)a->dims[a->rank - 1] : 1; }

static int usage(void) {
  fputs("usage: npy_compare ACTUAL EXPECTED --atol A --rtol R [--rows I,J,...]\n"
        "       npy_compare ACTUAL --row-norms NORMS --rtol R\n",
        stderr);
  return 2;
}

int main(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL}, *norms = NULL, *rows_arg = NULL;
  double atol = 0, rtol = 0;
  int npaths = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--atol") && i + 1 < argc) atol = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rtol = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows_arg = argv[++i];
    else if (!strcmp(argv[i], "--row-norms") && i + 1 < argc) norms = argv[++i];
    else if (argv[i][0] != '-' && npaths < 2) paths[npaths++] = argv[i];
    else return usage();
  }
  if (npaths != (norms ? 1 : 2) || (norms && rows_arg)) return usage();
  if (norms) paths[1] = norms;

  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.program = "npy_compare";
  NpyArray act = {0}, want = {0};
  int rc = 2;
  if (!readable(paths[0], &act, &d) || !readable(paths[1], &want, &d)) goto done;

  /* Which element of `act` each element of `want` stands for (identity
   * unless --rows), or for --row-norms the rows whose norms are compared. */
  size_t n = count(&want), len = row_len(&act), nrows = count(&act) / (len ? len : 1);
  size_t rows[MAX_ROWS], nsel = 0;
  if (rows_arg) {
    for (const char *p = rows_arg; *p;) {
      char *end;
      unsigned long r = strtoul(p, &end, 10);
      if (end == p || nsel == MAX_ROWS || r >= nrows) {
        fprintf(stderr, "npy_compare: bad --rows '%s' for %zu rows\n", rows_arg, nrows);
        goto done;
      }
      rows[nsel++] = r;
      p = *end == ',' ? end + 1 : end;
    }
    if (n != nsel * len) {
      fprintf(stderr, "npy_compare: '%s' has %zu elements; %zu rows of %zu were selected\n", paths[1], n, nsel, len);
      goto done;
    }
  } else if (norms ? n != nrows : n != count(&act) || want.rank != act.rank ||
                                      memcmp(want.dims, act.dims, sizeof(int64_t) * act.rank)) {
    fprintf(stderr, "npy_compare: shapes differ: '%s' is ", paths[0]);
    put_shape(&act, stderr);
    fprintf(stderr, ", '%s' is ", paths[1]);
    put_shape(&want, stderr);
    fputc('\n', stderr);
    rc = 1;
    goto done;
  }

  double max_abs = 0, max_rel = 0;
  size_t first_bad = 0, bad = 0;
  double bad_a = 0, bad_e = 0;
  for (size_t i = 0; i < n; i++) {
    double a, e = elem(&want, i);
    if (norms) {
      double s = 0;
      for (size_t j = 0; j < len; j++) s += elem(&act, i * len + j) * elem(&act, i * len + j);
      a = sqrt(s);
    } else {
      a = elem(&act, rows_arg ? rows[i / len] * len + i % len : i);
    }
    double err = a == e ? 0 : fabs(a - e); /* equal infinities pass */
    /* Integers (indices, token ids) must be equal: no tolerance applies. */
    bool ints = !norms && act.dtype == ORION_DT_INT32 && want.dtype == ORION_DT_INT32;
    double allowed = ints ? 0 : atol + rtol * fabs(e);
    bool ok = err <= allowed; /* false for NaN */
    if (!ok && bad++ == 0) first_bad = i, bad_a = a, bad_e = e;
    if (err > max_abs || isnan(err)) max_abs = err;
    if (e != 0 && err / fabs(e) > max_rel) max_rel = err / fabs(e);
  }
  printf("%s: %zu %s, max abs err %.3g, max rel err %.3g, tolerance %g + %g*|expected|: %s", paths[0], n,
         norms ? "row norms" : "elements", max_abs, max_rel, atol, rtol, bad ? "FAIL" : "ok");
  if (bad) printf(" (%zu outside; the first is element %zu: %.9g, expected %.9g)", bad, first_bad, bad_a, bad_e);
  putchar('\n');
  rc = bad ? 1 : 0;
done:
  npy_free(&act);
  npy_free(&want);
  srcset_free(&sources);
  return rc;
}
