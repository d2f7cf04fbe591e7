/*
 * Training checkpoints (orion/train_checkpoint.h): a round trip is
 * bit-identical, every kind of damage is refused with its exact message,
 * retention keeps the newest K, and a write killed (SIGKILL or _exit, in a
 * forked child) before any of its durable steps leaves a directory that
 * loads exactly the previous checkpoint or exactly the new one.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orion/support.h"
#include "orion/train_checkpoint.h"

/* ---- fixtures ---------------------------------------------------------- */

#define NW 3
#define NSLOTS 2

/* A checkpoint whose every value follows from `seed`; owns its memory. */
typedef struct Fixture {
  OrionCheckpoint c;
  OrionCkptTensor w[NW];
  float *state[NSLOTS][NW];
  uint8_t pos[24], rng[40];
} Fixture;

static void make_fixture(Fixture *f, uint64_t seed, uint64_t step) {
  memset(f, 0, sizeof *f);
  static const char *const names[NW] = {"tok_emb.weight", "layers.0.norm.bias", "big"};
  static const int64_t shapes[NW][2] = {{7, 5}, {5, 0}, {3000, 0}};
  static const uint32_t ranks[NW] = {2, 1, 1};
  uint64_t s = seed;
  for (int i = 0; i < NW; i++) {
    f->w[i].name = names[i];
    f->w[i].rank = ranks[i];
    for (uint32_t k = 0; k < ranks[i]; k++) f->w[i].dims[k] = shapes[i][k];
    uint64_t n = orion_ckpt_tensor_count(&f->w[i]);
    f->w[i].data = xmalloc(n * sizeof(float));
    for (uint64_t j = 0; j < n; j++) f->w[i].data[j] = (float)(splitmix64(&s) >> 11) * 0x1p-50f - 1.0f;
    for (int k = 0; k < NSLOTS; k++) {
      f->state[k][i] = xmalloc(n * sizeof(float));
      for (uint64_t j = 0; j < n; j++) f->state[k][i][j] = (float)(splitmix64(&s) >> 40) * 0x1p-30f;
    }
  }
  for (size_t i = 0; i < sizeof f->pos; i++) f->pos[i] = (uint8_t)splitmix64(&s);
  for (size_t i = 0; i < sizeof f->rng; i++) f->rng[i] = (uint8_t)splitmix64(&s);
  f->c = (OrionCheckpoint){
      .step = step,
      .package_id = "xxh64:0123456789abcdef",
      .data_position = f->pos,
      .data_position_len = sizeof f->pos,
      .rng_state = f->rng,
      .rng_state_len = sizeof f->rng,
      .loss_scale = {.scale = 32768.0 / (double)(1 + seed % 3), .good_steps = seed % 1000, .skipped_steps = seed % 7},
      .optimizer = "adamw",
      .hyper = {{"lr", 3e-4 * (double)(seed + 1)}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
                {"weight_decay", 0.1}, {"adam_t", (double)step}},
      .nhyper = 6,
      .weights = f->w,
      .nweights = NW,
      .slot_names = {"m", "v"},
      .state = {f->state[0], f->state[1]},
      .nslots = NSLOTS,
  };
}

static void free_fixture(Fixture *f) {
  for (int i = 0; i < NW; i++) {
    free(f->w[i].data);
    for (int k = 0; k < NSLOTS; k++) free(f->state[k][i]);
  }
}

/* Whether a loaded checkpoint is exactly the fixture, bit for bit. */
static bool same(const OrionCheckpoint *a, const OrionCheckpoint *b) {
  if (a->step != b->step || strcmp(a->package_id, b->package_id) || strcmp(a->optimizer, b->optimizer)) return false;
  if (a->data_position_len != b->data_position_len || memcmp(a->data_position, b->data_position, a->data_position_len))
    return false;
  if (a->rng_state_len != b->rng_state_len || memcmp(a->rng_state, b->rng_state, a->rng_state_len)) return false;
  if (memcmp(&a->loss_scale, &b->loss_scale, sizeof a->loss_scale) != 0) return false;
  if (a->nhyper != b->nhyper || a->nweights != b->nweights || a->nslots != b->nslots) return false;
  for (uint32_t i = 0; i < a->nhyper; i++)
    if (strcmp(a->hyper[i].name, b->hyper[i].name) || memcmp(&a->hyper[i].value, &b->hyper[i].value, sizeof(double)))
      return false;
  for (uint32_t i = 0; i < a->nweights; i++) {
    const OrionCkptTensor *x = &a->weights[i], *y = &b->weights[i];
    if (strcmp(x->name, y->name) || x->rank != y->rank || memcmp(x->dims, y->dims, x->rank * sizeof *x->dims))
      return false;
    size_t bytes = orion_ckpt_tensor_count(x) * sizeof(float);
    if (memcmp(x->data, y->data, bytes)) return false;
    for (uint32_t s = 0; s < a->nslots; s++)
      if (strcmp(a->slot_names[s], b->slot_names[s]) || memcmp(a->state[s][i], b->state[s][i], bytes)) return false;
  }
  return true;
}

/* A fresh scratch directory (removed by the test's end). */
static char *scratch(void) {
  char *dir = xstrdup("/tmp/orion-ckpt-test-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  return dir;
}

static char *path2(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* Diagnostics into a buffer. */
typedef struct Captured {
  StrBuf text;
  Diag d;
} Captured;

static void capture(Captured *c) {
  sb_init(&c->text);
  sb_putc(&c->text, 0);
  c->text.len = 0;
  diag_init(&c->d, NULL);
  c->d.capture = &c->text;
  c->d.program = "test";
}

static void write_ok(const char *dir, const Fixture *f, const OrionCkptWriteOptions *o) {
  Captured cap;
  capture(&cap);
  bool ok = orion_ckpt_write(dir, &f->c, o, NULL, &cap.d);
  cr_assert(ok, "write failed: %s", cap.text.data);
  sb_free(&cap.text);
}

/* Loads `path` and expects the message `want` (with "DIR" standing for dir). */
static void load_fails(const char *path, const char *expected_id, const char *want) {
  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert_not(orion_ckpt_load(path, expected_id, &got, &cap.d));
  cr_assert_eq(got.weights, NULL);
  cr_assert_str_eq(cap.text.data, want);
  sb_free(&cap.text);
}

/* ---- round trip and layout ------------------------------------------------ */

Test(train_checkpoint, round_trip_is_bit_identical_and_latest_points_at_it) {
  char *dir = scratch();
  Fixture f;
  make_fixture(&f, 1, 123);
  f.c.hyper[0].value = 0.1 + 0.2; /* 0.30000000000000004: cJSON alone would print 0.3 */
  Captured cap;
  capture(&cap);
  char *written;
  cr_assert(orion_ckpt_write(dir, &f.c, NULL, &written, &cap.d), "%s", cap.text.data);
  char *want = path2(dir, "step-000000123");
  cr_assert_str_eq(written, want);
  char *latest = path2(dir, "latest"), target[64];
  ssize_t n = readlink(latest, target, sizeof target - 1);
  cr_assert_eq(n, 14);
  target[n] = 0;
  cr_assert_str_eq(target, "step-000000123");
  static const char *const files[] = {"manifest.json", "weights.safetensors", "state-m.safetensors",
                                      "state-v.safetensors"};
  for (int i = 0; i < 4; i++) {
    char *p = path2(want, files[i]);
    cr_assert_eq(access(p, R_OK), 0, "%s", p);
    free(p);
  }
  OrionCheckpoint got;
  cr_assert(orion_ckpt_load(dir, "xxh64:0123456789abcdef", &got, &cap.d), "%s", cap.text.data);
  cr_assert(same(&got, &f.c));
  orion_ckpt_free(&got);
  cr_assert(orion_ckpt_load(want, NULL, &got, &cap.d), "%s", cap.text.data);
  cr_assert(same(&got, &f.c));
  orion_ckpt_free(&got);
  free(latest);
  free(want);
  free(written);
  free_fixture(&f);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, the_weights_are_a_safetensors_file_other_tools_read) {
  /* The header names each weight with F32, its shape and offsets. */
  char *dir = scratch();
  Fixture f;
  make_fixture(&f, 2, 5);
  write_ok(dir, &f, NULL);
  char *p = path2(dir, "step-000000005/weights.safetensors");
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(p, 1u << 24, &data, &len, &err));
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)data[i];
  cr_assert_eq(hl % 8, 0);
  cr_assert_eq(len, 8 + hl + (35 + 5 + 3000) * 4);
  cr_assert(strstr(data + 8, "\"tok_emb.weight\":{\"dtype\":\"F32\",\"shape\":[7,5],\"data_offsets\":[0,140]}"));
  cr_assert_eq(memcmp(data + 8 + hl, f.w[0].data, 140), 0);
  free(data);
  free(p);
  free_fixture(&f);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, retention_keeps_the_newest_k) {
  char *dir = scratch();
  OrionCkptWriteOptions o = {.keep = 2};
  for (uint64_t s = 1; s <= 4; s++) {
    Fixture f;
    make_fixture(&f, s, s * 10);
    write_ok(dir, &f, &o);
    free_fixture(&f);
  }
  DIR *dp = opendir(dir);
  cr_assert_not_null(dp);
  StrBuf names;
  sb_init(&names);
  char *list[8];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (e->d_name[0] != '.' && n < 8) list[n++] = xstrdup(e->d_name);
  closedir(dp);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(list[i], list[j]) > 0) {
        char *t = list[i];
        list[i] = list[j];
        list[j] = t;
      }
  for (int i = 0; i < n; i++) {
    sb_printf(&names, "%s ", list[i]);
    free(list[i]);
  }
  cr_assert_str_eq(names.data, "latest step-000000030 step-000000040 ");
  sb_free(&names);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_second_checkpoint_of_the_same_step_replaces_the_first) {
  char *dir = scratch();
  Fixture a, b;
  make_fixture(&a, 1, 50);
  make_fixture(&b, 2, 50);
  write_ok(dir, &a, NULL);
  write_ok(dir, &b, NULL);
  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert(orion_ckpt_load(dir, NULL, &got, &cap.d), "%s", cap.text.data);
  cr_assert(same(&got, &b.c));
  orion_ckpt_free(&got);
  DIR *dp = opendir(dir);
  int entries = 0;
  struct dirent *e;
  while ((e = readdir(dp))) entries += e->d_name[0] != '.';
  closedir(dp);
  cr_assert_eq(entries, 2); /* latest and step-000000050: the old one is gone */
  free_fixture(&a);
  free_fixture(&b);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, two_writers_of_one_directory_take_turns) {
  /* Each removes an interrupted write's leftovers first: without the lock one
   * would remove the other's temporary directory mid-write. */
  char *dir = scratch();
  Fixture f[2];
  make_fixture(&f[0], 5, 100);
  make_fixture(&f[1], 6, 200);
  fflush(NULL);
  pid_t pids[2];
  for (int k = 0; k < 2; k++) {
    pids[k] = fork();
    cr_assert_geq(pids[k], 0);
    if (pids[k] == 0) {
      Diag d;
      diag_init(&d, NULL);
      OrionCkptWriteOptions o = {.write_chunk = 512};
      bool ok = true;
      for (int i = 0; i < 5 && ok; i++) {
        f[k].c.step = (uint64_t)(100 * (k + 1) + i);
        ok = orion_ckpt_write(dir, &f[k].c, &o, NULL, &d);
      }
      _exit(ok ? 0 : 1);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status;
    cr_assert_eq(waitpid(pids[k], &status, 0), pids[k]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", k);
  }
  Captured cap;
  capture(&cap);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 5; i++) {
      char name[32];
      snprintf(name, sizeof name, "step-%09d", 100 * (k + 1) + i);
      char *p = path2(dir, name);
      OrionCheckpoint got;
      cr_assert(orion_ckpt_load(p, NULL, &got, &cap.d), "%s", cap.text.data);
      f[k].c.step = (uint64_t)(100 * (k + 1) + i);
      cr_assert(same(&got, &f[k].c));
      orion_ckpt_free(&got);
      free(p);
    }
  free_fixture(&f[0]);
  free_fixture(&f[1]);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

/* ---- refusals --------------------------------------------------------------- */

/* Writes one checkpoint and returns its directory (dir/step-000000007). */
static char *one_checkpoint(const char *dir, Fixture *f) {
  make_fixture(f, 3, 7);
  write_ok(dir, f, NULL);
  return path2(dir, "step-000000007");
}

static void flip_byte(const char *path, long at) {
  FILE *fp = fopen(path, "r+b");
  cr_assert_not_null(fp);
  cr_assert_eq(fseek(fp, at, at < 0 ? SEEK_END : SEEK_SET), 0);
  int c = fgetc(fp);
  cr_assert_eq(fseek(fp, -1, SEEK_CUR), 0);
  fputc(c ^ 0x10, fp);
  fclose(fp);
}

static char *message(const char *fmt, ...) ORION_PRINTF(1, 2);
static char *message(const char *fmt, ...) {
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  return sb.data;
}

Test(train_checkpoint, another_package_is_refused_naming_both) {
  char *dir = scratch();
  Fixture f;
  char *ck = one_checkpoint(dir, &f);
  char *want = message("test: error: checkpoint '%s': belongs to package 'xxh64:0123456789abcdef', not to this "
                       "package 'xxh64:fedcba9876543210'\n", ck);
  load_fails(dir, "xxh64:fedcba9876543210", want);
  free(want);
  free(ck);
  free_fixture(&f);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_flipped_weight_byte_is_a_checksum_error) {
  char *dir = scratch();
  Fixture f;
  char *ck = one_checkpoint(dir, &f);
  char *w = path2(ck, "weights.safetensors");
  flip_byte(w, -3);
  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert_not(orion_ckpt_load(dir, NULL, &got, &cap.d));
  char *prefix = message("test: error: checkpoint '%s/weights.safetensors': checksum mismatch: XXH64 ", ck);
  cr_assert_eq(strncmp(cap.text.data, prefix, strlen(prefix)), 0, "%s", cap.text.data);
  cr_assert(strstr(cap.text.data, " where the manifest says ") && strstr(cap.text.data, " (a corrupted checkpoint)\n"));
  free(prefix);
  free(w);
  free(ck);
  free_fixture(&f);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_truncated_state_file_is_refused) {
  char *dir = scratch();
  Fixture f;
  char *ck = one_checkpoint(dir, &f);
  char *v = path2(ck, "state-v.safetensors");
  struct stat st;
  cr_assert_eq(stat(v, &st), 0);
  cr_assert_eq(truncate(v, st.st_size - 100), 0);
  StrBuf want;
  sb_init(&want);
  sb_printf(&want,
            "test: error: checkpoint '%s/state-v.safetensors': %lld bytes where the manifest says %lld (a partial or "
            "corrupted checkpoint)\n",
            ck, (long long)st.st_size - 100, (long long)st.st_size);
  load_fails(ck, NULL, want.data);
  sb_free(&want);
  free(v);
  free(ck);
  free_fixture(&f);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_missing_file_is_a_partial_checkpoint) {
  char *dir = scratch();
  Fixture f;
  char *ck = one_checkpoint(dir, &f);
  char *m = path2(ck, "state-m.safetensors");
  cr_assert_eq(unlink(m), 0);
  char *want = message("test: error: checkpoint '%s/state-m.safetensors': missing (a partial checkpoint)\n", ck);
  load_fails(dir, NULL, want);
  free(want);
  free(m);
  free(ck);
  free_fixture(&f);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, an_edited_manifest_fails_its_own_checksum) {
  char *dir = scratch();
  Fixture f;
  char *ck = one_checkpoint(dir, &f);
  char *m = path2(ck, "manifest.json");
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(m, 1u << 20, &text, &len, &err));
  char *at = strstr(text, "\"step\":\t7");
  cr_assert_not_null(at);
  at[8] = '8'; /* claims step 8 */
  cr_assert(write_file_atomic(m, text, len, &err));
  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert_not(orion_ckpt_load(ck, NULL, &got, &cap.d));
  char *prefix = message("test: error: checkpoint '%s/manifest.json': checksum mismatch: XXH64 ", ck);
  cr_assert_eq(strncmp(cap.text.data, prefix, strlen(prefix)), 0, "%s", cap.text.data);
  /* cut short: no checksum at its end */
  cr_assert(write_file_atomic(m, text, len / 2, &err));
  char *want = message("test: error: checkpoint '%s/manifest.json': does not end in its checksum (a partial or "
                       "corrupted checkpoint)\n", ck);
  load_fails(ck, NULL, want);
  free(want);
  free(prefix);
  free(text);
  free(m);
  free(ck);
  free_fixture(&f);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_directory_without_a_checkpoint_is_named) {
  char *dir = scratch();
  char *want = message("test: error: '%s' is not a checkpoint: it has no manifest.json and no 'latest' link\n", dir);
  load_fails(dir, NULL, want);
  free(want);
  char *latest = path2(dir, "latest");
  cr_assert_eq(symlink("step-000000009", latest), 0);
  char *ck = path2(dir, "step-000000009");
  want = message("test: error: checkpoint '%s/manifest.json': cannot read: No such file or directory (not a "
                 "checkpoint, or a partial one)\n", ck);
  load_fails(dir, NULL, want);
  free(want);
  free(ck);
  free(latest);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, what_cannot_be_written_is_refused_before_writing) {
  char *dir = scratch();
  Fixture f;
  make_fixture(&f, 4, 1);
  f.c.hyper[1].value = 0.0 / 0.0;
  Captured cap;
  capture(&cap);
  cr_assert_not(orion_ckpt_write(dir, &f.c, NULL, NULL, &cap.d));
  cr_assert_str_eq(cap.text.data, "test: error: checkpoint: hyper-parameter 'beta1' is not a finite number\n");
  DIR *dp = opendir(dir);
  int entries = 0;
  struct dirent *e;
  while ((e = readdir(dp))) entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(dp);
  cr_assert_eq(entries, 0);
  free_fixture(&f);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

Test(train_checkpoint, a_write_that_fails_leaves_the_directory_as_it_was) {
  /* A file size limit makes the write fail (EFBIG) as a full disk would. */
  char *dir = scratch();
  Fixture old, new;
  make_fixture(&old, 7, 70);
  make_fixture(&new, 8, 80);
  write_ok(dir, &old, NULL);
  char *msg_file = path2(dir, "..msg"); /* a leftover name the writer ignores: not .tmp-step-, not .trash- */
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {.rlim_cur = 5000, .rlim_max = 5000}; /* under one weight file */
    setrlimit(RLIMIT_FSIZE, &lim);
    StrBuf text;
    sb_init(&text);
    Diag d;
    diag_init(&d, NULL);
    d.capture = &text;
    d.program = "test";
    bool ok = orion_ckpt_write(dir, &new.c, NULL, NULL, &d);
    FILE *fp = fopen(msg_file, "w");
    fputs(text.data ? text.data : "", fp);
    fclose(fp);
    _exit(ok ? 1 : 0);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the write did not fail");
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(msg_file, 1u << 16, &text, &len, &err));
  char *prefix = message("test: error: checkpoint: cannot write '%s/.tmp-step-", dir);
  cr_assert_eq(strncmp(text, prefix, strlen(prefix)), 0, "%s", text);
  cr_assert(strstr(text, "/weights.safetensors': File too large\n"), "%s", text);
  unlink(msg_file);
  DIR *dp = opendir(dir);
  struct dirent *e;
  int entries = 0;
  while ((e = readdir(dp))) entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(dp);
  cr_assert_eq(entries, 2); /* latest and step-000000070 */
  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert(orion_ckpt_load(dir, NULL, &got, &cap.d), "%s", cap.text.data);
  cr_assert(same(&got, &old.c));
  orion_ckpt_free(&got);
  free(prefix);
  free(text);
  free(msg_file);
  free_fixture(&old);
  free_fixture(&new);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
}

/* ---- kill injection ------------------------------------------------------------ */

typedef struct KillAt {
  uint64_t at;  /* the step before which the child dies (0: never) */
  bool sigkill; /* SIGKILL itself, or _exit without cleanup */
  uint64_t seen;
} KillAt;

static void kill_hook(void *ctx, uint64_t n, const char *what) {
  (void)what;
  KillAt *k = ctx;
  k->seen = n;
  if (n != k->at) return;
  if (k->sigkill) raise(SIGKILL);
  _exit(77);
}

/* In a directory holding checkpoint `old` (and, with keep 1, retention to
 * do), a child writes `new` and dies before step `at`. The directory must
 * then load exactly old or exactly new; each step-* directory in it loads
 * exactly one of the two or is refused; and a later write
 * succeeds and loads. Returns 1 if the result was the new checkpoint. */
static int kill_once(const Fixture *old, const Fixture *new, const Fixture *later, uint64_t at, bool sigkill) {
  char *dir = scratch();
  OrionCkptWriteOptions o = {.keep = 1, .write_chunk = 4096};
  write_ok(dir, old, &o);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    KillAt k = {.at = at, .sigkill = sigkill};
    OrionCkptWriteOptions ko = o;
    ko.before_step = kill_hook;
    ko.hook_ctx = &k;
    Diag d;
    diag_init(&d, NULL);
    _exit(orion_ckpt_write(dir, &new->c, &ko, NULL, &d) ? 0 : 1);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(sigkill ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL : WIFEXITED(status) && WEXITSTATUS(status) == 77,
            "the child was to die at step %llu (status %d)", (unsigned long long)at, status);

  Captured cap;
  capture(&cap);
  OrionCheckpoint got;
  cr_assert(orion_ckpt_load(dir, old->c.package_id, &got, &cap.d), "killed at step %llu: %s", (unsigned long long)at,
            cap.text.data);
  bool is_new = same(&got, &new->c);
  cr_assert(is_new || same(&got, &old->c), "killed at step %llu: loaded neither checkpoint", (unsigned long long)at);
  orion_ckpt_free(&got);
  /* No step-* directory ever holds anything but its own checkpoint. */
  DIR *dp = opendir(dir);
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (strncmp(e->d_name, "step-", 5) != 0) continue;
    char *p = path2(dir, e->d_name);
    if (orion_ckpt_load(p, NULL, &got, &cap.d)) {
      cr_assert(same(&got, &old->c) || same(&got, &new->c), "killed at step %llu: %s holds something else",
                (unsigned long long)at, p);
      orion_ckpt_free(&got);
    }
    free(p);
  }
  closedir(dp);
  /* The next write clears what the kill left and lands. */
  write_ok(dir, later, &o);
  cr_assert(orion_ckpt_load(dir, NULL, &got, &cap.d), "%s", cap.text.data);
  cr_assert(same(&got, &later->c));
  orion_ckpt_free(&got);
  sb_free(&cap.text);
  remove_tree(dir);
  free(dir);
  return is_new;
}

/* The number of durable steps of the write kill_once kills. */
static uint64_t count_steps(const Fixture *old, const Fixture *new) {
  char *dir = scratch();
  OrionCkptWriteOptions o = {.keep = 1, .write_chunk = 4096};
  write_ok(dir, old, &o);
  KillAt k = {0};
  o.before_step = kill_hook;
  o.hook_ctx = &k;
  write_ok(dir, new, &o);
  remove_tree(dir);
  free(dir);
  return k.seen;
}

Test(train_checkpoint, a_write_killed_at_any_step_leaves_old_or_new_exactly, .timeout = 600) {
  Fixture old, new, later;
  make_fixture(&old, 10, 10);
  make_fixture(&new, 20, 20);
  make_fixture(&later, 30, 30);
  uint64_t steps = count_steps(&old, &new);
  /* a file of 3 tensors in 4 KiB writes, three such files, the manifest,
   * the syncs and renames, retention: a few dozen steps */
  cr_assert_gt(steps, 30, "only %llu steps", (unsigned long long)steps);
  uint32_t kills = 0, news = 0;
  for (uint64_t at = 1; at <= steps; at++, kills++) news += (uint32_t)kill_once(&old, &new, &later, at, at % 2);
  /* The sweep sees both outcomes: old before the rename into place, new after. */
  cr_assert_gt(news, 0);
  cr_assert_lt(news, kills);
  uint64_t seed = 0x5eed;
  while (kills < 130) {
    uint64_t at = 1 + splitmix64(&seed) % steps;
    kill_once(&old, &new, &later, at, splitmix64(&seed) & 1);
    kills++;
  }
  cr_assert_geq(kills, 100);
  free_fixture(&old);
  free_fixture(&new);
  free_fixture(&later);
}

Test(train_checkpoint, a_write_over_the_same_step_killed_at_any_step_leaves_old_or_new_exactly, .timeout = 600) {
  /* A resumed run writes a checkpoint of a step that is there already: the
   * new one is swapped in (RENAME_EXCHANGE) and the old one removed. */
  Fixture old, new, later;
  make_fixture(&old, 10, 10);
  make_fixture(&new, 20, 10);
  make_fixture(&later, 30, 30);
  uint64_t steps = count_steps(&old, &new);
  cr_assert_gt(steps, 30, "only %llu steps", (unsigned long long)steps);
  uint32_t news = 0;
  for (uint64_t at = 1; at <= steps; at++) news += (uint32_t)kill_once(&old, &new, &later, at, at % 2 == 0);
  cr_assert_gt(news, 0);
  cr_assert_lt(news, steps);
  free_fixture(&old);
  free_fixture(&new);
  free_fixture(&later);
}
