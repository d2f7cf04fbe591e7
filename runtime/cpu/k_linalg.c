/*
 * Linear algebra: matmul, linear and conv; the pointwise linear and conv on
 * the packed GEMM (k_gemm_pack.c; by an fp16 weight on AMX tiles where the
 * CPU has them, k_gemm_amx.c) or OpenBLAS sgemm, matmul on the packed
 * GEMM by an fp16 weight or by k_matmul_pack.c's rule, else on sgemm, one
 * call per piece (docs/cpu-backend.md, "Linear algebra").
 */
#include "cpu_internal.h"

#include <cblas.h>
#include <math.h>

#define ROWS 512   /* rows (or columns) of the other operand per piece */
#define COLS 128   /* columns per piece of a matmul too small to cut by rows (below) */

/* C[M, N] = op(A)[M, K] * op(B)[K, N] + beta * C, row-major, fp32, OpenBLAS
 * single-threaded (the pool runs the pieces). */
static void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0)
      for (int64_t m = 0; m < M; m++) memset(C + m * ldc, 0, (size_t)N * sizeof(float));
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N,
              (blasint)K, 1.0f, A, (blasint)(lda > 0 ? lda : 1), B, (blasint)(ldb > 0 ? ldb : 1), beta, C,
              (blasint)(ldc > 0 ? ldc : 1));
}

/* The row stride of a weight panel converted into the scratch: K, plus 16
 * floats when K floats are a multiple of 2 KiB (rows that far apart fall in
 * the same cache sets and slow OpenBLAS's transposed packing by 15%). */
int64_t panel_ld(int64_t K) { return K % 512 == 0 ? K + 16 : K; }

/* Rows [r0, r0 + nr) of a [*, K] weight as floats, rows *ld apart: in place
 * for ST_F32, converted into the thread's scratch for ST_H16. */
static const float *weight_rows(const CpuProgram *c, const Val *w, int64_t r0, int64_t nr, int64_t K, uint32_t tid,
                                int64_t *ld) {
  if (w->st == ST_F32) {
    *ld = K;
    return fp(w) + r0 * K;
  }
  float *s = c->scratch[tid];
  *ld = panel_ld(K);
  for (int64_t r = 0; r < nr; r++) h2f(s + r * *ld, (const uint16_t *)w->p + (r0 + r) * K, K);
  return s;
}



/* A fused linear's rounding, bias and epilogue on a piece's rows (see WJob). */
static void linear_rows_after(const WJob *j, float *C, int64_t o0, int64_t no, int64_t r0, int64_t nr, uint32_t tid) {
  if (!j->round_mid && !j->post && !j->round_out && !j->epi) return;
  for (int64_t r = 0; r < nr; r++) {
    float *restrict row = C + r * j->O;
    if (j->round_mid) round16(row, no);
    if (j->post)
      for (int64_t o = 0; o < no; o++) row[o] += j->post[o0 + o];
    if (j->round_out) round16(row, no);
    if (j->epi) epilogue_row(j->epi, j->c->tiles ? j->c->tiles[tid] : NULL, (r0 + r) * j->O + o0, no);
  }
}

static void wgemm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const WJob *j = arg;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / (j->panels * j->blocks), rem = it % (j->panels * j->blocks);
    int64_t o0 = (rem / j->blocks) * PANEL, r0 = (rem % j->blocks) * ROWS;
    int64_t no = j->O - o0 < PANEL ? j->O - o0 : PANEL, nr = j->R - r0 < ROWS ? j->R - r0 : ROWS;
    int64_t ldw;
    float beta = j->b ? 1.0f : 0.0f;
    if (j->R <= GEMV_ROWS) {
      /* Few rows (decode): the weight panel streamed once, fp16 converted in registers, no scratch; the
       * conv layout by the same kernel (x read down its columns), so fused and unfused give the same bits. */
      bool h16 = j->w->st == ST_H16;
      const void *W = (const unsigned char *)j->w->p + o0 * j->K * (h16 ? 2 : 4);
      if (!j->conv) {
        float *C = fp(j->o) + r0 * j->O + o0;
        gemv_dot(fp(j->x) + r0 * j->K, nr, j->K, 1, W, h16, j->K, no, j->K, C, j->O, 1);
        if (j->b)
          for (int64_t r = 0; r < nr; r++)
            for (int64_t o = 0; o < no; o++) C[r * j->O + o] += (float)ld(j->b, o0 + o);
        linear_rows_after(j, C, o0, no, r0, nr, tid);
      } else {
        float *C = fp(j->o) + nn * j->O * j->R + o0 * j->R + r0;
        gemv_dot(fp(j->x) + nn * j->K * j->R + r0, nr, 1, j->R, W, h16, j->K, no, j->K, C, 1, j->R);
        if (j->b)
          for (int64_t o = 0; o < no; o++)
            for (int64_t r = 0; r < nr; r++) C[o * j->R + r] += (float)ld(j->b, o0 + o);
      }
      continue;
    }
    const float *W = weight_rows(j->c, j->w, o0, no, j->K, tid, &ldw);
    if (!j->conv) {
      float *C = fp(j->o) + r0 * j->O + o0;
      if (j->b)
        for (int64_t r = 0; r < nr; r++)
          for (int64_t o = 0; o < no; o++) C[r * j->O + o] = (float)ld(j->b, o0 + o);
      sgemm(false, true, nr, no, j->K, fp(j->x) + r0 * j->K, j->K, W, ldw, beta, C, j->O);
      linear_rows_after(j, C, o0, no, r0, nr, tid);
    } else {
      float *C = fp(j->o) + nn * j->O * j->R + o0 * j->R + r0;
      if (j->b)
        for (int64_t o = 0; o < no; o++) {
          float bv = (float)ld(j->b, o0 + o);
          for (int64_t r = 0; r < nr; r++) C[o * j->R + r] = bv;
        }
      sgemm(false, false, no, nr, j->K, W, ldw, fp(j->x) + nn * j->K * j->R + r0, j->R, beta, C, j->R);
    }
  }
}

/* The packed GEMM's pieces (docs/cpu-backend.md, "Linear algebra"): the
 * activations are packed once per product into c->gemm_pack (in parallel,
 * by row groups or column panels), then each piece — PANEL output channels
 * by PACK_ROWS rows (linear) or PACK_COLS positions (conv) — packs its
 * weight panel GEMM_KC k at a time, converting fp16 as it goes, into the
 * thread's scratch and runs the microkernel over it. */
#define PACK_ROWS (40 * GEMM_MR) /* rows of a linear's activations per piece */
#define PACK_COLS (16 * GEMM_NR) /* positions of a conv's activations per piece */

static GemmSrc weight_src(const WJob *j) {
  return (GemmSrc){.p = j->w->p, .h16 = j->w->st == ST_H16, .si = j->w_kn ? 1 : j->K, .sk = j->w_kn ? j->O : 1};
}

/* The activations' packing: linear, groups of GEMM_MR rows of x [R, K]; conv,
 * per batch item, panels of GEMM_NR positions of x [K, P]; each over all of K. */
static void pack_x_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const WJob *j = arg;
  float *dst = j->c->gemm_pack;
  for (int64_t it = lo; it < hi; it++) {
    if (!j->conv) {
      GemmSrc s = {.p = fp(j->x), .si = j->K, .sk = 1};
      int64_t r0 = it * GEMM_MR;
      gemm_pack_rows(dst + r0 * j->K, s, r0, j->R - r0 < GEMM_MR ? j->R - r0 : GEMM_MR, 0, j->K, false);
    } else {
      int64_t per = (j->R + GEMM_NR - 1) / GEMM_NR, nn = it / per, p0 = (it % per) * GEMM_NR;
      GemmSrc s = {.p = fp(j->x) + nn * j->K * j->R, .si = 1, .sk = j->R};
      gemm_pack_cols(dst + (nn * per * GEMM_NR + p0) * j->K, s, p0, j->R - p0 < GEMM_NR ? j->R - p0 : GEMM_NR, 0,
                     j->K, false);
    }
  }
}

static void packed_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const WJob *j = arg;
  float *own = j->c->scratch[tid];
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / (j->panels * j->blocks), rem = it % (j->panels * j->blocks);
    int64_t step = j->conv ? PACK_COLS : PACK_ROWS;
    int64_t o0 = (rem / j->blocks) * PANEL, r0 = (rem % j->blocks) * step;
    int64_t no = j->O - o0 < PANEL ? j->O - o0 : PANEL, nr = j->R - r0 < step ? j->R - r0 : step;
    bool acc = j->b != NULL;
    if (!j->conv) {
      float *C = fp(j->o) + r0 * j->O + o0;
      if (j->b)
        for (int64_t r = 0; r < nr; r++)
          for (int64_t o = 0; o < no; o++) C[r * j->O + o] = (float)ld(j->b, o0 + o);
      int64_t es = j->w->st == ST_H16 ? 2 : 4;
      for (int64_t k0 = 0; k0 < j->K; k0 += GEMM_KC) {
        int64_t nk = j->K - k0 < GEMM_KC ? j->K - k0 : GEMM_KC, k1 = k0 + nk;
        gemm_pack_cols(own, weight_src(j), o0, no, k0, nk, false);
        /* the weight panel's next block, read while this one is multiplied */
        int64_t nk1 = j->K - k1 < GEMM_KC ? j->K - k1 : GEMM_KC;
        GemmPrefetch pf = {.p = (const char *)j->w->p + (o0 * j->K + k1) * es, .ld = j->K * es, .bytes = nk1 * es,
                           .rows = no};
        if (j->w_kn) pf = (GemmPrefetch){.p = (const char *)j->w->p + (k1 * j->O + o0) * es, .ld = j->O * es,
                                         .bytes = no * es, .rows = nk1};
        gemm_block(j->c->gemm_pack + r0 * j->K + k0 * GEMM_MR, j->K * GEMM_MR, own, nk * GEMM_NR, nr, no, nk, C,
                   j->O, acc || k0 > 0, false, k1 < j->K ? &pf : NULL);
      }
      linear_rows_after(j, C, o0, no, r0, nr, tid);
    } else {
      int64_t per = (j->R + GEMM_NR - 1) / GEMM_NR;
      float *C = fp(j->o) + nn * j->O * j->R + o0 * j->R + r0;
      if (j->b)
        for (int64_t o = 0; o < no; o++) {
          float bv = (float)ld(j->b, o0 + o);
          for (int64_t r = 0; r < nr; r++) C[o * j->R + r] = bv;
        }
      for (int64_t k0 = 0; k0 < j->K; k0 += GEMM_KC) {
        int64_t nk = j->K - k0 < GEMM_KC ? j->K - k0 : GEMM_KC;
        gemm_pack_rows(own, weight_src(j), o0, no, k0, nk, false);
        gemm_block(own, nk * GEMM_MR, j->c->gemm_pack + (nn * per * GEMM_NR + r0) * j->K + k0 * GEMM_NR,
                   j->K * GEMM_NR, no, nr, nk, C, j->R, acc || k0 > 0, false, NULL);
      }
    }
  }
}

/* The AMX path's packing of the activations: linear, x [R, K] as columns (the weight [O, K] is the row side, its
 * rows packed without a transpose) or, by a weight [K, O], as rows; conv, each batch item's x [K, P] as columns,
 * items AMX_PACKED_ELEMS(P, K) apart. */
static AmxPacked amx_x_view(const WJob *j, int64_t nn, int64_t g, int64_t kb) {
  return gemm_amx_view((uint16_t *)(void *)j->c->gemm_pack + nn * AMX_PACKED_ELEMS(j->R, j->K), j->R, j->K, g, kb);
}

static void amx_pack_x_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const WJob *j = arg;
  int64_t per = (j->R + 31) / 32;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / per, i0 = (it % per) * 32, n = j->R - i0 < 32 ? j->R - i0 : 32;
    AmxPacked d = amx_x_view(j, nn, i0 / 16, 0);
    if (j->conv)
      gemm_amx_pack_cols(d, (GemmSrc){.p = fp(j->x) + nn * j->K * j->R, .si = 1, .sk = j->R}, i0, n, 0, j->K);
    else if (!j->w_kn)
      gemm_amx_pack_cols(d, (GemmSrc){.p = fp(j->x), .si = j->K, .sk = 1}, i0, n, 0, j->K);
    else
      gemm_amx_pack_rows(d, (GemmSrc){.p = fp(j->x), .si = j->K, .sk = 1}, i0, n, 0, j->K);
  }
}

/* A piece on the tiles: PANEL output channels by AMX_STEP rows (positions); the weight packed AMX_KC k at a
 * time into the thread's scratch, the sums in the scratch after it, then written out with the bias. The weight
 * is the row side unless it is [K, O]; then the sums are T[r][o], else T[o][r]. */
static void amx_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const WJob *j = arg;
  uint16_t *own = (uint16_t *)(void *)j->c->scratch[tid];
  float *T = (float *)(void *)(own + AMX_PACKED_ELEMS(PANEL, AMX_KC));
  AmxPacked W = {.p = own, .flags = (uint8_t *)(own + (PANEL / 16) * (AMX_KC / 32) * AMX_PLANES * AMX_TILE_ELEMS),
                 .gstride = AMX_KC / 32};
  bool w_rows = j->conv || !j->w_kn;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / (j->panels * j->blocks), rem = it % (j->panels * j->blocks);
    int64_t o0 = (rem / j->blocks) * PANEL, r0 = (rem % j->blocks) * AMX_STEP;
    int64_t no = j->O - o0 < PANEL ? j->O - o0 : PANEL, nr = j->R - r0 < AMX_STEP ? j->R - r0 : AMX_STEP;
    for (int64_t k0 = 0; k0 < j->K; k0 += AMX_KC) {
      int64_t nk = j->K - k0 < AMX_KC ? j->K - k0 : AMX_KC, nkb = (nk + 31) / 32;
      AmxPacked X = amx_x_view(j, nn, r0 / 16, k0 / 32);
      if (w_rows) {
        gemm_amx_pack_rows(W, weight_src(j), o0, no, k0, nk);
        gemm_amx_block(W, X, no, nr, nkb, T, AMX_STEP, k0 > 0);
      } else {
        gemm_amx_pack_cols(W, weight_src(j), o0, no, k0, nk);
        gemm_amx_block(X, W, nr, no, nkb, T, PANEL, k0 > 0);
      }
    }
    float bias[PANEL];
    for (int64_t o = 0; j->b && o < no; o++) bias[o] = (float)ld(j->b, o0 + o);
    if (!j->conv) {
      float *C = fp(j->o) + r0 * j->O + o0;
      if (w_rows) gemm_amx_store_transposed(T, AMX_STEP, no, nr, j->b ? bias : NULL, C, j->O);
      else
        for (int64_t r = 0; r < nr; r++) {
          const float *t = T + r * PANEL;
          if (j->b)
            for (int64_t o = 0; o < no; o++) C[r * j->O + o] = bias[o] + t[o];
          else
            memcpy(C + r * j->O, t, (size_t)no * sizeof(float));
        }
      linear_rows_after(j, C, o0, no, r0, nr, tid);
    } else {
      float *C = fp(j->o) + nn * j->O * j->R + o0 * j->R + r0;
      for (int64_t o = 0; o < no; o++) {
        const float *t = T + o * AMX_STEP;
        if (j->b)
          for (int64_t r = 0; r < nr; r++) C[o * j->R + r] = bias[o] + t[r];
        else
          memcpy(C + o * j->R, t, (size_t)nr * sizeof(float));
      }
    }
  }
}

/* The packed GEMM where the CPU has its fast forms and the activations have
 * more than GEMV_ROWS rows (fewer: the gemv kernels); otherwise sgemm on
 * converted panels, as before. Of the packed products, those by an fp16
 * weight (5 passes, 4 by fp16 activations) with at least AMX_MIN_ROWS rows
 * and AMX_MIN_K k run on the AMX tiles where the CPU has them; by an fp32
 * weight (6 passes) the tiles measured slower (docs/cpu-backend.md). */
#define AMX_MIN_ROWS 32
#define AMX_MIN_K 64
void wjob_reserve(Ctx *x, WJob *j, int64_t batch) {
  j->packed = gemm_packed_fast() && j->R > GEMV_ROWS && j->K > 0 && x->gemm_pack_floats;
  if (!j->packed) return;
  j->amx = gemm_amx_on() && j->w->st == ST_H16 && j->R >= AMX_MIN_ROWS && j->K >= AMX_MIN_K;
  int64_t need = j->amx    ? (batch * AMX_PACKED_ELEMS(j->R, j->K) + 1) / 2
                 : j->conv ? batch * ((j->R + GEMM_NR - 1) / GEMM_NR) * GEMM_NR * j->K
                           : ((j->R + GEMM_MR - 1) / GEMM_MR) * GEMM_MR * j->K;
  if (need > *x->gemm_pack_floats) *x->gemm_pack_floats = need;
}

void wgemm(Ctx *x, WJob *j, int64_t batch) {
  j->c = x->c;
  j->panels = (j->O + PANEL - 1) / PANEL;
  if (j->O == 0 || j->R == 0) return;
  if (j->packed && j->amx && x->c->gemm_pack) {
    j->blocks = (j->R + AMX_STEP - 1) / AMX_STEP;
    par_for(x->c, batch * ((j->R + 31) / 32), 1, amx_pack_x_task, j);
    par_for(x->c, batch * j->panels * j->blocks, 1, amx_task, j);
    return;
  }
  if (j->packed && x->c->gemm_pack) {
    int64_t step = j->conv ? PACK_COLS : PACK_ROWS;
    j->blocks = (j->R + step - 1) / step;
    int64_t groups = j->conv ? batch * ((j->R + GEMM_NR - 1) / GEMM_NR) : (j->R + GEMM_MR - 1) / GEMM_MR;
    par_for(x->c, groups, 1, pack_x_task, j);
    par_for(x->c, batch * j->panels * j->blocks, 1, packed_task, j);
    return;
  }
  j->blocks = (j->R + ROWS - 1) / ROWS;
  par_for(x->c, batch * j->panels * j->blocks, 1, wgemm_task, j);
}

/* matmul of float operands: one piece is a block of rows of one matrix of the batch. */
typedef struct MmJob {
  const Val *a, *b;
  Val *o;
  bool ta, tb;
  int64_t M, N, K, lda, ldb, blocks;
  int64_t cols, cblocks; /* columns of C per piece (N: uncut) and their count */
  uint32_t rbat;
  int64_t bdims[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
} MmJob;

static void matmul_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const MmJob *j = arg;
  for (int64_t it = lo; it < hi; it++) {
    int64_t cb = it % j->cblocks, rest = it / j->cblocks;
    int64_t t = rest / j->blocks, m0 = (rest % j->blocks) * ROWS, nm = j->M - m0 < ROWS ? j->M - m0 : ROWS;
    int64_t n0 = cb * j->cols, nn = j->N - n0 < j->cols ? j->N - n0 : j->cols;
    const float *A = fp(j->a) + offset_at(t, j->bdims, j->rbat, j->sa);
    const float *B = fp(j->b) + offset_at(t, j->bdims, j->rbat, j->sb);
    /* Rows m0.. of op(A): row offset m0 * lda untransposed, column offset m0
     * transposed; columns n0.. of op(B) likewise. */
    sgemm(j->ta, j->tb, nm, nn, j->K, A + (j->ta ? m0 : m0 * j->lda), j->lda, B + (j->tb ? n0 * j->ldb : n0), j->ldb,
          0.0f, fp(j->o) + t * j->M * j->N + m0 * j->N + n0, j->N);
  }
}

/* A matmul with at most GEMV_ROWS rows on one side (s, float, rows
 * contiguous): the other operand (h) is streamed once, floats or fp16 read
 * in place (an fp16 input such as a KV cache, see choose_fp16_inputs).
 * gemv_dot (h's rows are the long side L): a piece is GEMV_COLS rows of h
 * of one matrix of the batch. gemv_axpy (L runs along h's rows, as in
 * x·W with W [K, N]): a piece is AXPY_ROWS whole rows of h, read as one
 * contiguous stream, into its own partial sums, which are then added in
 * piece order; the pieces depend on K alone, so the bits do not depend on
 * the thread count. */
#define GEMV_COLS 128
#define AXPY_ROWS 128
typedef struct SmallMm {
  const Val *s, *h;
  Val *o;
  bool dot;                       /* h's rows are the long side (gemv_dot), else its columns (gemv_axpy) */
  int64_t S, L, K, lds, ldh, oi, oj, MN, lblocks;
  int64_t kblocks;                /* gemv_axpy: pieces of AXPY_ROWS rows of h per matrix */
  float *partial;                 /* gemv_axpy with kblocks > 1: [nb][kblocks][S][L] (after the bound job) */
  uint32_t rbat;
  int64_t bdims[MIL_MAX_RANK], ss[MIL_MAX_RANK], hs[MIL_MAX_RANK];
} SmallMm;

static void small_mm_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const SmallMm *j = arg;
  int64_t es = j->h->st == ST_H16 ? 2 : 4;
  for (int64_t it = lo; it < hi; it++) {
    int64_t t = it / j->lblocks, b = it % j->lblocks;
    const float *S = fp(j->s) + offset_at(t, j->bdims, j->rbat, j->ss);
    const unsigned char *H = (const unsigned char *)j->h->p + offset_at(t, j->bdims, j->rbat, j->hs) * es;
    float *O = fp(j->o) + t * j->MN;
    if (j->dot) {
      int64_t j0 = b * GEMV_COLS, nl = j->L - j0 < GEMV_COLS ? j->L - j0 : GEMV_COLS;
      gemv_dot(S, j->S, j->lds, 1, H + j0 * j->ldh * es, es == 2, j->ldh, nl, j->K, O + j0 * j->oj, j->oi, j->oj);
      continue;
    }
    int64_t k0 = b * AXPY_ROWS, nk = j->K - k0 < AXPY_ROWS ? j->K - k0 : AXPY_ROWS;
    if (!j->partial) gemv_axpy(S, j->S, j->lds, H, es == 2, j->ldh, j->L, j->K, O, j->oi, j->oj);
    else
      gemv_axpy(S + k0, j->S, j->lds, H + k0 * j->ldh * es, es == 2, j->ldh, j->L, nk,
                j->partial + it * j->S * j->L, j->L, 1);
  }
}

/* The partial sums of gemv_axpy's row pieces into the output, in piece
 * order: added into piece 0's sums a whole piece at a time (the same order
 * for every output as adding each output's pieces in turn, but along
 * contiguous rows, which vectorise; the strided walk was 1.3 % of a
 * one-thread GPT-2 decode, on the caller alone). */
static void small_mm_sum(const SmallMm *j, int64_t nb) {
  int64_t n = j->S * j->L;
  for (int64_t t = 0; t < nb; t++) {
    float *O = fp(j->o) + t * j->MN;
    float *restrict P = j->partial + t * j->kblocks * n;
    for (int64_t b = 1; b < j->kblocks; b++) {
      const float *restrict Q = P + b * n;
      for (int64_t e = 0; e < n; e++) P[e] += Q[e];
    }
    for (int64_t i = 0; i < j->S; i++)
      for (int64_t l = 0; l < j->L; l++) O[i * j->oi + l * j->oj] = P[i * j->L + l];
  }
}

/* The logical matrices of a matmul: x is [.., M, K], y is [.., K, N]. */
static void matmul_dims(const Val *a, const Val *b, bool tx, bool ty, int64_t *M, int64_t *K, int64_t *K2, int64_t *N) {
  *M = a->rank == 1 ? 1 : a->dims[a->rank - (tx ? 1 : 2)];
  *K = a->dims[a->rank - (a->rank == 1 || !tx ? 1 : 2)];
  *K2 = b->dims[b->rank - (b->rank == 1 || ty ? 1 : 2)];
  *N = b->rank == 1 ? 1 : b->dims[b->rank - (ty ? 2 : 1)];
}

/* matmul statement si's transpose_x and transpose_y into flag[0], flag[1] (absent: false); false unless both are
 * constants known at prepare (a flag given as an input cannot choose a layout before the run). */
static bool const_transpose_flags(const CpuProgram *c, uint32_t si, bool flag[2]) {
  MilArgId ids[2] = {MIL_ARG_MATMUL_transpose_x, MIL_ARG_MATMUL_transpose_y};
  for (int i = 0; i < 2; i++) {
    uint32_t fs = arg_slot(c, si, ids[i]);
    if (fs != UINT32_MAX) fs = root_of(c, fs);
    if (fs != UINT32_MAX && (c->slots[fs].kind != SK_CONST || c->vals[fs].st == ST_STR || c->vals[fs].n != 1))
      return false;
    flag[i] = fs != UINT32_MAX && ld(&c->vals[fs], 0) != 0;
  }
  return true;
}

/* Whether matmul statement si can read its operand `slot` as fp16 in place:
 * that operand is one of its two, the other is float with at most GEMV_ROWS
 * rows stored contiguously (x untransposed; y transposed or rank 1). Asked
 * at prepare, before binding, from the declared shapes and constant flags. */
bool matmul_reads_fp16(const CpuProgram *c, uint32_t si, uint32_t slot) {
  uint32_t xs = arg_slot(c, si, MIL_ARG_MATMUL_x), ys = arg_slot(c, si, MIL_ARG_MATMUL_y);
  if (xs == UINT32_MAX || ys == UINT32_MAX || xs == ys || (slot != xs && slot != ys)) return false;
  bool flag[2];
  if (!const_transpose_flags(c, si, flag)) return false;
  const Val *a = &c->vals[xs], *b = &c->vals[ys], *other = slot == xs ? b : a;
  if (a->rank == 0 || b->rank == 0 || other->st != ST_F32 || !is_float(other->dt) || !is_float(c->vals[c->base[si]].dt))
    return false;
  if ((flag[0] && a->rank == 1) || (flag[1] && b->rank == 1)) return false;
  int64_t M, K, K2, N;
  matmul_dims(a, b, flag[0], flag[1], &M, &K, &K2, &N);
  if (K != K2) return false;
  return slot == ys ? M <= GEMV_ROWS && !flag[0] : N <= GEMV_ROWS && (flag[1] || b->rank == 1);
}

/* Whether matmul statement si would run on the streamed tiles (amxmm_fits)
 * with its x (`slot`) stored as fp16 bits: y of rank 2, x untransposed or of
 * rank 2 (one matrix, as matmul binds them), more than GEMV_ROWS columns (no
 * gemv), constant flags. Asked at prepare (choose_fp16_results) for a cross
 * entropy's dlogits, whose only readers are the tied classifier's products. */
bool matmul_streams_fp16_x(const CpuProgram *c, uint32_t si, uint32_t slot) {
  uint32_t xs = arg_slot(c, si, MIL_ARG_MATMUL_x), ys = arg_slot(c, si, MIL_ARG_MATMUL_y);
  if (xs == UINT32_MAX || ys == UINT32_MAX || xs == ys || slot != xs) return false;
  bool flag[2];
  if (!const_transpose_flags(c, si, flag)) return false;
  const Val *a = &c->vals[xs], *b = &c->vals[ys], *o = &c->vals[c->base[si]];
  if (a->rank < 2 || b->rank != 2 || (flag[0] && a->rank != 2) || o->st != ST_F32) return false;
  int64_t M, K, K2, N;
  matmul_dims(a, b, flag[0], flag[1], &M, &K, &K2, &N);
  if (K != K2 || N <= GEMV_ROWS || M < 1 || K < 1) return false;
  Val h = *a;
  h.st = ST_H16;
  return amxmm_fits(&h, b, 1, a->n / K, K, N);
}

#define MATMUL_PACK_MAX ((int64_t)1 << 24) /* floats of x a matmul on the packed GEMM may have */

/* Whether matmul statement si can read its y (`slot`, an fp16 weight) in
 * place on the packed GEMM: y is [K, N] or [N, K] with no batch, x float
 * and untransposed, so x's rows of every batch are one [rows, K] operand (a
 * backward's dx = dy W). Asked at prepare (choose_fp16_weights). */
bool matmul_packs_fp16(const CpuProgram *c, uint32_t si, uint32_t slot) {
  uint32_t xs = arg_slot(c, si, MIL_ARG_MATMUL_x), ys = arg_slot(c, si, MIL_ARG_MATMUL_y);
  if (!gemm_packed_fast() || xs == UINT32_MAX || slot != ys || xs == ys) return false;
  uint32_t fs = arg_slot(c, si, MIL_ARG_MATMUL_transpose_x);
  if (fs != UINT32_MAX) fs = root_of(c, fs);
  if (fs != UINT32_MAX && (c->slots[fs].kind != SK_CONST || c->vals[fs].st == ST_STR || c->vals[fs].n != 1 ||
                           ld(&c->vals[fs], 0) != 0))
    return false;
  uint32_t ts = arg_slot(c, si, MIL_ARG_MATMUL_transpose_y);
  if (ts != UINT32_MAX) ts = root_of(c, ts);
  if (ts != UINT32_MAX && (c->slots[ts].kind != SK_CONST || c->vals[ts].st == ST_STR || c->vals[ts].n != 1))
    return false;
  const Val *a = &c->vals[xs], *b = &c->vals[ys];
  if (a->rank < 1 || b->rank != 2 || a->st != ST_F32 || !is_float(a->dt) || !is_float(c->vals[c->base[si]].dt))
    return false;
  /* x is packed whole (rows x K floats): past 64 MiB (a llama backward's dlogits [1024, 32000] by its tied
   * table) only the streamed tiles (k_matmul_amx.c) read the weight in place; elsewhere it keeps its fp32 copy
   * and sgemm. */
  bool ty = ts != UINT32_MAX && ld(&c->vals[ts], 0) != 0;
  int64_t K = a->dims[a->rank - 1], N = b->dims[ty ? 0 : 1];
  return a->n <= MATMUL_PACK_MAX || (K > 0 && amxmm_fits(a, b, 1, a->n / K, K, N));
}

/* A matmul as bound: the sgemm job (fast: float operands), the fp16 one
 * (small), the packed one (an fp16 y read in place, many rows), or the
 * strides of the plain loop. */
typedef struct MatmulBound {
  MmJob j;
  SmallMm sm;
  WJob wj;
  PackMm pm;
  AmxMm am;
  bool fast, small, packed, pmat, amx;
  int64_t nb;                        /* matrices in the batch */
  int64_t am_st, ak_st, bk_st, bn_st; /* the logical matrices' strides */
} MatmulBound;

/* A copy of the n bytes at p. */
static void *dup_job(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

bool bind_matmul(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_MATMUL_x, &ok), *b = req_arg(x, MIL_ARG_MATMUL_y, &ok);
  bool tx = scalar_arg(x, MIL_ARG_MATMUL_transpose_x, 0, &ok) != 0;
  bool ty = scalar_arg(x, MIL_ARG_MATMUL_transpose_y, 0, &ok) != 0;
  if (!ok) return false;
  if (a->rank == 0 || b->rank == 0) return op_fail(x, "operands must have rank 1 or more");
  if ((tx && a->rank == 1) || (ty && b->rank == 1)) return op_fail(x, "a transpose flag is set on a rank-1 operand");
  /* Logical matrices: x is [.., M, K], y is [.., K, N], as strides into the data. */
  int64_t ast[MIL_MAX_RANK], bst[MIL_MAX_RANK];
  strides_of(a->dims, a->rank, ast);
  strides_of(b->dims, b->rank, bst);
  int64_t M, K, N, K2, am_st, ak_st, bk_st, bn_st;
  if (a->rank == 1) M = 1, K = a->dims[0], am_st = 0, ak_st = 1;
  else if (!tx) M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], am_st = ast[a->rank - 2], ak_st = 1;
  else M = a->dims[a->rank - 1], K = a->dims[a->rank - 2], am_st = 1, ak_st = ast[a->rank - 2];
  if (b->rank == 1) K2 = b->dims[0], N = 1, bk_st = 1, bn_st = 0;
  else if (!ty) K2 = b->dims[b->rank - 2], N = b->dims[b->rank - 1], bk_st = bst[b->rank - 2], bn_st = 1;
  else K2 = b->dims[b->rank - 1], N = b->dims[b->rank - 2], bk_st = 1, bn_st = bst[b->rank - 2];
  if (K != K2) return op_fail(x, "the inner dimensions differ (%lld and %lld)", (long long)K, (long long)K2);
  /* Batch dims broadcast like element-wise operands. */
  MmJob j = {.a = a, .b = b, .o = out, .ta = tx, .tb = ty, .M = M, .N = N, .K = K};
  uint32_t ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, rbat = ra > rb ? ra : rb;
  for (uint32_t i = 0; i < rbat; i++) {
    int64_t da = i + ra >= rbat ? a->dims[i + ra - rbat] : 1, db = i + rb >= rbat ? b->dims[i + rb - rbat] : 1;
    if (da != db && da != 1 && db != 1) return op_fail(x, "batch dimensions %lld and %lld do not broadcast", (long long)da, (long long)db);
    j.bdims[i] = da > db ? da : db;
    if (da == 0 || db == 0) j.bdims[i] = 0;
    j.sa[i] = da == 1 ? 0 : ast[i + ra - rbat];
    j.sb[i] = db == 1 ? 0 : bst[i + rb - rbat];
  }
  j.rbat = rbat;
  int64_t dims[MIL_MAX_RANK];
  uint32_t rank = rbat;
  memcpy(dims, j.bdims, sizeof(int64_t) * rbat);
  if (a->rank > 1) dims[rank++] = M;
  if (b->rank > 1) dims[rank++] = N;
  if (!expect_shape(x, out, dims, rank)) return false;
  MatmulBound mb = {.fast = out->st == ST_F32 && a->st == ST_F32 && b->st == ST_F32, .nb = elements(j.bdims, rbat),
                    .am_st = am_st, .ak_st = ak_st, .bk_st = bk_st, .bn_st = bn_st};
  /* Few rows on one side: the other operand streamed once by the gemv kernels, fp16 in place or floats (so an
   * fp16 input read in place gives the bits it gives converted); y is streamed unless only x can be. */
  bool fl_a = a->st == ST_F32 || a->st == ST_H16, fl_b = b->st == ST_F32 || b->st == ST_H16;
  bool can_y = fl_b && a->st == ST_F32 && M <= GEMV_ROWS && !tx;
  bool can_x = fl_a && b->st == ST_F32 && N <= GEMV_ROWS && (ty || b->rank == 1);
  bool hy = can_y && a->st != ST_H16, hx = !hy && can_x;
  if (out->st == ST_F32 && (hy || hx)) {
    /* y in place: s is x's rows, out[m, n]; x in place: s is y^T's rows, out^T[n, m] (C^T = y^T x^T). */
    SmallMm *sm = &mb.sm;
    mb.small = true;
    *sm = (SmallMm){.o = out, .K = K, .MN = M * N, .rbat = rbat};
    memcpy(sm->bdims, j.bdims, sizeof sm->bdims);
    if (hy) {
      sm->s = a, sm->h = b, sm->S = M, sm->L = N, sm->lds = a->rank == 1 ? K : am_st, sm->oi = N, sm->oj = 1;
      sm->dot = ty, sm->ldh = b->rank == 1 ? 1 : ty ? bn_st : bk_st;
      memcpy(sm->ss, j.sa, sizeof sm->ss), memcpy(sm->hs, j.sb, sizeof sm->hs);
    } else {
      sm->s = b, sm->h = a, sm->S = N, sm->L = M, sm->lds = b->rank == 1 ? K : bn_st, sm->oi = 1, sm->oj = N;
      sm->dot = !tx, sm->ldh = a->rank == 1 ? K : tx ? ak_st : am_st;
      memcpy(sm->ss, j.sb, sizeof sm->ss), memcpy(sm->hs, j.sa, sizeof sm->hs);
    }
    sm->kblocks = sm->dot ? 1 : (K + AXPY_ROWS - 1) / AXPY_ROWS;
    sm->lblocks = sm->dot ? (sm->L + GEMV_COLS - 1) / GEMV_COLS : sm->kblocks;
  }
  /* y without batch dims and x untransposed: x's rows of every batch are one operand (as below). */
  bool merge = b->rank == 2 && !tx && a->rank >= 2;
  if (!mb.small && out->st == ST_F32 && a->rank >= 2 && b->rank >= 2 &&
      amxmm_fits(a, b, merge ? 1 : mb.nb, merge ? mb.nb * M : M, K, N)) {
    /* fp16 values with a long op(x) and few columns: the streamed tiles. */
    mb.am = (AmxMm){.a = a, .b = b, .o = out, .M = merge ? mb.nb * M : M, .N = N, .K = K, .am = am_st, .ak = ak_st,
                    .bk = bk_st, .bn = bn_st};
    mb.amx = amxmm_reserve(x, &mb.am);
  }
  if (!mb.small && !mb.amx && b->st == ST_H16 && b->rank == 2 && !tx && a->st == ST_F32 && out->st == ST_F32) {
    /* x's rows of every batch, [nb * M, K], by y read in place: the packed GEMM (the plan chose y for it). */
    mb.wj = (WJob){.x = a, .w = b, .o = out, .O = N, .K = K, .R = mb.nb * M, .w_kn = !ty};
    wjob_reserve(x, &mb.wj, 1);
    mb.packed = mb.wj.packed;
  }
  if (mb.fast) {
    /* Each batch's x is [M, K] row-major (a rank-1 x is one row), or [K, M]
     * when transposed; y is [K, N] (a rank-1 y one column), or [N, K]. */
    j.lda = a->rank == 1 ? K : tx ? ak_st : am_st;
    j.ldb = b->rank == 1 ? 1 : ty ? bn_st : bk_st;
    j.blocks = (M + ROWS - 1) / ROWS;
    /* A product of few row blocks (a weight's gradient, dy^T x: M is the
     * layer's width) is cut by columns too, so that every thread has some;
     * by the shape alone, so the pieces are the same with any thread count. */
    int64_t nb = elements(j.bdims, rbat);
    j.cols = nb * j.blocks < 4 && N > 2 * COLS ? COLS : N > 0 ? N : 1;
    j.cblocks = (N + j.cols - 1) / j.cols;
    if (j.cblocks == 0) j.cblocks = 1;
  }
  if (mb.fast && !mb.small && !mb.packed && !mb.amx && a->rank >= 2 && b->rank >= 2) {
    /* Float operands of many rows: the packed GEMM reading both in place, where it beats sgemm. */
    mb.pm = (PackMm){.a = a, .b = b, .o = out, .M = M, .N = N, .K = K, .am = am_st, .ak = ak_st, .bk = bk_st,
                     .bn = bn_st, .nb = mb.nb, .rbat = rbat};
    memcpy(mb.pm.bdims, j.bdims, sizeof j.bdims), memcpy(mb.pm.sa, j.sa, sizeof j.sa), memcpy(mb.pm.sb, j.sb, sizeof j.sb);
    /* y without batch dims and x untransposed (dx = dy W over [B, T, .]): x's rows of every batch are one
     * [nb M, K] operand, and so are the result's. */
    if (b->rank == 2 && !tx) mb.pm.M = mb.nb * M, mb.pm.nb = 1, mb.pm.rbat = 0;
    mb.pmat = packmm_reserve(x, &mb.pm);
  }
  mb.j = j;
  /* gemv_axpy's partial sums live after the job (freed with it). */
  size_t partial = mb.small && !mb.sm.dot && mb.sm.kblocks > 1
                       ? (size_t)(mb.nb * mb.sm.kblocks * mb.sm.S * mb.sm.L) * sizeof(float)
                       : 0;
  MatmulBound *copy = xmalloc(sizeof mb + partial);
  *copy = mb;
  copy->sm.partial = partial ? (float *)(void *)((unsigned char *)copy + sizeof mb) : NULL;
  *bound = copy;
  return true;
}

bool k_matmul(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const MatmulBound *mb = x->c->bound[x->si];
  const MmJob *j = &mb->j;
  if (mb->small) {
    if (mb->sm.S && mb->sm.L) {
      par_for(x->c, mb->nb * mb->sm.lblocks, 1, small_mm_task, (void *)(uintptr_t)&mb->sm);
      if (mb->sm.partial) small_mm_sum(&mb->sm, mb->nb);
    }
    return true;
  }
  if (mb->amx) {
    AmxMm am = mb->am;
    amxmm_run(x, &am);
    return true;
  }
  if (mb->packed) {
    WJob wj = mb->wj;
    wgemm(x, &wj, 1);
    return true;
  }
  if (mb->pmat) {
    PackMm pm = mb->pm;
    packmm_run(x, &pm);
    return true;
  }
  if (mb->fast) {
    if (j->M == 0 || j->N == 0) return true;
    par_for(x->c, mb->nb * j->blocks * j->cblocks, 1, matmul_task, (void *)(uintptr_t)j);
    return true;
  }
  const Val *a = j->a, *b = j->b;
  int64_t M = j->M, N = j->N, K = j->K, am_st = mb->am_st, ak_st = mb->ak_st, bk_st = mb->bk_st, bn_st = mb->bn_st;
  uint32_t rbat = j->rbat;
  for (int64_t t = 0; t < mb->nb; t++) {
    int64_t pa = offset_at(t, j->bdims, rbat, j->sa), pb = offset_at(t, j->bdims, rbat, j->sb), po = t * M * N;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += ld(a, pa + m * am_st + k * ak_st) * ld(b, pb + k * bk_st + n * bn_st);
        st(out, po + m * N + n, s);
      }
  }
  return true;
}

/* A linear as bound: the sgemm job (fast: float operands), or the plain loop's operands. */
typedef struct LinearBound {
  WJob j;
  bool fast;
  int64_t din, dout, rows;
} LinearBound;

bool bind_linear(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_LINEAR_x, &ok);
  const Val *w = req_arg(x, MIL_ARG_LINEAR_weight, &ok);
  const Val *b = opt_arg(x, MIL_ARG_LINEAR_bias, &ok);
  if (!ok) return false;
  if (a->rank < 1 || w->rank != 2 || w->dims[1] != a->dims[a->rank - 1])
    return op_fail(x, "weight must be [D_out, D_in] with D_in the last dimension of x");
  int64_t din = w->dims[1], dout = w->dims[0];
  if (b && b->n != dout) return op_fail(x, "bias must have D_out = %lld elements", (long long)dout);
  int64_t dims[MIL_MAX_RANK];
  memcpy(dims, a->dims, sizeof dims);
  dims[a->rank - 1] = dout;
  if (!expect_shape(x, out, dims, a->rank)) return false;
  int64_t rows = din ? a->n / din : elements(a->dims, a->rank - 1);
  LinearBound lb = {.fast = out->st == ST_F32 && a->st == ST_F32 && (w->st == ST_F32 || w->st == ST_H16) &&
                            (!b || b->st != ST_STR),
                    .j = {.conv = false, .x = a, .w = w, .b = b, .o = out, .O = dout, .K = din, .R = rows},
                    .din = din, .dout = dout, .rows = rows};
  if (lb.fast) wjob_reserve(x, &lb.j, 1);
  *bound = dup_job(&lb, sizeof lb);
  return true;
}

bool k_linear(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const LinearBound *lb = x->c->bound[x->si];
  if (lb->fast) {
    WJob j = lb->j;
    wgemm(x, &j, 1);
    return true;
  }
  const Val *a = lb->j.x, *w = lb->j.w, *b = lb->j.b;
  int64_t din = lb->din, dout = lb->dout, rows = lb->rows;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < dout; o++) {
      double s = b ? ld(b, o) : 0;
      for (int64_t k = 0; k < din; k++) s += ld(a, r * din + k) * ld(w, o * din + k);
      st(out, r * dout + o, s);
    }
  return true;
}

/* conv with 1, 2 or 3 spatial dims, all as 3-D ones (a 2-D conv has depth 1,
 * a 1-D one depth and height 1). Outside the pointwise case, one item is one
 * output channel of one batch item, summed in double in a fixed order. */
typedef struct ConvJob {
  const Val *a, *w, *b;
  Val *o;
  int64_t C, O, CG, OG;
  int64_t D[3], K[3], OD[3], st[3], dl[3], before[3];
} ConvJob;

static void conv_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const ConvJob *j = arg;
  const int64_t *D = j->D, *K = j->K, *OD = j->OD;
  for (int64_t it = lo; it < hi; it++) {
    int64_t nn = it / j->O, o = it % j->O, g = o / j->OG;
    for (int64_t oz = 0; oz < OD[0]; oz++)
      for (int64_t oy = 0; oy < OD[1]; oy++)
        for (int64_t ox = 0; ox < OD[2]; ox++) {
          double s = j->b ? ld(j->b, o) : 0;
          for (int64_t c = 0; c < j->CG; c++)
            for (int64_t kz = 0; kz < K[0]; kz++) {
              int64_t iz = oz * j->st[0] - j->before[0] + kz * j->dl[0];
              if (iz < 0 || iz >= D[0]) continue;
              for (int64_t ky = 0; ky < K[1]; ky++) {
                int64_t iy = oy * j->st[1] - j->before[1] + ky * j->dl[1];
                if (iy < 0 || iy >= D[1]) continue;
                int64_t ibase = (((nn * j->C + g * j->CG + c) * D[0] + iz) * D[1] + iy) * D[2];
                int64_t wbase = (((o * j->CG + c) * K[0] + kz) * K[1] + ky) * K[2];
                for (int64_t kx = 0; kx < K[2]; kx++) {
                  int64_t ix = ox * j->st[2] - j->before[2] + kx * j->dl[2];
                  if (ix < 0 || ix >= D[2]) continue;
                  s += ld(j->a, ibase + ix) * ld(j->w, wbase + kx);
                }
              }
            }
          st(j->o, (((nn * j->O + o) * OD[0] + oz) * OD[1] + oy) * OD[2] + ox, s);
        }
  }
}

/* A conv as bound: the pointwise sgemm job, or the general one. */
typedef struct ConvBound {
  bool pointwise; /* run as wj over n batch items */
  WJob wj;
  int64_t n;
  ConvJob j;
  int64_t per; /* the general case's work per item */
} ConvBound;

bool bind_conv(Ctx *x, int code, Val *out, uint32_t nout, void **bound) {
  (void)code, (void)nout;
  bool ok = true;
  const Val *a = req_arg(x, MIL_ARG_CONV_x, &ok);
  const Val *w = req_arg(x, MIL_ARG_CONV_weight, &ok);
  const Val *b = opt_arg(x, MIL_ARG_CONV_bias, &ok);
  if (!ok) return false;
  if (a->rank < 3 || a->rank > 5 || w->rank != a->rank)
    return op_fail(x, "x and weight must both have rank 3, 4 or 5 (a 1-D, 2-D or 3-D convolution)");
  uint32_t S = a->rank - 2, lead = 3 - S; /* spatial dims, and the unit dims put before them */
  ConvJob j = {.a = a, .w = w, .b = b, .o = out, .D = {1, 1, 1}, .K = {1, 1, 1}, .st = {1, 1, 1}, .dl = {1, 1, 1}};
  int64_t tmp[6] = {0}, total[3] = {0, 0, 0};
  uint32_t n;
  if (ints_arg(x, MIL_ARG_CONV_strides, tmp, 3, &n, &ok) && n == S) memcpy(j.st + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return op_fail(x, "strides needs %u entries", S);
  if (ints_arg(x, MIL_ARG_CONV_dilations, tmp, 3, &n, &ok) && n == S) memcpy(j.dl + lead, tmp, S * sizeof(int64_t));
  else if (ok && n) return op_fail(x, "dilations needs %u entries", S);
  int64_t groups = to_index(scalar_arg(x, MIL_ARG_CONV_groups, 1, &ok));
  const char *pt = string_arg(x, MIL_ARG_CONV_pad_type, "valid", &ok);
  bool has_pad = ints_arg(x, MIL_ARG_CONV_pad, tmp, 6, &n, &ok);
  if (!ok) return false;
  int64_t N = a->dims[0], C = a->dims[1], O = w->dims[0], CG = w->dims[1];
  for (uint32_t i = 0; i < S; i++) j.D[lead + i] = a->dims[2 + i], j.K[lead + i] = w->dims[2 + i];
  if (groups < 1 || C % groups || O % groups || CG != C / groups)
    return op_fail(x, "groups %lld does not fit %lld input channels and a weight of %lld per group", (long long)groups,
                (long long)C, (long long)CG);
  if (b && b->n != O) return op_fail(x, "bias must have %lld elements", (long long)O);
  bool custom = !strcmp(pt, "custom"), same = !strcmp(pt, "same"), lower = !strcmp(pt, "same_lower");
  if (!custom && !same && !lower && strcmp(pt, "valid")) return op_fail(x, "unknown pad_type '%s'", pt);
  if (custom && (!has_pad || n != 2 * S)) return op_fail(x, "pad_type custom needs pad with %u entries", 2 * S);
  for (uint32_t i = 0; i < 3; i++) {
    if (j.st[i] < 1 || j.dl[i] < 1) return op_fail(x, "strides and dilations must be positive");
    int64_t ek = (j.K[i] - 1) * j.dl[i] + 1;
    if (i < lead) continue;
    uint32_t si = i - lead; /* index into the MIL pad list */
    if (custom) {
      if (tmp[2 * si] < 0 || tmp[2 * si + 1] < 0) return op_fail(x, "pad entries must not be negative");
      j.before[i] = tmp[2 * si], total[i] = tmp[2 * si] + tmp[2 * si + 1];
    } else if (same || lower) {
      int64_t outd = (j.D[i] + j.st[i] - 1) / j.st[i], p = outd * j.st[i] - j.D[i] + ek - j.st[i];
      total[i] = p > 0 ? p : 0;
      j.before[i] = same ? total[i] / 2 : total[i] - total[i] / 2;
    }
  }
  int64_t dims[5] = {N, O};
  for (uint32_t i = 0; i < 3; i++) {
    j.OD[i] = (j.D[i] + total[i] - ((j.K[i] - 1) * j.dl[i] + 1)) / j.st[i] + 1;
    if (i >= lead) dims[2 + i - lead] = j.OD[i];
  }
  if (!expect_shape(x, out, dims, a->rank)) return false;
  bool pointwise = true;
  for (uint32_t i = 0; i < 3; i++) pointwise = pointwise && j.K[i] == 1 && j.st[i] == 1 && total[i] == 0;
  ConvBound cb = {.n = N};
  if (groups == 1 && pointwise && out->st == ST_F32 && a->st == ST_F32 && (w->st == ST_F32 || w->st == ST_H16) &&
      (!b || b->st != ST_STR)) {
    /* A pointwise conv: per batch item, out[O, P] = weight[O, C] * x[C, P]. */
    cb.pointwise = true;
    cb.wj = (WJob){.conv = true, .x = a, .w = w, .b = b, .o = out, .O = O, .K = C, .R = j.D[0] * j.D[1] * j.D[2]};
    wjob_reserve(x, &cb.wj, N);
  } else if (out->n) {
    j.C = C, j.O = O, j.CG = CG, j.OG = O / groups;
    cb.per = out->n / (N * O) * CG * j.K[0] * j.K[1] * j.K[2] + 1;
  }
  cb.j = j;
  *bound = dup_job(&cb, sizeof cb);
  return true;
}

bool k_conv(Ctx *x, int code, Val *out, uint32_t nout) {
  (void)code, (void)nout;
  const ConvBound *cb = x->c->bound[x->si];
  if (cb->pointwise) {
    WJob wj = cb->wj;
    wgemm(x, &wj, cb->n);
    return true;
  }
  if (out->n == 0) return true;
  par_for(x->c, cb->n * cb->j.O, (GRAIN + cb->per - 1) / cb->per, conv_task, (void *)(uintptr_t)&cb->j);
  return true;
}

