/*
 * The token data feeder of orion-run train (include/orion/train_optim.h):
 * windows of T tokens and their next-token targets, in order or shuffled once
 * per epoch.
 *
 * The whole file is read and widened to int32 once, and every token checked
 * against the vocabulary then: an id out of range is an error naming where it
 * is before any step runs (the reference indexes out of bounds), and each
 * batch is a plain copy afterwards.
 */
#include "orion/train_optim.h"

#include <stdlib.h>
#include <string.h>

#include "orion/weight_file.h"

/* Largest token file read (16 GiB of uint16 is 8 G tokens, beyond any run
 * here); a bound on what a FIFO or device file can make us buffer. */
#define TRAIN_DATA_MAX_FILE_BYTES ((size_t)1 << 34)

/* Format version of an encoded TrainDataPosition. */
#define TRAIN_DATA_POSITION_VERSION 1u

struct TrainData {
  char *path;
  TrainDataOptions opt;
  int32_t *tokens; /* length of them, each in [0, vocab) */
  int64_t length;
  int64_t windows;
  uint64_t batches; /* handed out by train_data_next */
  int64_t *perm;    /* shuffle: the permutation of epoch perm_epoch */
  uint64_t perm_epoch;
  bool perm_valid;
};

static void report(Diag *d, const char *fmt, ...) ORION_PRINTF(2, 3);

static void report(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, DIAG_ERROR, (SrcSpan){0}, fmt, ap);
  va_end(ap);
}

uint64_t train_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [0, m), unbiased: draws below 2^64 mod m are rejected so every
 * residue is equally likely. */
static uint64_t uniform_below(uint64_t *state, uint64_t m) {
  uint64_t threshold = (0 - m) % m;
  for (;;) {
    uint64_t x = train_splitmix64(state);
    if (x >= threshold) return x % m;
  }
}

void train_shuffle_permutation(uint64_t seed, uint64_t epoch, int64_t *perm, int64_t n) {
  /* Each epoch its own stream, so any epoch's order is computable without
   * replaying the ones before it (a resume needs only the seed). */
  uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * (epoch + 1));
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)uniform_below(&state, (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

/* Element i of little-endian integer data of dtype t, as a signed value;
 * uint64 beyond INT64_MAX is reported as INT64_MAX (out of any vocabulary
 * anyway). */
static int64_t integer_at(const uint8_t *p, OrionDType t, size_t i) {
  size_t w = orion_dtype_size(t);
  uint64_t u = 0;
  for (size_t k = 0; k < w; k++) u |= (uint64_t)p[i * w + k] << (8 * k);
  if (orion_dtype_is_unsigned(t)) return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  if (w < 8 && (u >> (8 * w - 1)) & 1) u |= ~(uint64_t)0 << (8 * w); /* sign-extend */
  return (int64_t)u;
}

/* Widens and checks every token; false after reporting the first bad one. */
static bool load_tokens(TrainData *td, const uint8_t *p, OrionDType t, size_t count, Diag *d) {
  td->tokens = xmalloc((count ? count : 1) * sizeof *td->tokens);
  for (size_t i = 0; i < count; i++) {
    int64_t v = integer_at(p, t, i);
    if (v < 0 || v >= td->opt.vocab) {
      report(d, "'%s': token %lld at position %zu is outside the vocabulary [0, %lld)", td->path, (long long)v, i,
             (long long)td->opt.vocab);
      return false;
    }
    td->tokens[i] = (int32_t)v;
  }
  td->length = (int64_t)count;
  return true;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool load_file(TrainData *td, Diag *d) {
  char *buf;
  size_t len;
  const char *why;
  if (!read_file(td->path, TRAIN_DATA_MAX_FILE_BYTES, &buf, &len, &why)) {
    report(d, "cannot read '%s': %s", td->path, why);
    return false;
  }
  bool ok = false;
  if (ends_with(td->path, ".npy")) {
    WeightInfo info;
    char err[256];
    if (!weights_parse_npy_integers((const uint8_t *)buf, len, &info, err, sizeof err)) {
      /* Say what a float file is rather than only that its dtype is unsupported. */
      WeightInfo any;
      char ignored[256];
      if (weights_parse_npy((const uint8_t *)buf, len, &any, ignored, sizeof ignored) &&
          orion_dtype_is_float(any.dtype))
        report(d, "'%s' holds %s data; token data must be integers", td->path, orion_dtype_name(any.dtype));
      else
        report(d, "'%s' is not a valid .npy file: %s", td->path, err);
    } else if (info.rank != 1) {
      report(d, "'%s' holds a rank-%u array; token data must be 1-D", td->path, info.rank);
    } else {
      ok = load_tokens(td, (const uint8_t *)buf + info.data_offset, info.dtype, (size_t)info.dims[0], d);
    }
  } else if (len % 2 != 0) {
    report(d, "'%s' has an odd number of bytes (%zu); a .bin token file is uint16", td->path, len);
  } else {
    ok = load_tokens(td, (const uint8_t *)buf, ORION_DT_UINT16, len / 2, d);
  }
  free(buf);
  return ok;
}

bool train_data_open(const char *path, const TrainDataOptions *opt, TrainData **out, Diag *d) {
  *out = NULL;
  if (opt->batch < 1 || opt->seq < 1 || opt->vocab < 1 || opt->vocab > (int64_t)INT32_MAX + 1) {
    report(d, "token data for '%s': batch %lld, sequence %lld and vocabulary %lld must be positive (vocabulary at "
           "most 2^31)",
           path, (long long)opt->batch, (long long)opt->seq, (long long)opt->vocab);
    return false;
  }
  TrainData *td = xcalloc(1, sizeof *td);
  td->path = xstrdup(path);
  td->opt = *opt;
  if (!load_file(td, d)) {
    train_data_free(td);
    return false;
  }
  td->windows = td->length > 0 ? (td->length - 1) / opt->seq : 0;
  if (td->windows == 0) {
    report(d, "'%s' has %lld tokens: windows of %lld tokens and the target after them need at least %lld", path,
           (long long)td->length, (long long)opt->seq, (long long)opt->seq + 1);
    train_data_free(td);
    return false;
  }
  if (opt->shuffle) td->perm = xmalloc((size_t)td->windows * sizeof *td->perm);
  *out = td;
  return true;
}

void train_data_free(TrainData *td) {
  if (!td) return;
  free(td->path);
  free(td->tokens);
  free(td->perm);
  free(td);
}

int64_t train_data_length(const TrainData *td) { return td->length; }
int64_t train_data_windows(const TrainData *td) { return td->windows; }

int64_t train_data_window_of_row(TrainData *td, uint64_t row) {
  uint64_t w = (uint64_t)td->windows;
  if (!td->opt.shuffle) return (int64_t)(row % w);
  uint64_t epoch = row / w;
  if (!td->perm_valid || td->perm_epoch != epoch) {
    train_shuffle_permutation(td->opt.seed, epoch, td->perm, td->windows);
    td->perm_epoch = epoch;
    td->perm_valid = true;
  }
  return td->perm[row % w];
}

void train_data_batch(TrainData *td, uint64_t batch_index, int32_t *tokens, int32_t *targets) {
  size_t t = (size_t)td->opt.seq;
  for (int64_t b = 0; b < td->opt.batch; b++) {
    uint64_t row = batch_index * (uint64_t)td->opt.batch + (uint64_t)b;
    const int32_t *window = td->tokens + (size_t)train_data_window_of_row(td, row) * t;
    memcpy(tokens + (size_t)b * t, window, t * sizeof *tokens);
    memcpy(targets + (size_t)b * t, window + 1, t * sizeof *targets);
  }
}

void train_data_next(TrainData *td, int32_t *tokens, int32_t *targets) {
  train_data_batch(td, td->batches, tokens, targets);
  td->batches++;
}

uint64_t train_data_step_batch(uint64_t step, uint32_t accum, uint32_t k) {
  return (step - 1) * (uint64_t)accum + k;
}

TrainDataPosition train_data_position(const TrainData *td) {
  return (TrainDataPosition){.batches = td->batches,
                             .seed = td->opt.seed,
                             .windows = (uint64_t)td->windows,
                             .shuffle = td->opt.shuffle ? 1u : 0u};
}

bool train_data_seek(TrainData *td, const TrainDataPosition *pos, Diag *d) {
  if (pos->windows != (uint64_t)td->windows) {
    report(d, "'%s' has %lld windows but the saved data position is for %llu: not the same data or sequence length",
           td->path, (long long)td->windows, (unsigned long long)pos->windows);
    return false;
  }
  if ((pos->shuffle != 0) != td->opt.shuffle || (td->opt.shuffle && pos->seed != td->opt.seed)) {
    if (pos->shuffle)
      report(d, "the saved data position of '%s' was made with --shuffle --seed %llu; resume with the same --shuffle "
                "and --seed",
             td->path, (unsigned long long)pos->seed);
    else
      report(d, "the saved data position of '%s' was made without --shuffle; resume without it", td->path);
    return false;
  }
  td->batches = pos->batches;
  return true;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Layout: u32 version, u32 flags (bit 0: shuffle), u64 batches, u64 seed,
 * u64 windows. */
void train_data_position_encode(const TrainDataPosition *pos, uint8_t out[TRAIN_DATA_POSITION_BYTES]) {
  uint64_t head = TRAIN_DATA_POSITION_VERSION | (uint64_t)(pos->shuffle ? 1u : 0u) << 32;
  put_u64(out, head);
  put_u64(out + 8, pos->batches);
  put_u64(out + 16, pos->seed);
  put_u64(out + 24, pos->windows);
}

bool train_data_position_decode(const uint8_t in[TRAIN_DATA_POSITION_BYTES], TrainDataPosition *pos) {
  uint64_t head = get_u64(in);
  if ((uint32_t)head != TRAIN_DATA_POSITION_VERSION || (head >> 32) > 1) return false;
  *pos = (TrainDataPosition){.batches = get_u64(in + 8),
                             .seed = get_u64(in + 16),
                             .windows = get_u64(in + 24),
                             .shuffle = (uint32_t)(head >> 32)};
  return true;
}
