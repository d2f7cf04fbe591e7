/*
 * A float matmul on the packed GEMM (k_gemm_pack.c), both operands read in
 * place through their strides: op(x) of every matrix of the batch is packed
 * once per product into the program's packing buffer (rows with k
 * contiguous, x untransposed, or with m contiguous, x transposed, as the dy^T
 * of a weight's gradient), then each piece — PANEL columns by PACK_ROWS rows
 * of one matrix — packs its panel of op(y) GEMM_KC k at a time into the
 * thread's scratch and runs the microkernel over it. No operand is copied
 * out whole per step as OpenBLAS's own packing does for each call.
 *
 * Numerics: k_gemm_pack.c's rule — every output is zero followed by one
 * fused multiply-add per k in order; the pieces depend on the shape alone,
 * so the bits do not depend on the thread count.
 */
#include "cpu_internal.h"

#define PACK_ROWS (40 * GEMM_MR)             /* rows of op(x) per piece */
#define PACK_MAX_FLOATS ((int64_t)1 << 22)   /* op(x) of the whole batch packed at most (16 MiB; see the rule) */

/* The rule (docs/cpu-backend.md, "Linear algebra"), measured on the
 * training benchmark's products against OpenBLAS sgemm (both at one
 * thread): one matrix (no batch) of at most PACK_WIN_ROWS rows — a linear
 * layer's dx = dy W over the step's tokens, and its weight gradient
 * dy^T x where the layer has at most that many outputs. sgemm stays faster
 * for the attention's batches of small matrices and for the gradients of
 * wide layers over few tokens (GPT-2's qkv, fc and classifier: M of 2304 and
 * more, K = 256). A product whose op(x) is over PACK_MAX_FLOATS (GPT-2's
 * d_logits wte, 256 x 50257: as fast either way) keeps sgemm rather than a
 * packing buffer of that size. */
#define PACK_WIN_ROWS 1024
static bool packmm_wins(const PackMm *p) {
  return p->nb == 1 && p->M <= PACK_WIN_ROWS;
}

bool packmm_reserve(Ctx *x, PackMm *p) {
  if (!gemm_packed_fast() || !x->gemm_pack_floats || p->M <= GEMV_ROWS || p->N == 0 || p->K == 0) return false;
  p->mp = (p->M + GEMM_MR - 1) / GEMM_MR * GEMM_MR;
  int64_t need = p->nb * p->mp * p->K;
  if (need > PACK_MAX_FLOATS || !packmm_wins(p)) return false;
  if (need > *x->gemm_pack_floats) *x->gemm_pack_floats = need;
  return true;
}

static GemmSrc src_a(const PackMm *p, int64_t t) {
  return (GemmSrc){.p = fp(p->a) + offset_at(t, p->bdims, p->rbat, p->sa), .si = p->am, .sk = p->ak};
}

/* op(y)'s column n at k: element (n, k) of the column source. */
static GemmSrc src_b(const PackMm *p, int64_t t) {
  return (GemmSrc){.p = fp(p->b) + offset_at(t, p->bdims, p->rbat, p->sb), .si = p->bn, .sk = p->bk};
}

#define PACK_A_K 16 /* k per item when op(x) is transposed */

/* Whether op(x)'s rows run contiguously along m (a transposed x): then it is
 * packed PACK_A_K k at a time across all of its groups, so that the reads
 * follow x's rows instead of striding M floats per k. */
static bool a_along_m(const PackMm *p) { return p->am == 1 && p->ak != 1; }

static int64_t pack_a_items(const PackMm *p) {
  return p->nb * (a_along_m(p) ? (p->K + PACK_A_K - 1) / PACK_A_K : p->mp / GEMM_MR);
}

/* One item: GEMM_MR rows of op(x) of one matrix over all of K, or (along m)
 * PACK_A_K k of all of its rows. */
static void pack_a_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const PackMm *p = arg;
  int64_t groups = p->mp / GEMM_MR, kchunks = (p->K + PACK_A_K - 1) / PACK_A_K;
  for (int64_t it = lo; it < hi; it++) {
    if (a_along_m(p)) {
      int64_t t = it / kchunks, k0 = (it % kchunks) * PACK_A_K, nk = p->K - k0 < PACK_A_K ? p->K - k0 : PACK_A_K;
      GemmSrc s = src_a(p, t);
      for (int64_t r0 = 0; r0 < p->M; r0 += GEMM_MR)
        gemm_pack_rows(p->c->gemm_pack + (t * p->mp + r0) * p->K + k0 * GEMM_MR, s, r0,
                       p->M - r0 < GEMM_MR ? p->M - r0 : GEMM_MR, k0, nk, false);
      continue;
    }
    int64_t t = it / groups, r0 = (it % groups) * GEMM_MR;
    gemm_pack_rows(p->c->gemm_pack + (t * p->mp + r0) * p->K, src_a(p, t), r0,
                   p->M - r0 < GEMM_MR ? p->M - r0 : GEMM_MR, 0, p->K, false);
  }
}

static void piece_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const PackMm *p = arg;
  float *own = p->c->scratch[tid];
  for (int64_t it = lo; it < hi; it++) {
    int64_t t = it / (p->panels * p->blocks), rem = it % (p->panels * p->blocks);
    int64_t n0 = (rem / p->blocks) * PANEL, r0 = (rem % p->blocks) * PACK_ROWS;
    int64_t nn = p->N - n0 < PANEL ? p->N - n0 : PANEL, nr = p->M - r0 < PACK_ROWS ? p->M - r0 : PACK_ROWS;
    float *C = fp(p->o) + t * p->M * p->N + r0 * p->N + n0;
    const float *A = p->c->gemm_pack + (t * p->mp + r0) * p->K;
    GemmSrc b = src_b(p, t);
    for (int64_t k0 = 0; k0 < p->K; k0 += GEMM_KC) {
      int64_t nk = p->K - k0 < GEMM_KC ? p->K - k0 : GEMM_KC;
      gemm_pack_cols(own, b, n0, nn, k0, nk, false);
      gemm_block(A + k0 * GEMM_MR, p->K * GEMM_MR, own, nk * GEMM_NR, nr, nn, nk, C, p->N, k0 > 0, false, NULL);
    }
  }
}

void packmm_run(Ctx *x, PackMm *p) {
  if (p->M == 0 || p->N == 0 || p->nb == 0) return;
  p->c = x->c;
  p->panels = (p->N + PANEL - 1) / PANEL;
  p->blocks = (p->M + PACK_ROWS - 1) / PACK_ROWS;
  par_for(x->c, pack_a_items(p), 1, pack_a_task, p);
  par_for(x->c, p->nb * p->panels * p->blocks, 1, piece_task, p);
}
