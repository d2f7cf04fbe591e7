/*
 * A matmul of fp16-valued operands with a long op(x) and few columns on the
 * AMX tiles (docs/cpu-backend.md, "Linear algebra"): the llama's tied
 * classifier in the backward, dh = dlogits E and dE = dlogits^T h, which
 * sgemm ran, each with its own copies of both operands.
 *
 * op(y) (at most AMXMM_COLS columns) is packed whole into the program's
 * packing buffer, in parallel; then each piece — AMXMM_ROWS rows of op(x)
 * by every column — packs its rows AMX_KC k at a time into the thread's
 * scratch (from op(x) in place, rows or columns contiguous) and adds their
 * product into its sums, which stay in the scratch over all of K. So op(x)
 * (the 131 MB dlogits) is read once and never packed whole, and op(y)'s
 * packing is read once per piece. op(x) may be fp16 bits (a fused cross
 * entropy gradient's dlogits, see choose_fp16_results): half the bytes read.
 *
 * Numerics: the AMX path's (k_gemm_amx.c): the same pieces, blocks, passes
 * and order of k as wgemm's tiles, so the same bits as that path on the
 * same operands, and the same bits at any thread count.
 */
#include "cpu_internal.h"

/* AMXMM_ROWS and AMXMM_COLS (cpu_internal.h): a piece's rows of op(x), and the columns at most */
#define AMXMM_MIN_X ((int64_t)1 << 20) /* floats of op(x) at least */

/* The rule, measured on the llama's backward (ane numerics; docs/cpu-backend.md): one matrix whose operands are
 * fp16 values (an fp16 type; ane numerics round every result to fp16, so two bf16 pieces each, 4 passes), op(x)
 * of at least AMXMM_MIN_X floats, at most AMXMM_COLS columns, and the AMX path's own minimum of rows and k. */
bool amxmm_fits(const Val *a, const Val *b, int64_t nb, int64_t M, int64_t K, int64_t N) {
  return gemm_amx_on() && nb == 1 && (a->st == ST_F32 || a->st == ST_H16) && a->dt == MIL_DT_FP16 && b->dt == MIL_DT_FP16 &&
         (b->st == ST_F32 || b->st == ST_H16) && M >= 32 && K >= 64 && N >= 1 && N <= AMXMM_COLS &&
         M * K >= AMXMM_MIN_X;
}

bool amxmm_reserve(Ctx *x, AmxMm *p) {
  if (!x->gemm_pack_floats || !amxmm_fits(p->a, p->b, 1, p->M, p->K, p->N)) return false;
  int64_t need = (AMX_PACKED_ELEMS(p->N, p->K) + 1) / 2;
  if (need > *x->gemm_pack_floats) *x->gemm_pack_floats = need;
  if (x->amxmm) *x->amxmm = true;
  return true;
}

/* The short operand, packed whole: op(y) as B columns, or (along m) op(y)^T as A rows. */
static GemmSrc src_short(const AmxMm *p) {
  return (GemmSrc){.p = p->b->p, .h16 = p->b->st == ST_H16, .si = p->bn, .sk = p->bk};
}

/* Whether op(x)'s rows run along m (a transposed x, dlogits^T): then the product runs as C^T = op(y)^T op(x)^T,
 * op(x)^T's columns packed two k rows interleaved (no transposes in registers), C^T's blocks transposed back. */
static bool along_m(const AmxMm *p) { return p->am == 1 && p->ak != 1; }

/* One item: 32 of the short side's columns (rows) by AMX_KC k. */
static void pack_short_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  (void)tid;
  const AmxMm *p = arg;
  int64_t kchunks = (p->K + AMX_KC - 1) / AMX_KC;
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = (it / kchunks) * 32, k0 = (it % kchunks) * AMX_KC, n = p->N - j0 < 32 ? p->N - j0 : 32;
    int64_t nk = p->K - k0 < AMX_KC ? p->K - k0 : AMX_KC;
    AmxPacked d = gemm_amx_view(p->c->gemm_pack, p->N, p->K, j0 / 16, k0 / 32);
    if (along_m(p)) gemm_amx_pack_rows(d, src_short(p), j0, n, k0, nk);
    else gemm_amx_pack_cols(d, src_short(p), j0, n, k0, nk);
  }
}

/* The short side's next k range (its first two planes) asked into L2 while this one is packed and multiplied:
 * the tiles' loads would wait for memory otherwise (op(y) packed whole is larger than the caches). */
static void prefetch_short(AmxPacked S, int64_t n, int64_t nkb) {
  int64_t groups = (n + 31) / 32 * 2;
  for (int64_t g = 0; g < groups; g++) {
    const char *t = (const char *)(S.p + (g * S.gstride + nkb) * AMX_PLANES * AMX_TILE_ELEMS);
    for (int64_t b = 0; b < (int64_t)sizeof(uint16_t) * AMX_TILE_ELEMS * AMX_PLANES * nkb; b += 64)
      if (b % (int64_t)(sizeof(uint16_t) * AMX_TILE_ELEMS * AMX_PLANES) < (int64_t)(sizeof(uint16_t) * AMX_TILE_ELEMS * 2))
        __builtin_prefetch(t + b, 0, 1);
  }
}

static void piece_task(void *arg, int64_t lo, int64_t hi, uint32_t tid) {
  const AmxMm *p = arg;
  uint16_t *own = (uint16_t *)(void *)p->c->scratch[tid];
  float *T = (float *)(void *)(own + AMX_PACKED_ELEMS(AMXMM_ROWS, AMX_KC));
  AmxPacked L = {.p = own, .flags = (uint8_t *)(own + (AMXMM_ROWS / 16) * (AMX_KC / 32) * AMX_PLANES * AMX_TILE_ELEMS),
                 .gstride = AMX_KC / 32};
  GemmSrc sx = {.p = p->a->p, .h16 = p->a->st == ST_H16, .si = p->am, .sk = p->ak};
  bool cols = along_m(p);
  int64_t np = (p->N + 31) / 32 * 32;
  for (int64_t it = lo; it < hi; it++) {
    int64_t m0 = it * AMXMM_ROWS, nr = p->M - m0 < AMXMM_ROWS ? p->M - m0 : AMXMM_ROWS;
    for (int64_t k0 = 0; k0 < p->K; k0 += AMX_KC) {
      int64_t nk = p->K - k0 < AMX_KC ? p->K - k0 : AMX_KC, nkb = (nk + 31) / 32;
      AmxPacked S = gemm_amx_view(p->c->gemm_pack, p->N, p->K, 0, k0 / 32);
      if (k0 + AMX_KC < p->K) prefetch_short(S, p->N, nkb);
      if (cols) {
        gemm_amx_pack_cols(L, sx, m0, nr, k0, nk);
        gemm_amx_block(S, L, p->N, nr, nkb, T, AMXMM_ROWS, k0 > 0);
      } else {
        gemm_amx_pack_rows(L, sx, m0, nr, k0, nk);
        gemm_amx_block(L, S, nr, p->N, nkb, T, np, k0 > 0);
      }
    }
    float *C = fp(p->o) + m0 * p->N;
    if (cols) gemm_amx_store_transposed(T, AMXMM_ROWS, p->N, nr, NULL, C, p->N);
    else
      for (int64_t r = 0; r < nr; r++) memcpy(C + r * p->N, T + r * np, (size_t)p->N * sizeof(float));
  }
}

void amxmm_run(Ctx *x, AmxMm *p) {
  p->c = x->c;
  par_for(x->c, (p->N + 31) / 32 * ((p->K + AMX_KC - 1) / AMX_KC), 1, pack_short_task, p);
  par_for(x->c, (p->M + AMXMM_ROWS - 1) / AMXMM_ROWS, 1, piece_task, p);
}
