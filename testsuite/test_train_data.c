/*
 * Tests of the training data feeder (runtime/train/data.c): the exact
 * windows of a small array in order and shuffled against
 * testsuite/train/data_fixture.json (made by make_optim_fixture.py with
 * numpy and a Python copy of the documented shuffle), the shuffle's
 * generator and permutation property, the .bin format and every integer
 * .npy dtype, resuming from an encoded position, and every error's exact text.
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/train_optim.h"

/* ---- fixtures ------------------------------------------------------------ */

static void fixture_path(char *buf, size_t len, const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "testsuite/train/%s", name);
  source_path(buf, len, rel);
}

static cJSON *load_fixture(void) { return load_json_fixture("testsuite/train/data_fixture.json"); }

static int64_t get_int(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  cr_assert(cJSON_IsNumber(v), "fixture has no number '%s'", key);
  return (int64_t)v->valuedouble;
}

static TrainDataOptions fixture_options(const cJSON *fx, bool shuffle) {
  return (TrainDataOptions){.batch = get_int(fx, "batch"),
                            .seq = get_int(fx, "seq"),
                            .vocab = get_int(fx, "vocab"),
                            .shuffle = shuffle,
                            .seed = shuffle ? (uint64_t)get_int(fx, "seed") : 0};
}

static TrainData *open_fixture(const char *name, const TrainDataOptions *opt) {
  char path[4096];
  fixture_path(path, sizeof path, name);
  Capture c;
  capture_init(&c, "orion-run");
  TrainData *td;
  cr_assert(train_data_open(path, opt, &td, &c.d), "%s: %s", name, captured(&c));
  capture_free(&c);
  return td;
}

/* Checks batches 0.. of td against the fixture's list (windows, tokens, targets). */
static void expect_batches(TrainData *td, const cJSON *list, int64_t B, int64_t T) {
  size_t n = (size_t)(B * T);
  int32_t *tokens = calloc(n, sizeof *tokens), *targets = calloc(n, sizeof *targets);
  int batch = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, list) {
    train_data_next(td, tokens, targets);
    const cJSON *windows = cJSON_GetObjectItemCaseSensitive(item, "windows");
    for (int64_t b = 0; b < B; b++)
      cr_assert_eq(train_data_window_of_row(td, (uint64_t)(batch * B + b)),
                   (int64_t)cJSON_GetArrayItem(windows, (int)b)->valuedouble, "batch %d row %lld", batch,
                   (long long)b);
    const cJSON *want_tokens = cJSON_GetObjectItemCaseSensitive(item, "tokens");
    const cJSON *want_targets = cJSON_GetObjectItemCaseSensitive(item, "targets");
    for (size_t i = 0; i < n; i++) {
      cr_assert_eq(tokens[i], (int32_t)cJSON_GetArrayItem(want_tokens, (int)i)->valuedouble, "batch %d [%zu]", batch,
                   i);
      cr_assert_eq(targets[i], (int32_t)cJSON_GetArrayItem(want_targets, (int)i)->valuedouble, "batch %d [%zu]", batch,
                   i);
    }
    batch++;
  }
  cr_assert_eq(train_data_position(td).batches, (uint64_t)batch);
  free(tokens);
  free(targets);
}

/* ---- windows ------------------------------------------------------------- */

Test(train_data, ordered_windows_follow_the_formula) {
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, false);
  TrainData *td = open_fixture("tokens_int32.npy", &opt);
  cr_assert_eq(train_data_length(td), get_int(fx, "length"));
  cr_assert_eq(train_data_windows(td), get_int(fx, "windows"));
  cr_assert_eq(train_data_windows(td), 9); /* floor((47 - 1) / 5) */
  /* Without shuffle row r reads window r mod W, whatever the batch size. */
  for (uint64_t r = 0; r < 40; r++) cr_assert_eq(train_data_window_of_row(td, r), (int64_t)(r % 9));
  expect_batches(td, cJSON_GetObjectItemCaseSensitive(fx, "ordered"), opt.batch, opt.seq);
  train_data_free(td);
  cJSON_Delete(fx);
}

Test(train_data, shuffled_windows_match_the_documented_shuffle) {
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, true);
  TrainData *td = open_fixture("tokens_int32.npy", &opt);
  expect_batches(td, cJSON_GetObjectItemCaseSensitive(fx, "shuffled"), opt.batch, opt.seq);
  train_data_free(td);
  cJSON_Delete(fx);
}

Test(train_data, every_integer_npy_dtype_and_bin_read_the_same_tokens) {
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, false);
  const char *files[] = {"tokens_int8.npy",   "tokens_uint8.npy", "tokens_int16.npy",  "tokens_uint16.npy",
                         "tokens_int32.npy",  "tokens_uint32.npy", "tokens_int64.npy", "tokens_uint64.npy",
                         "tokens.bin"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    TrainData *td = open_fixture(files[f], &opt);
    cr_assert_eq(train_data_length(td), get_int(fx, "length"), "%s", files[f]);
    expect_batches(td, cJSON_GetObjectItemCaseSensitive(fx, "ordered"), opt.batch, opt.seq);
    train_data_free(td);
  }
  cJSON_Delete(fx);
}

Test(train_data, accumulation_takes_consecutive_batches) {
  /* Step s of K micro-batches: batches (s-1)K .. (s-1)K + K - 1, the same
   * ones K * s calls of train_data_next hand out. */
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, true);
  TrainData *seq = open_fixture("tokens_uint16.npy", &opt), *indexed = open_fixture("tokens_uint16.npy", &opt);
  int32_t tok[64], tgt[64], tok2[64], tgt2[64];
  size_t n = (size_t)(opt.batch * opt.seq);
  for (uint64_t step = 1; step <= 5; step++)
    for (uint32_t k = 0; k < 3; k++) {
      train_data_next(seq, tok, tgt);
      train_data_batch(indexed, train_data_step_batch(step, 3, k), tok2, tgt2);
      cr_assert_arr_eq(tok, tok2, n * sizeof *tok, "step %llu micro-batch %u", (unsigned long long)step, k);
      cr_assert_arr_eq(tgt, tgt2, n * sizeof *tgt);
    }
  cr_assert_eq(train_data_position(indexed).batches, 0); /* train_data_batch does not move */
  train_data_free(seq);
  train_data_free(indexed);
  cJSON_Delete(fx);
  cr_assert_eq(train_data_step_batch(1, 1, 0), 0);
  cr_assert_eq(train_data_step_batch(5, 1, 0), 4);
  cr_assert_eq(train_data_step_batch(1, 4, 3), 3);
  cr_assert_eq(train_data_step_batch(2, 4, 0), 4);
  cr_assert_eq(train_data_step_batch(3, 4, 2), 10);
}

/* ---- the shuffle ---------------------------------------------------------- */

Test(train_data, splitmix64_matches_its_reference_values) {
  cJSON *fx = load_fixture();
  const cJSON *want = cJSON_GetObjectItemCaseSensitive(fx, "splitmix64_seed0");
  uint64_t state = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, want) {
    uint64_t x = train_splitmix64(&state);
    cr_assert_eq(x, strtoull(item->valuestring, NULL, 10));
  }
  /* The published first output of splitmix64 from state 0. */
  state = 0;
  cr_assert_eq(train_splitmix64(&state), UINT64_C(0xE220A8397B1DCDAF));
  cJSON_Delete(fx);
}

Test(train_data, permutations_match_the_fixture_and_are_permutations) {
  cJSON *fx = load_fixture();
  int64_t W = get_int(fx, "windows");
  uint64_t seed = (uint64_t)get_int(fx, "seed");
  int64_t perm[64];
  int epoch = 0;
  const cJSON *want;
  cJSON_ArrayForEach(want, cJSON_GetObjectItemCaseSensitive(fx, "permutations")) {
    train_shuffle_permutation(seed, (uint64_t)epoch, perm, W);
    for (int64_t i = 0; i < W; i++)
      cr_assert_eq(perm[i], (int64_t)cJSON_GetArrayItem(want, (int)i)->valuedouble, "epoch %d [%lld]", epoch,
                   (long long)i);
    epoch++;
  }
  cJSON_Delete(fx);
  /* Larger sizes: each index exactly once, the same for the same (seed,
   * epoch), different across epochs and seeds. */
  enum { N = 1000 };
  static int64_t a[N], b[N], c[N];
  train_shuffle_permutation(7, 0, a, N);
  train_shuffle_permutation(7, 0, b, N);
  cr_assert_arr_eq(a, b, sizeof a);
  bool seen[N] = {false};
  for (int i = 0; i < N; i++) {
    cr_assert(a[i] >= 0 && a[i] < N);
    cr_assert(!seen[a[i]], "index %lld twice", (long long)a[i]);
    seen[a[i]] = true;
  }
  train_shuffle_permutation(7, 1, b, N);
  train_shuffle_permutation(8, 0, c, N);
  cr_assert(memcmp(a, b, sizeof a) != 0);
  cr_assert(memcmp(a, c, sizeof a) != 0);
  /* One element: the identity. */
  train_shuffle_permutation(7, 3, a, 1);
  cr_assert_eq(a[0], 0);
}

Test(train_data, shuffle_covers_every_window_once_per_epoch) {
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, true);
  TrainData *td = open_fixture("tokens.bin", &opt);
  int64_t W = train_data_windows(td);
  for (uint64_t epoch = 0; epoch < 4; epoch++) {
    bool seen[64] = {false};
    for (int64_t i = 0; i < W; i++) {
      int64_t w = train_data_window_of_row(td, epoch * (uint64_t)W + (uint64_t)i);
      cr_assert(!seen[w]);
      seen[w] = true;
    }
  }
  train_data_free(td);
  cJSON_Delete(fx);
}

/* ---- position -------------------------------------------------------------- */

Test(train_data, a_saved_position_continues_the_same_batches) {
  cJSON *fx = load_fixture();
  TrainDataOptions opt = fixture_options(fx, true);
  TrainData *a = open_fixture("tokens_int32.npy", &opt);
  size_t n = (size_t)(opt.batch * opt.seq);
  int32_t tok[64], tgt[64], tok2[64], tgt2[64];
  for (int i = 0; i < 5; i++) train_data_next(a, tok, tgt);
  uint8_t bytes[TRAIN_DATA_POSITION_BYTES];
  TrainDataPosition pos = train_data_position(a);
  train_data_position_encode(&pos, bytes);
  TrainDataPosition back;
  cr_assert(train_data_position_decode(bytes, &back));
  cr_assert_eq(back.batches, 5);
  cr_assert_eq(back.seed, opt.seed);
  cr_assert_eq(back.windows, 9);
  cr_assert_eq(back.shuffle, 1);

  TrainData *b = open_fixture("tokens_int32.npy", &opt);
  Capture c;
  capture_init(&c, "orion-run");
  cr_assert(train_data_seek(b, &back, &c.d));
  for (int i = 0; i < 6; i++) {
    train_data_next(a, tok, tgt);
    train_data_next(b, tok2, tgt2);
    cr_assert_arr_eq(tok, tok2, n * sizeof *tok);
    cr_assert_arr_eq(tgt, tgt2, n * sizeof *tgt);
  }

  /* Another seed, no shuffle, other windows: refused with the reason. */
  TrainDataPosition other = back;
  other.seed = 99;
  cr_assert_not(train_data_seek(b, &other, &c.d));
  other = back;
  other.shuffle = 0;
  cr_assert_not(train_data_seek(b, &other, &c.d));
  other = back;
  other.windows = 8;
  cr_assert_not(train_data_seek(b, &other, &c.d));
  char path[4096];
  fixture_path(path, sizeof path, "tokens_int32.npy");
  StrBuf want;
  sb_init(&want);
  sb_puts(&want, "orion-run: error: the saved data position of '");
  sb_puts(&want, path);
  sb_puts(&want, "' was made with --shuffle --seed 99; resume with the same --shuffle and --seed\n"
                 "orion-run: error: the saved data position of '");
  sb_puts(&want, path);
  sb_puts(&want, "' was made without --shuffle; resume without it\n"
                 "orion-run: error: '");
  sb_puts(&want, path);
  sb_puts(&want, "' has 9 windows but the saved data position is for 8: not the same data or sequence length\n");
  cr_assert_str_eq(captured(&c), want.data);
  sb_free(&want);

  bytes[0] = 2; /* another version */
  cr_assert_not(train_data_position_decode(bytes, &back));
  capture_free(&c);
  train_data_free(a);
  train_data_free(b);
  cJSON_Delete(fx);
}

/* ---- errors -------------------------------------------------------------- */

/* Expects "orion-run: error: <before>'<the file's path><after>\n". */
static void expect_open_error(const char *name, const TrainDataOptions *opt, const char *before, const char *after) {
  char path[4096];
  fixture_path(path, sizeof path, name);
  StrBuf want;
  sb_init(&want);
  sb_puts(&want, "orion-run: error: ");
  sb_puts(&want, before);
  sb_putc(&want, '\'');
  sb_puts(&want, path);
  sb_putc(&want, '\'');
  sb_puts(&want, after);
  sb_putc(&want, '\n');
  Capture c;
  capture_init(&c, "orion-run");
  TrainData *td = (TrainData *)&c; /* must be reset to NULL */
  cr_assert_not(train_data_open(path, opt, &td, &c.d), "%s opened", name);
  cr_assert_null(td);
  cr_assert_str_eq(captured(&c), want.data);
  sb_free(&want);
  capture_free(&c);
}

Test(train_data, errors_name_the_file_and_what_is_wrong) {
  TrainDataOptions opt = {.batch = 3, .seq = 5, .vocab = 50};
  expect_open_error("bad_range.npy", &opt, "", ": token 50 at position 17 is outside the vocabulary [0, 50)");
  expect_open_error("bad_negative.npy", &opt, "", ": token -1 at position 3 is outside the vocabulary [0, 50)");
  expect_open_error("bad_short.npy", &opt, "",
                    " has 5 tokens: windows of 5 tokens and the target after them need at least 6");
  expect_open_error("bad_float.npy", &opt, "", " holds fp32 data; token data must be integers");
  expect_open_error("bad_rank2.npy", &opt, "", " holds a rank-2 array; token data must be 1-D");
  expect_open_error("bad_odd.bin", &opt, "", " has an odd number of bytes (21); a .bin token file is uint16");
  expect_open_error("missing.bin", &opt, "cannot read ", ": No such file or directory");
  /* The same file with a larger vocabulary opens; T = 46 still has one window. */
  TrainDataOptions wide = {.batch = 1, .seq = 46, .vocab = 51};
  char path[4096];
  fixture_path(path, sizeof path, "bad_range.npy");
  TrainData *td;
  cr_assert(train_data_open(path, &wide, &td, NULL));
  cr_assert_eq(train_data_windows(td), 1);
  train_data_free(td);
  wide.seq = 47;
  expect_open_error("bad_range.npy", &wide, "",
                    " has 47 tokens: windows of 47 tokens and the target after them need at least 48");
}
