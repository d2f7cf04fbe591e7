/*
 * The CPU backend's internals, shared by the files of runtime/cpu/ (see
 * docs/cpu-backend.md for how they fit together). Nothing here is API.
 */
#ifndef ORION_CPU_INTERNAL_H
#define ORION_CPU_INTERNAL_H

#include "orion/cpu.h"

#include <stdatomic.h>
#include <string.h>

#include <pthread.h>

#include "orion/fp16.h"
#include "orion/mil_ops.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86 1
#include <immintrin.h>
#else
#define HAVE_X86 0
#endif

/* ---- values ---- */

enum { ST_NONE, ST_F32, ST_I32, ST_H16, ST_STR };

typedef struct Val {
  MilDType dt;
  uint8_t st;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  int64_t n;
  void *p; /* n elements of the storage class; never written through for params and consts */
  const char *str;
} Val;

/* What a slot is in the plan. */
enum { SK_PARAM, SK_CONST, SK_STR, SK_VIEW, SK_RESULT };

typedef struct Slot {
  uint8_t kind;
  bool owned;     /* SK_CONST: p was allocated here */
  uint32_t src;   /* SK_VIEW: the slot viewed */
  int64_t off;    /* planned arena offset (SK_RESULT, converted params); -1 none */
  int32_t weight; /* SK_CONST from a BLOBFILE: its index in orion_weight(); -1 otherwise */
  uint32_t last;  /* planning: time of the last use */
  int32_t tile;   /* a result inside a fused group only: its tile buffer there (no planned buffer); -1 otherwise */
  struct SharedCopy *shared; /* SK_CONST: the context's fp32 copy of its fp16 weight that p points at, or NULL */
  uint64_t seen;             /* with shared: the copy's conversion this slot last took up (SharedCopy.epoch) */
} Slot;

typedef struct Ctx Ctx;
/* A kernel computes the results of statement x->s into out[0..nout), whose
 * storage is ready with the declared shapes. `code` selects a variant. A
 * kernel whose op has a binder runs the job in x->c->bound[x->si]. */
typedef bool (*Kernel)(Ctx *x, int code, Val *out, uint32_t nout);

/* ---- the op table ---- */

/* What kind of computation an op is. The plan's decisions (views, fusion,
 * fp16 weights, scratch) read an op's family and code, never its kernel or
 * its name. */
typedef enum OpFamily {
  OF_UNARY,     /* float element-wise, one operand */
  OF_BINARY,    /* element-wise arithmetic, two broadcast operands */
  OF_COMPARE,   /* element-wise comparisons: bool results */
  OF_LOGICAL,   /* element-wise on bools */
  OF_SELECT,    /* select */
  OF_CAST,      /* cast */
  OF_SOFTMAX,   /* softmax */
  OF_REDUCE,    /* reduce_sum, reduce_mean, reduce_max */
  OF_NORM,      /* layer_norm */
  OF_RESHAPE,   /* reshape, identity: a view when the dtype is kept (planned as view_entry), else a copy */
  OF_VIEW,      /* view_entry: shows its operand's elements */
  OF_TRANSPOSE, /* transpose */
  OF_SHAPE,     /* the other shape ops: slices, split, concat, gathers, ... */
  OF_INDEX,     /* indices of extremes: reduce_argmax, reduce_argmin, topk */
  OF_POOL,      /* max_pool, avg_pool */
  OF_QUANT,     /* quantize, dequantize */
  OF_RECURRENT, /* lstm */
  OF_MATMUL,    /* matmul */
  OF_LINEAR,    /* linear */
  OF_CONV,      /* conv */
  OF_ATTENTION, /* scaled_dot_product_attention */
} OpFamily;

/* One row per MIL op the backend runs: X(ID, family, kernel, variant,
 * binder), ID being the op's MilOpId without MIL_OP_ (include/orion/
 * mil_ops.def gives its name and arguments, so a row naming an op the MIL
 * table lacks does not compile). optable.c expands it into the table,
 * indexed by MilOpId. The binder decodes and checks the statement's
 * arguments at prepare; its kernel then reads only what it bound. */
#define CPU_OPS(X) \
  X(IDENTITY, OF_RESHAPE, k_copy, 0, bind_copy)                                         \
  X(RELU, OF_UNARY, k_unary, U_RELU, bind_unary)                                        \
  X(TANH, OF_UNARY, k_unary, U_TANH, bind_unary)                                        \
  X(SIGMOID, OF_UNARY, k_unary, U_SIGMOID, bind_unary)                                  \
  X(SILU, OF_UNARY, k_unary, U_SILU, bind_unary)                                        \
  X(GELU, OF_UNARY, k_unary, U_GELU, bind_unary)                                        \
  X(EXP, OF_UNARY, k_unary, U_EXP, bind_unary)                                          \
  X(LOG, OF_UNARY, k_unary, U_LOG, bind_unary)                                          \
  X(SQRT, OF_UNARY, k_unary, U_SQRT, bind_unary)                                        \
  X(RSQRT, OF_UNARY, k_unary, U_RSQRT, bind_unary)                                      \
  X(ABS, OF_UNARY, k_unary, U_ABS, bind_unary)                                          \
  X(CLIP, OF_UNARY, k_unary, U_CLIP, bind_unary)                                        \
  X(ADD, OF_BINARY, k_binary, B_ADD, bind_binary)                                       \
  X(SUB, OF_BINARY, k_binary, B_SUB, bind_binary)                                       \
  X(MUL, OF_BINARY, k_binary, B_MUL, bind_binary)                                       \
  X(REAL_DIV, OF_BINARY, k_binary, B_DIV, bind_binary)                                  \
  X(POW, OF_BINARY, k_binary, B_POW, bind_binary)                                       \
  X(MAXIMUM, OF_BINARY, k_binary, B_MAX, bind_binary)                                   \
  X(MINIMUM, OF_BINARY, k_binary, B_MIN, bind_binary)                                   \
  X(EQUAL, OF_COMPARE, k_binary, B_EQ, bind_binary)                                     \
  X(NOT_EQUAL, OF_COMPARE, k_binary, B_NE, bind_binary)                                 \
  X(LESS, OF_COMPARE, k_binary, B_LT, bind_binary)                                      \
  X(LESS_EQUAL, OF_COMPARE, k_binary, B_LE, bind_binary)                                \
  X(GREATER, OF_COMPARE, k_binary, B_GT, bind_binary)                                   \
  X(GREATER_EQUAL, OF_COMPARE, k_binary, B_GE, bind_binary)                             \
  X(LOGICAL_AND, OF_LOGICAL, k_binary, B_AND, bind_binary)                              \
  X(LOGICAL_OR, OF_LOGICAL, k_binary, B_OR, bind_binary)                                \
  X(LOGICAL_XOR, OF_LOGICAL, k_binary, B_XOR, bind_binary)                              \
  X(LOGICAL_NOT, OF_LOGICAL, k_unary, U_NOT, bind_unary)                                \
  X(FLOOR, OF_UNARY, k_unary, U_FLOOR, bind_unary)                                      \
  X(FLOOR_DIV, OF_BINARY, k_binary, B_FDIV, bind_binary)                                \
  X(SELECT, OF_SELECT, k_select, 0, bind_select)                                        \
  X(CAST, OF_CAST, k_cast, 0, bind_cast)                                                \
  X(SOFTMAX, OF_SOFTMAX, k_softmax, 0, bind_softmax)                                    \
  X(REDUCE_SUM, OF_REDUCE, k_reduce, R_SUM, bind_reduce)                                \
  X(REDUCE_MEAN, OF_REDUCE, k_reduce, R_MEAN, bind_reduce)                              \
  X(REDUCE_MAX, OF_REDUCE, k_reduce, R_MAX, bind_reduce)                                \
  X(LAYER_NORM, OF_NORM, k_layer_norm, 0, bind_layer_norm)                              \
  X(RESHAPE, OF_RESHAPE, k_copy, 0, bind_copy)                                          \
  X(TRANSPOSE, OF_TRANSPOSE, k_transpose, 0, bind_transpose)                            \
  X(SLICE_BY_INDEX, OF_SHAPE, k_slice, 0, bind_slice)                                   \
  X(SLICE_BY_SIZE, OF_SHAPE, k_slice_size, 0, bind_slice_size)                          \
  X(SPLIT, OF_SHAPE, k_split, 0, bind_split)                                            \
  X(CONCAT, OF_SHAPE, k_concat, 0, bind_concat)                                         \
  X(GATHER, OF_SHAPE, k_gather, 0, bind_gather)                                         \
  X(GATHER_ALONG_AXIS, OF_SHAPE, k_gather_axis, 0, bind_gather_axis)                    \
  X(EXPAND_DIMS, OF_SHAPE, k_copy_elements, 0, bind_expand_dims)                        \
  X(SQUEEZE, OF_SHAPE, k_copy_elements, 0, bind_squeeze)                                \
  X(STACK, OF_SHAPE, k_stack, 0, bind_stack)                                            \
  X(TILE, OF_SHAPE, k_tile, 0, bind_tile)                                               \
  X(PAD, OF_SHAPE, k_pad, 0, bind_pad)                                                  \
  X(SHAPE, OF_SHAPE, k_shape, 0, bind_shape)                                            \
  X(RANGE_1D, OF_SHAPE, k_range, 0, bind_range)                                         \
  X(REDUCE_ARGMAX, OF_INDEX, k_argreduce, 1, bind_argreduce)                            \
  X(REDUCE_ARGMIN, OF_INDEX, k_argreduce, 0, bind_argreduce)                            \
  X(TOPK, OF_INDEX, k_topk, 0, bind_topk)                                               \
  X(MAX_POOL, OF_POOL, k_pool, 0, bind_pool)                                            \
  X(AVG_POOL, OF_POOL, k_pool, 1, bind_pool)                                            \
  X(QUANTIZE, OF_QUANT, k_quant, 0, bind_quant)                                         \
  X(DEQUANTIZE, OF_QUANT, k_quant, 1, bind_quant)                                       \
  X(LSTM, OF_RECURRENT, k_lstm, 0, bind_lstm)                                           \
  X(MATMUL, OF_MATMUL, k_matmul, 0, bind_matmul)                                        \
  X(SCALED_DOT_PRODUCT_ATTENTION, OF_ATTENTION, k_sdpa, 0, bind_sdpa)                   \
  X(LINEAR, OF_LINEAR, k_linear, 0, bind_linear)                                        \
  X(CONV, OF_CONV, k_conv, 0, bind_conv)


/* The arguments that one binder reads for several ops, each named by the id
 * of one of them (the lookup takes the statement's own argument of the
 * name; test_mil_ops checks that every op the binder runs has it). */
#define SHARED_x MIL_ARG_RELU_x                 /* the operand of unary ops, reshape, reductions, ... */
#define SHARED_y MIL_ARG_ADD_y                  /* binary ops' second operand */
#define SHARED_weight MIL_ARG_CONV_weight       /* conv, linear */
#define SHARED_axes MIL_ARG_REDUCE_SUM_axes     /* reduce_* */
#define SHARED_keep_dims MIL_ARG_REDUCE_SUM_keep_dims
#define SHARED_axis MIL_ARG_REDUCE_ARGMAX_axis  /* reduce_argmax, reduce_argmin */
#define SHARED_arg_keep_dims MIL_ARG_REDUCE_ARGMAX_keep_dims
#define SHARED_arg_output_dtype MIL_ARG_REDUCE_ARGMAX_output_dtype
#define SHARED_kernel_sizes MIL_ARG_MAX_POOL_kernel_sizes /* max_pool, avg_pool */
#define SHARED_strides MIL_ARG_MAX_POOL_strides
#define SHARED_pad_type MIL_ARG_MAX_POOL_pad_type
#define SHARED_pad MIL_ARG_MAX_POOL_pad
#define SHARED_ceil_mode MIL_ARG_MAX_POOL_ceil_mode
#define SHARED_input MIL_ARG_QUANTIZE_input    /* quantize, dequantize */
#define SHARED_scale MIL_ARG_QUANTIZE_scale
#define SHARED_zero_point MIL_ARG_QUANTIZE_zero_point
#define SHARED_quant_axis MIL_ARG_QUANTIZE_axis

/* Decodes and checks the arguments of statement x->s at prepare into a new
 * *bound (its kernel's job), reporting at the statement. */
typedef bool (*Binder)(Ctx *x, int code, Val *out, uint32_t nout, void **bound);

typedef struct OpEntry {
  Kernel fn;
  Binder bind; /* NULL: the kernel reads its arguments when it runs */
  int code; /* the kernel's variant (U_*, B_*, R_*, ...) */
  uint8_t family; /* OpFamily */
  uint16_t op;    /* MilOpId; MIL_OP_COUNT for view_entry, which is the backend's own */
} OpEntry;



/* ---- the thread pool ---- */

typedef void (*TaskFn)(void *arg, int64_t lo, int64_t hi, uint32_t tid);

typedef struct Worker Worker;

typedef struct Pool {
  uint32_t n; /* threads, the caller's included */
  pthread_t *th;
  Worker *workers; /* per thread (index 0, the caller, unused) */
  pthread_mutex_t mu; /* guards the sleep (claims take no lock) */
  pthread_cond_t cv;
  atomic_uint gen;      /* bumped for each job */
  atomic_uint sleepers; /* workers waiting on cv */
  atomic_bool quit;
  /* The job: written by the caller while `claim` is exhausted, read by a
   * thread only after it claimed a piece (the job cannot end before that
   * piece is done, so they do not change under it). */
  TaskFn fn;
  void *arg;
  int64_t items, chunk, first; /* pieces first, first + 1, ... of [0, items) in pieces of chunk */
  atomic_ullong claim;  /* the next piece (high 32 bits) and the pieces (low 32): one CAS claims one */
  atomic_llong done;    /* pieces finished */
  int64_t max_job_pieces; /* pieces a claim word holds (below 2^32; tests set fewer) */
  atomic_bool in_run;   /* between pool_run_begin and pool_run_end: the workers spin, never sleep */
  /* What the hand-off did (pool_stats): read by tests and profiling, never by the pool itself. */
  atomic_ullong jobs, jobs_asleep; /* parallel jobs; those published while a worker slept */
  atomic_ullong wakes, wake_ns;    /* a worker's wake-ups from a job or run start, and their latency */
  atomic_llong published_ns;       /* when the last sleeper was signalled */
  atomic_ullong caller_wait_ns;    /* the caller's waits for pieces other threads held */
} Pool;

struct Worker {
  Pool *pool;
  uint32_t id;
  atomic_ullong pieces; /* pieces this thread ran (index 0: the caller's) */
};

/* The counters of a pool's hand-off since it started. */
typedef struct PoolStats {
  uint64_t jobs;        /* par_for calls split over more than one thread */
  uint64_t jobs_asleep; /* of those, published while a worker was asleep */
  uint64_t wakes;       /* wake-ups of a sleeping worker */
  double wake_ms;       /* their summed latency, signal to running */
  double caller_wait_ms; /* the caller's summed waits, its last piece done to the job done */
  uint64_t pieces[8];   /* pieces run by threads 0 (the caller) .. 7 */
} PoolStats;

/* An fp16 weight the plan keeps as fp32 (for sgemm) is converted once for
 * every program of the context that reads the same weight data: a training
 * package's forward and backward declare a param each and read the same
 * blob. `version` and `epoch` tell a reload whether another program already
 * converted it from the current bytes (docs/cpu-backend.md, "Weight
 * updates"). */
typedef struct SharedCopy {
  struct SharedCopy *next;
  const void *src; /* the fp16 data */
  int64_t n;
  float *data;
  uint32_t users;   /* slots reading it */
  uint64_t version; /* orion_weights_version of the program when last converted */
  uint64_t epoch;   /* conversions so far */
} SharedCopy;

/* A backend instance (cpu_context_open): the pool every program prepared
 * in it runs on, one run at a time. */
struct CpuContext {
  Pool pool;
  pthread_mutex_t run_mu; /* held for the whole of each run of any of its programs */
  pthread_mutex_t shared_mu;  /* guards `shared` */
  struct SharedCopy *shared;  /* fp32 copies of fp16 weights, one per weight data its programs read (weights.c) */
};

/* How a statement runs once the plan has fused it with others (see
 * "Fusion" in docs/cpu-backend.md): as itself, not at all (another
 * statement computes what is needed of it), or as a fused linear. */
enum { FZ_NONE, FZ_ELIDED, FZ_LINEAR, FZ_GROUP, FZ_MEMBER, FZ_XENT_GRAD, FZ_XENT_PICK, FZ_ATTENTION };

typedef struct Fused {
  uint8_t kind;
  bool round_mid, round_out; /* FZ_LINEAR: ANE rounding of the product, and of the result */
  uint32_t xs, bs, ys;       /* FZ_LINEAR: x [B, P, K] untransposed; bias [O] (UINT32_MAX none); result [B, P, O] */
  uint32_t end;              /* FZ_GROUP (its first statement), FZ_MEMBER (the others): the statement after the group */
  uint32_t gfirst;           /* FZ_LINEAR: the first statement of the group it runs as its epilogue (0: none) */
  int64_t rowlen;            /* FZ_GROUP: 0, or a row group's row length (see fuse_groups) */
  bool epi;                  /* a statement of a group run as a fused linear's epilogue (not on its own) */
  bool self_round;           /* FZ_NONE: its kernel rounds its fp16 result piece by piece (ANE mode) */
  struct GroupJob *group;    /* FZ_GROUP: the group's job, bound at prepare */
  /* FZ_XENT_GRAD (the last statement of a cross entropy's gradient chain, see fuse_xent_grad): xs the logits,
   * bs the targets (one per row), ss the scale (UINT32_MAX none), subtracted `differs` or `equals` where a
   * class is not or is the row's target; round_out: the result is rounded to fp16 (a cast ends the chain);
   * xcast the elided cast of fp16 logits xs to fp32 (UINT32_MAX none): its only reader, so an fp16 input xs
   * can be read in place (choose_fp16_inputs).
   * FZ_XENT_PICK (a cross entropy's gather of its targets' shifted logits, see fuse_xent_pick): xs the logits
   * x [.., C], bs their row maxima m [.., 1]; the gather reads x[i] - m[i / C] instead of the shifted values. */
  uint32_t ss, xcast;
  float differs, equals;
  /* FZ_ATTENTION (the head merge's transpose ending an attention, see fuse_attention): q, k and v are the
   * columns aoff[i] + h adim.. (v's: + h DV) of the rows of slot asrc[i] ([B, T, W]); amask the additive
   * [L, S] mask and ascale the scores' const scalar factor (UINT32_MAX none); round_out: ANE rounding of
   * every step. */
  uint32_t asrc[3], amask, ascale;
  int64_t aoff[3], adim;
} Fused;

struct CpuProgram {
  OrionProgram *prog;
  uint32_t fn;
  const MilFunc *f;
  CpuNumerics mode;
  uint32_t nslots;       /* params, statement results, then literal operands */
  uint32_t *base;        /* per statement: the slot of its first result */
  const OpEntry **ops;   /* per statement: its kernel (NULL for const) */
  uint32_t *argbase;     /* per statement: index into argstart of its first argument */
  uint32_t *argstart;    /* per argument: index into opslot of its first item */
  uint32_t *opslot;      /* per argument item: the slot it reads */
  const MilOpInfo **mil; /* per statement: its op in the MIL op table (NULL: not in it) */
  uint32_t *argposbase;  /* per statement: index into argpos of its op's first table argument */
  uint32_t *argpos;      /* per table argument of each statement's op: the statement's argument, UINT32_MAX absent */
  Slot *slots;
  Val *vals;             /* the values: consts persist, the rest is set each run */
  unsigned char *arena;  /* planned buffers */
  size_t arena_bytes;
  uint32_t nin, nout;
  uint32_t *in_param;    /* per API input: the MIL parameter index */
  uint32_t *out_slot;    /* per API output: the slot returned */
  uint32_t *out_root;    /* per API output: that slot with views followed */
  bool *out_direct;      /* per API output: written by its op into the caller's buffer */
  CpuContext *ctx;       /* the backend instance it runs in */
  bool owns_ctx;         /* a private one (cpu_prepare, cpu_prepare_with), closed by cpu_free */
  uint32_t nthreads;     /* the context's threads: the per-thread buffers below */
  float **scratch;       /* per thread: panel of converted fp16 weights, or sdpa's scores */
  int64_t scratch_floats;
  float *gemm_pack;      /* the packed GEMM's activations, packed once per product (k_linalg.c), or NULL */
  int64_t gemm_pack_floats; /* its size: the largest a bound product needs */
  bool amxmm;               /* a matmul runs on k_matmul_amx.c (its pieces need AMXMM_PIECE_FLOATS of scratch) */
  bool check_finite;
  bool unfused;          /* CpuOptions.unfused: plan no fusion */
  CpuStmtTime *prof;     /* profiling: one entry per timed statement, NULL when off */
  uint32_t nprof;
  uint32_t *prof_of;     /* per statement: its entry in prof, UINT32_MAX for none */
  Fused *fz;             /* per statement: how it runs (all FZ_NONE when nothing is fused) */
  void **bound;          /* per statement: its kernel's job, made by the op's binder (NULL: none) */
  bool *setting;         /* per slot: a const some binder read as a scalar, string or list argument */
  bool bound_ok;         /* every statement bound (false after a weight update whose binding failed) */
  uint32_t ntiles;       /* tile buffers the largest fused group needs */
  int64_t tile_floats;   /* the size of one */
  float **tiles;         /* per thread: ntiles tile buffers of tile_floats floats */
  uint64_t fp16_inputs_converted; /* fp16 inputs converted into the arena, over all runs (a test hook) */
};

/* The state of one statement's execution. */
struct Ctx {
  const CpuProgram *c;
  Val *vals;
  Diag *d;
  const MilStmt *s;
  uint32_t si;
  bool binding; /* at prepare: scalar, string and list arguments must be constants */
  bool *setting; /* binding: per slot, set when it is read as such an argument */
  int64_t *gemm_pack_floats; /* binding: raised to what each packed product needs (wjob_reserve) */
  bool *amxmm;               /* binding: set when a matmul runs on k_matmul_amx.c */
};

/* Work is cut into pieces of about GRAIN elements' worth. */
#define GRAIN 16384

/* ---- small value helpers (inline: the kernels' slow paths call them per element) ---- */

static inline int64_t elements(const int64_t *dims, uint32_t rank) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= dims[i];
  return n;
}

static inline void strides_of(const int64_t *dims, uint32_t rank, int64_t *st) {
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    st[i] = s;
    s *= dims[i];
  }
}

/* The offset, in a tensor with per-dimension strides st (aligned with the
 * dims of `shape`), of the element at row-major position flat of shape. */
static inline int64_t offset_at(int64_t flat, const int64_t *dims, uint32_t rank, const int64_t *st) {
  int64_t off = 0;
  for (uint32_t i = rank; i-- > 0;) {
    off += (flat % dims[i]) * st[i];
    flat /= dims[i];
  }
  return off;
}

static inline bool dtype_held(MilDType t) {
  return t == MIL_DT_FP16 || t == MIL_DT_FP32 || t == MIL_DT_INT32 || t == MIL_DT_BOOL;
}

static inline bool is_float(MilDType t) { return t == MIL_DT_FP16 || t == MIL_DT_FP32; }

/* Consts may also hold the small integer types that constexpr_* ops take
 * (quantized data, zero points), stored as int32 like int32 values. */
static inline bool dtype_const_ok(MilDType t) {
  return dtype_held(t) || t == MIL_DT_INT8 || t == MIL_DT_UINT8 || t == MIL_DT_INT16 || t == MIL_DT_UINT16;
}

/* Doubles from MIL constants or inputs may be huge or NaN; casting those to an integer is undefined,
 * so they saturate (NaN to the most negative value), which every caller then rejects as out of range. */
static inline int64_t to_index(double d) {
  if (!(d >= -9.2e18)) return INT64_MIN;
  if (d >= 9.2e18) return INT64_MAX;
  return (int64_t)d;
}

static inline int32_t sat32(double v) {
  if (!(v >= -2147483648.0)) return INT32_MIN;
  if (v >= 2147483647.0) return INT32_MAX;
  return (int32_t)v;
}

/* Element i of v as a double (the slow paths' access). */
static inline double ld(const Val *v, int64_t i) {
  switch (v->st) {
  case ST_F32: return (double)((const float *)v->p)[i];
  case ST_I32: return ((const int32_t *)v->p)[i];
  case ST_H16: {
    uint16_t h;
    memcpy(&h, (const unsigned char *)v->p + 2 * i, 2);
    return (double)fp16_to_float(h);
  }
  default: return 0;
  }
}

/* Stores r as element i of result v: one rounding to float, or to an
 * integer (int32 saturates, bool is r != 0). */
static inline void st(Val *v, int64_t i, double r) {
  if (v->st == ST_F32) ((float *)v->p)[i] = (float)r;
  else if (v->dt == MIL_DT_BOOL) ((int32_t *)v->p)[i] = r != 0;
  else ((int32_t *)v->p)[i] = sat32(r);
}

static inline float *fp(const Val *v) { return v->p; }

static inline uint8_t storage_of(MilDType t) { return is_float(t) ? ST_F32 : t == MIL_DT_STRING ? ST_STR : ST_I32; }

static inline void *alloc_elems(int64_t n, size_t es) { return xcalloc(n > 0 ? (size_t)n : 1, es); }

/* ---- the jobs that fused statements share with their kernels ---- */

enum { U_RELU, U_TANH, U_SIGMOID, U_SILU, U_GELU, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_ABS, U_IDENTITY, U_CLIP, U_NOT, U_FLOOR };

typedef struct UnaryJob {
  int code, gelu;
  bool avx2; /* the CPU has AVX2 and FMA (cpu_features) */
  bool round16; /* unfused, ANE mode, an fp16 result: each piece rounded as it is made (run.c skips its pass) */
  double eps, lo, hi;
  const Val *a;
  Val *o;
} UnaryJob;

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_FDIV, /* comparisons, bool results: */ B_EQ, B_NE, B_LT, B_LE, B_GT,
       B_GE, /* bool operands and results: */ B_AND, B_OR, B_XOR };

static inline bool is_compare(int code) { return code >= B_EQ && code <= B_GE; }
static inline bool is_logical(int code) { return code >= B_AND; }

/* One broadcast element-wise op over a collapsed shape: rows of `inner`
 * output elements, operand a (b) advancing by sa (sb) along a row and
 * starting at the offset its outer strides give. */
typedef struct BinJob {
  int code;
  bool avx2;
  bool round16; /* as UnaryJob's */
  const Val *a, *b;
  Val *o;
  uint32_t nouter;
  int64_t odims[MIL_MAX_RANK], ast[MIL_MAX_RANK], bst[MIL_MAX_RANK];
  int64_t inner, sa, sb, chunks;
} BinJob;

enum { R_SUM, R_MEAN, R_MAX };

/* A reduction of contiguous trailing blocks: output element i reduces
 * input elements [i * count, (i + 1) * count). */
typedef struct RedJob {
  int code;
  bool avx2; /* the CPU has AVX2 (cpu_features): R_MAX's vector pass */
  const Val *a;
  Val *o;
  int64_t count;
} RedJob;

#define PANEL 128  /* output channels per piece of linear / conv */

/* linear and pointwise conv: out = W x (+ bias) with W [O, K]. For linear
 * x is [rows, K] and out [rows, O] (conv: false); for conv, per batch item,
 * x is [K, P] and out [O, P] (conv: true). Pieces: batch item x panel of O
 * x block of rows / P. */
typedef struct WJob {
  const CpuProgram *c;
  bool conv;
  const Val *x, *w, *b;
  Val *o;
  int64_t O, K, R; /* R: rows (linear) or P (conv) */
  int64_t panels, blocks;
  bool packed; /* run on the packed GEMM (wjob_reserve decided at binding) */
  bool w_kn;   /* the weight is [K, O] (a matmul's y read in place), not [O, K]; packed only */
  bool amx;    /* packed, on the AMX tiles (k_gemm_amx.c) */
  /* A fused linear's epilogue (linear layout only; b is then NULL): each
   * piece's products rounded to fp16 (round_mid), then post[o] added, then
   * rounded to fp16 again (round_out), as the unfused statements would. */
  const float *post;
  bool round_mid, round_out;
  const struct GroupJob *epi; /* a fused linear's epilogue group, run on each row of each piece */
} WJob;

#define GROUP_MAX 32
#define GROUP_TILE 2048

typedef bool (*CxFn)(Ctx *x, Val *out);

typedef struct GroupJob GroupJob;

/* ---- across the files ---- */

/* What the kernels may use beyond the baseline ISA; detected once. */
typedef struct CpuFeatures {
  bool f16c; /* F16C (and AVX): fp16 <-> fp32 in hardware */
  bool avx2; /* AVX2 and FMA */
  bool avx512; /* AVX-512 F, BW and VL (with F16C and FMA) */
  bool amx;    /* AMX-TILE and AMX-BF16 with the OS's tile state granted, and ORION_CPU_AMX not 0 */
} CpuFeatures;
/* features.c */
const CpuFeatures *cpu_features(void);

/* pool.c */
void par_for(const CpuProgram *c, int64_t items, int64_t chunk, TaskFn fn, void *arg);
void pool_start(Pool *p, uint32_t n);
void pool_stop(Pool *p);
void pool_run_begin(Pool *p);
void pool_run_end(Pool *p);
void pool_stats(const Pool *p, PoolStats *out);
uint32_t pool_threads_for(uint32_t requested);
/* fp16.c */
void h2f(float *d, const void *s, int64_t n);
void round16(float *p, int64_t n);
/* values.c */
/* Reports `op: message` at the running statement; returns false. */
bool op_fail(Ctx *x, const char *fmt, ...) ORION_PRINTF(2, 3);
void shape_str(const int64_t *dims, uint32_t rank, char *buf, size_t len);
bool expect_shape(Ctx *x, const Val *v, const int64_t *dims, uint32_t rank);
void val_shape(Val *v, const MilType *t);
bool literal_val(const MilLiteral *l, Val *v, const char **why);
/* args.c: a statement's arguments by the MIL op table's ids (MIL_ARG_CONV_weight),
 * resolved through the per-statement map prepare builds. An id of another op stands
 * for the statement's own argument of that name: binders shared by several ops (one
 * for all unary ops, ...) name an argument by one op's id (the SHARED_ ids below). */
void arg_map(CpuProgram *c);
const MilArg *stmt_arg(const CpuProgram *c, uint32_t si, MilArgId id);
static inline const MilArg *find_arg(const Ctx *x, MilArgId id) { return stmt_arg(x->c, x->si, id); }
const Val *arg_item(Ctx *x, const MilArg *a, uint32_t j);
uint32_t arg_slot(const CpuProgram *c, uint32_t si, MilArgId id);
const Val *opt_arg(Ctx *x, MilArgId id, bool *ok);
const Val *req_arg(Ctx *x, MilArgId id, bool *ok);
double scalar_arg(Ctx *x, MilArgId id, double dflt, bool *ok);
const char *string_arg(Ctx *x, MilArgId id, const char *dflt, bool *ok);
bool ints_arg(Ctx *x, MilArgId id, int64_t *buf, uint32_t max, uint32_t *n, bool *ok);
bool ints_of(Ctx *x, MilArgId id, const Val *v, int64_t *buf, uint32_t max, uint32_t *n, bool *ok);
const Val *const_or_run(Ctx *x, const Val *v, bool *is_const);
bool norm_axis(Ctx *x, int64_t axis, uint32_t rank, uint32_t *out);
bool bcast_strides(Ctx *x, const Val *in, const Val *out, int64_t *bst);
/* k_elementwise.c */
void unary_f32(const UnaryJob *j, const float *restrict a, float *restrict o, int64_t n);
bool k_unary(Ctx *x, int code, Val *out, uint32_t nout);
uint32_t collapse_dims(uint32_t rank, int64_t *dims, int64_t **strides, uint32_t nops);
void bin_range(const BinJob *j, int64_t e0, int64_t e1, const float *pa, int64_t a0, const float *pb, int64_t b0,
               float *po, int64_t o0);
bool k_binary(Ctx *x, int code, Val *out, uint32_t nout);
bool k_select(Ctx *x, int code, Val *out, uint32_t nout);
bool k_cast(Ctx *x, int code, Val *out, uint32_t nout);
/* k_reduce.c */
bool k_softmax(Ctx *x, int code, Val *out, uint32_t nout);
void reduce_rows(const RedJob *j, const float *in, float *o, int64_t n);
const RedJob *reduce_job(const CpuProgram *c, uint32_t si);
bool k_reduce(Ctx *x, int code, Val *out, uint32_t nout);
bool k_layer_norm(Ctx *x, int code, Val *out, uint32_t nout);
/* k_shape.c */
bool same_class(Ctx *x, const Val *a, const Val *out);
bool k_view(Ctx *x, int code, Val *out, uint32_t nout);
bool k_copy(Ctx *x, int code, Val *out, uint32_t nout);
bool k_transpose(Ctx *x, int code, Val *out, uint32_t nout);
bool k_slice(Ctx *x, int code, Val *out, uint32_t nout);
bool k_slice_size(Ctx *x, int code, Val *out, uint32_t nout);
bool k_split(Ctx *x, int code, Val *out, uint32_t nout);
bool k_concat(Ctx *x, int code, Val *out, uint32_t nout);
bool k_gather(Ctx *x, int code, Val *out, uint32_t nout);
bool copy_from(Ctx *x, const Val *a);
bool k_copy_elements(Ctx *x, int code, Val *out, uint32_t nout);
bool k_stack(Ctx *x, int code, Val *out, uint32_t nout);
bool k_tile(Ctx *x, int code, Val *out, uint32_t nout);
bool k_pad(Ctx *x, int code, Val *out, uint32_t nout);
bool k_shape(Ctx *x, int code, Val *out, uint32_t nout);
bool k_range(Ctx *x, int code, Val *out, uint32_t nout);
bool k_gather_axis(Ctx *x, int code, Val *out, uint32_t nout);
/* k_misc.c */
bool k_argreduce(Ctx *x, int code, Val *out, uint32_t nout);
bool k_topk(Ctx *x, int code, Val *out, uint32_t nout);
bool k_pool(Ctx *x, int code, Val *out, uint32_t nout);
bool k_quant(Ctx *x, int code, Val *out, uint32_t nout);
bool k_lstm(Ctx *x, int code, Val *out, uint32_t nout);
/* k_linalg.c */
int64_t panel_ld(int64_t K);
void wgemm(Ctx *x, WJob *j, int64_t batch);
bool k_matmul(Ctx *x, int code, Val *out, uint32_t nout);
bool matmul_reads_fp16(const CpuProgram *c, uint32_t si, uint32_t slot);
bool matmul_packs_fp16(const CpuProgram *c, uint32_t si, uint32_t slot);
bool matmul_streams_fp16_x(const CpuProgram *c, uint32_t si, uint32_t slot);
/* k_gemv.c: products with at most GEMV_ROWS rows on the short side S, the
 * long side L streamed once (fp16 in place when h16). dot: out[i*oi + j*oj]
 * = sum_k s[i*lds + k*sk] h[j*ldh + k]; axpy: sum_k s[i*lds + k] h[k*ldh + j]. */
#define GEMV_ROWS 8
void gemv_dot(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh, int64_t L,
              int64_t K, float *out, int64_t oi, int64_t oj);
void gemv_axpy(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L, int64_t K,
               float *out, int64_t oi, int64_t oj);
/* The same without AVX-512 (what gemv_dot and gemv_axpy run on other CPUs). */
void gemv_dot_portable(const float *s, int64_t S, int64_t lds, int64_t sk, const void *h, bool h16, int64_t ldh,
                       int64_t L, int64_t K, float *out, int64_t oi, int64_t oj);
void gemv_axpy_portable(const float *s, int64_t S, int64_t lds, const void *h, bool h16, int64_t ldh, int64_t L,
                        int64_t K, float *out, int64_t oi, int64_t oj);
bool k_linear(Ctx *x, int code, Val *out, uint32_t nout);
/* At binding: whether wgemm runs j on the packed GEMM, and the room it needs then. */
void wjob_reserve(Ctx *x, WJob *j, int64_t batch);
/* k_gemm_pack.c: blocks of the packed GEMM. A packing source's element (i, k)
 * is p[i * si + k * sk], floats or fp16 bits. Packed rows are groups of
 * GEMM_MR rows, each [nk][GEMM_MR]; packed columns panels of GEMM_NR, each
 * [nk][GEMM_NR]; zeros past the last row or column. */
#define GEMM_MR 12
#define GEMM_NR 32
#define GEMM_KC 256 /* k per block: a panel's GEMM_KC x GEMM_NR floats are 32 KiB (L1) */
#define GEMM_PIECE_FLOATS (((PANEL + GEMM_MR - 1) / GEMM_MR) * GEMM_MR * GEMM_KC) /* a piece's own packing */
typedef struct GemmSrc {
  const void *p;
  bool h16;
  int64_t si, sk;
} GemmSrc;
/* Element (i, k) of a packing source, as float (both packed GEMMs' element-by-element packing). */
static inline float gemm_src_at(GemmSrc s, int64_t i, int64_t k) {
  int64_t at = i * s.si + k * s.sk;
  if (!s.h16) return ((const float *)s.p)[at];
  uint16_t b;
  memcpy(&b, (const unsigned char *)s.p + 2 * at, 2);
  return fp16_to_float(b);
}
#if HAVE_X86
/* The mask of the first n of 16 lanes (all for n >= 16, none for n <= 0). */
static inline __mmask16 gemm_lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
#endif
/* Whether this CPU runs the packed GEMM's fast forms (AVX-512 F, BW, VL with F16C and FMA). */
bool gemm_packed_fast(void);
void gemm_pack_rows(float *dst, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk, bool portable);
void gemm_pack_cols(float *dst, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk, bool portable);
/* C[M, N] (ldc) = (acc ? C : 0) + A B over one block of kc: row groups ags floats apart, column panels bps apart.
 * portable: the fallback's forms even where AVX-512 is present (tests compare the bits). */
/* Source lines to prefetch while a block runs: rows of `bytes` bytes, ld bytes apart (NULL: none). */
typedef struct GemmPrefetch {
  const char *p;
  int64_t ld, bytes, rows;
} GemmPrefetch;
void gemm_block(const float *Ap, int64_t ags, const float *Bp, int64_t bps, int64_t M, int64_t N, int64_t kc,
                float *C, int64_t ldc, bool acc, bool portable, const GemmPrefetch *pf);
#if HAVE_X86
/* t[k] = (r[0][k], ..., r[15][k]): a 16 x 16 transpose in registers (any 32-bit lanes). */
void gemm_transpose16(const __m512 r[16], __m512 t[16]);
#endif
/* k_gemm_amx.c: the many-row products on AMX tiles. Packed operands are
 * groups of 16 rows (A) or columns (B), each k-block of 32 holding
 * AMX_PLANES tiles of bf16 pieces: A's [16 rows][32 k], B's [16 k pairs][16
 * columns][2]; group g's k-block kb at p + (g gstride + kb) AMX_PLANES
 * AMX_TILE_ELEMS, its flags at flags[g gstride + kb]. Packing pads to whole
 * 32-row (column) blocks and 32-k blocks with zeros. */
#define AMX_PLANES 3
#define AMX_TILE_ELEMS 512
#define AMX_KC 256    /* k per block of the weight's packing */
#define AMX_STEP 512  /* rows (linear) or positions (conv) of the activations per piece */
typedef struct AmxPacked {
  uint16_t *p;
  uint8_t *flags;
  int64_t gstride; /* k-blocks per group */
} AmxPacked;
/* uint16 elements (with the flags, rounded up) of n rows or columns by K packed */
#define AMX_PACKED_ELEMS(n, K) ((((n) + 31) / 32 * 2) * (((K) + 31) / 32) * (AMX_PLANES * AMX_TILE_ELEMS + 2))
/* A piece's own room in floats: its panel's packing (PANEL by AMX_KC) and its sums [AMX_STEP][PANEL]. */
#define AMX_PIECE_FLOATS (AMX_PACKED_ELEMS(PANEL, AMX_KC) / 2 + AMX_STEP * PANEL)
/* The view at group g, k-block kb of n rows (columns) by K packed whole at base. */
AmxPacked gemm_amx_view(void *base, int64_t n, int64_t K, int64_t g, int64_t kb);
/* Whether the AMX path runs (cpu_features()->amx). */
bool gemm_amx_on(void);
/* Pack n rows (columns) from i0 (j0) of s, k from k0 to k0 + nk, into d's groups 0.. and k-blocks 0... */
void gemm_amx_pack_rows(AmxPacked d, GemmSrc s, int64_t i0, int64_t n, int64_t k0, int64_t nk);
void gemm_amx_pack_cols(AmxPacked d, GemmSrc s, int64_t j0, int64_t n, int64_t k0, int64_t nk);
/* T[M, N] (ldt floats; rows and columns rounded up to 32) = (acc ? T : 0) + A B over nkb k-blocks, A's groups
 * and B's from 0. */
void gemm_amx_block(AmxPacked A, AmxPacked B, int64_t M, int64_t N, int64_t nkb, float *T, int64_t ldt, bool acc);
/* C[r, o] (ldc) = bias[o] (NULL: 0) + T[o, r] (ldt; rounded up to 32 x 32) for o < no, r < nr. */
void gemm_amx_store_transposed(const float *T, int64_t ldt, int64_t no, int64_t nr, const float *bias, float *C,
                               int64_t ldc);
bool k_conv(Ctx *x, int code, Val *out, uint32_t nout);
/* k_matmul_pack.c: a float matmul on the packed GEMM, its operands read in
 * place through their strides (transposed or not), every matrix of the
 * batch: op(x) is packed whole per product, op(y)'s panels per piece. */
typedef struct PackMm {
  const Val *a, *b;
  Val *o;
  int64_t M, N, K, am, ak, bk, bn; /* element (m, k) of op(x) is a[m am + k ak], (k, n) of op(y) b[k bk + n bn] */
  int64_t nb, mp, panels, blocks;  /* matrices, M rounded up to GEMM_MR, pieces per matrix: column panels, row blocks */
  uint32_t rbat;
  int64_t bdims[MIL_MAX_RANK], sa[MIL_MAX_RANK], sb[MIL_MAX_RANK];
  const CpuProgram *c;
} PackMm;
/* Whether p (filled but for its pieces) runs on the packed GEMM, by the rule of docs/cpu-backend.md; if so,
 * reserves the packing room it needs. */
bool packmm_reserve(Ctx *x, PackMm *p);
void packmm_run(Ctx *x, PackMm *p);
/* k_matmul_amx.c: a matmul of fp16-valued operands with a long op(x) and at most 512 columns on the AMX tiles
 * (the llama's tied classifier in the backward): op(y) packed whole per product, op(x)'s rows per piece. */
#define AMXMM_ROWS 256 /* rows of op(x) per piece: their packing (AMX_KC k at a time) and sums in the scratch */
#define AMXMM_COLS 512 /* columns at most */
#define AMXMM_PIECE_FLOATS (AMX_PACKED_ELEMS(AMXMM_ROWS, AMX_KC) / 2 + AMXMM_ROWS * AMXMM_COLS)
typedef struct AmxMm {
  const Val *a, *b;
  Val *o;
  int64_t M, N, K, am, ak, bk, bn; /* element (m, k) of op(x) is a[m am + k ak], (k, n) of op(y) b[k bk + n bn] */
  const CpuProgram *c;
} AmxMm;
/* Whether a matmul of one matrix (nb) of these shapes and operands runs on k_matmul_amx.c, by the rule of
 * docs/cpu-backend.md. */
bool amxmm_fits(const Val *a, const Val *b, int64_t nb, int64_t M, int64_t K, int64_t N);
/* Whether p (filled) runs there; if so, reserves the packing room it needs. */
bool amxmm_reserve(Ctx *x, AmxMm *p);
void amxmm_run(Ctx *x, AmxMm *p);
/* k_attention.c */
bool k_sdpa(Ctx *x, int code, Val *out, uint32_t nout);
/* optable.c */
/* reshape and identity planned as views: their result shows the operand */
extern const OpEntry view_entry;
/* The entry of MIL op `op`; NULL if the backend does not run it. */
const OpEntry *cpu_op(MilOpId op);
/* k_fused.c */
int64_t tile_rows(int64_t L);
void epilogue_row(const GroupJob *g, float *tiles, int64_t e0, int64_t n);
bool k_group(Ctx *x, uint32_t end);
/* Whether group g runs as one pass of the tanh form of gelu (a test hook). */
bool group_runs_gelu(const struct GroupJob *g);
bool k_fused_linear(Ctx *x, const Fused *f);
/* k_xent_grad.c */
bool k_xent_grad(Ctx *x, const Fused *f);
bool k_xent_pick(Ctx *x, const Fused *f);
/* k_attention_fused.c */
bool k_attention_fused(Ctx *x, const Fused *f);
/* The scratch floats per thread a fused attention of L queries over S keys of D features needs. */
int64_t attention_fused_scratch(int64_t L, int64_t S, int64_t D);
/* k_reduce.c: softmax of one contiguous row as the softmax op computes it; keep: room for len doubles, or NULL */
void softmax_row(const float *in, float *o, int64_t len, double *keep, bool avx2);
void set_views(const CpuProgram *c, Val *vals, uint32_t first, uint32_t end);
/* weights.c: the context's fp32 copy of const `slot`'s fp16 weight w, which the slot then reads; *convert:
 * whether the caller must fill it from w's data (not yet converted from these bytes for another program;
 * with `now`, converted before it returns and *convert false) */
float *shared_fp32_copy(CpuProgram *c, uint32_t slot, const OrionWeight *w, bool now, bool *convert);
void shared_detach(CpuProgram *c, uint32_t slot);
/* prepare.c */
void *const_owned(CpuProgram *c, uint32_t slot, size_t es);
void const_from_weight(CpuProgram *c, uint32_t slot, const OrionWeight *w);
/* constexpr.c */
CxFn find_cx(MilOpId op);
bool eval_constexprs(CpuProgram *c, Diag *d);
/* plan.c */
uint32_t root_of(const CpuProgram *c, uint32_t s);
size_t plan_buffers(CpuProgram *c);
void choose_fp16_weights(CpuProgram *c);
void choose_fp16_inputs(CpuProgram *c);
void choose_fp16_results(CpuProgram *c);
void plan_cast_views(CpuProgram *c);
/* fusion.c */
void plan_fusion(CpuProgram *c);
/* bind.c */
bool bind_all(CpuProgram *c, Diag *d);
void bound_free(CpuProgram *c);
/* the binders (see Binder) */
bool bind_unary(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_binary(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_select(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_cast(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_softmax(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_reduce(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_layer_norm(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_view(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_copy(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_transpose(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_slice(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_slice_size(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_split(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_concat(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_gather(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_gather_axis(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_expand_dims(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_squeeze(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_stack(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_tile(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_pad(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_shape(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_range(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_group(Ctx *x, uint32_t first, uint32_t end, struct GroupJob **bound);
bool bind_fused_linear(Ctx *x, const Fused *f, void **bound);
bool bind_xent_grad(Ctx *x, const Fused *f, void **bound);
bool bind_attention_fused(Ctx *x, const Fused *f, void **bound);
bool bind_matmul(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_linear(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_conv(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_sdpa(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_argreduce(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_topk(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_pool(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_quant(Ctx *x, int code, Val *out, uint32_t nout, void **bound);
bool bind_lstm(Ctx *x, int code, Val *out, uint32_t nout, void **bound);

#endif
