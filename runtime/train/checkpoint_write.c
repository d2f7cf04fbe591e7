/*
 * Writes a training checkpoint so that a kill at any instant leaves the
 * previous checkpoint or the new one, never a directory that passes for a
 * checkpoint and is not: every file goes into a temporary directory and is
 * fsync'd, the directory is fsync'd and only then renamed to its name, and
 * the `latest` link moves to it by a rename. Older checkpoints are removed
 * after that, renamed out of their name first so that a removal cut short
 * never leaves half a checkpoint under a checkpoint's name.
 */
#define _GNU_SOURCE /* renameat2 */
#include "checkpoint_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EXACT_INTEGER (1ull << 53)

typedef struct Writer {
  const OrionCkptWriteOptions *o;
  uint64_t steps;
  Diag *d;
} Writer;

/* Each durable step is announced first (the kill-injection test's hook). */
static void step(Writer *w, const char *what) {
  w->steps++;
  if (w->o && w->o->before_step) w->o->before_step(w->o->hook_ctx, w->steps, what);
}

static bool sys_fail(Writer *w, const char *what, const char *path) {
  diag_error(w->d, (SrcSpan){0}, "checkpoint: cannot %s '%s': %s", what, path, strerror(errno));
  return false;
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static bool sync_dir(Writer *w, const char *dir) {
  step(w, "fsync directory");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_fail(w, "open the directory", dir);
  bool ok = fsync(fd) == 0;
  if (!ok) sys_fail(w, "fsync the directory", dir);
  close(fd);
  return ok;
}

/* ---- one durable file ----------------------------------------------------- */

typedef struct OutFile {
  Writer *w;
  const char *path;
  int fd;
  CkptHash hash;
  uint64_t bytes;
  bool ok;
} OutFile;

static void out_open(OutFile *f, Writer *w, const char *path) {
  *f = (OutFile){.w = w, .path = path, .fd = -1, .ok = true};
  ckpt_hash_init(&f->hash);
  step(w, "create file");
  f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f->fd < 0) f->ok = sys_fail(w, "create", path);
}

static void out_write(OutFile *f, const void *data, size_t n) {
  const char *p = data;
  while (f->ok && n) {
    size_t most = f->w->o && f->w->o->write_chunk ? f->w->o->write_chunk : ORION_CKPT_WRITE_CHUNK;
    size_t chunk = n < most ? n : most;
    step(f->w, "write");
    ssize_t got = write(f->fd, p, chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EIO;
      f->ok = sys_fail(f->w, "write", f->path);
      break;
    }
    ckpt_hash_update(&f->hash, p, (size_t)got);
    f->bytes += (uint64_t)got;
    p += got;
    n -= (size_t)got;
  }
}

/* Syncs and closes; adds {name, bytes, xxh64} to `files` on success. */
static bool out_close(OutFile *f, const char *name, cJSON *files) {
  if (f->ok) {
    step(f->w, "fsync file");
    if (fsync(f->fd) != 0) f->ok = sys_fail(f->w, "fsync", f->path);
  }
  if (f->fd >= 0 && close(f->fd) != 0 && f->ok) f->ok = sys_fail(f->w, "close", f->path);
  if (!f->ok || !files) {
    ckpt_hash_discard(&f->hash);
    return f->ok;
  }
  char hex[17];
  ckpt_hash_hex(&f->hash, hex);
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddNumberToObject(e, "bytes", (double)f->bytes);
  cJSON_AddStringToObject(e, "xxh64", hex);
  cJSON_AddItemToArray(files, e);
  return true;
}

/* A safetensors file of the weights' names and shapes with `data[i]` as
 * tensor i's data (one optimizer state slot), or the weights themselves
 * (data NULL). */
static bool write_tensors(Writer *w, const char *dir, const char *name, const OrionCheckpoint *c,
                          float *const *data, cJSON *files) {
  char *path = join(dir, name);
  StrBuf header;
  sb_init(&header);
  ckpt_safetensors_header(c->weights, c->nweights, &header);
  OutFile f;
  out_open(&f, w, path);
  out_write(&f, header.data, header.len);
  for (uint32_t i = 0; i < c->nweights; i++)
    out_write(&f, data ? data[i] : c->weights[i].data, orion_ckpt_tensor_count(&c->weights[i]) * sizeof(float));
  bool ok = out_close(&f, name, files);
  sb_free(&header);
  free(path);
  return ok;
}

/* ---- what is written is checked first --------------------------------------- */

static bool invalid(Diag *d, const char *fmt, ...) ORION_PRINTF(2, 3);

static bool invalid(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, DIAG_ERROR, (SrcSpan){0}, fmt, ap);
  va_end(ap);
  return false;
}

static bool check_checkpoint(const OrionCheckpoint *c, Diag *d) {
  if (!ckpt_valid_id(c->package_id))
    return invalid(d, "%s", "checkpoint: the package identity must be 1 to 128 printable characters");
  if (!ckpt_plain_name(c->optimizer))
    return invalid(d, "checkpoint: optimizer name '%s' is not 1 to 64 of [a-z0-9_]", c->optimizer ? c->optimizer : "");
  if (c->step > MAX_EXACT_INTEGER) return invalid(d, "%s", "checkpoint: the step is beyond 2^53");
  if (c->data_position_len > ORION_CKPT_MAX_BLOB || c->rng_state_len > ORION_CKPT_MAX_BLOB)
    return invalid(d, "checkpoint: the data position or RNG state is over %u bytes", ORION_CKPT_MAX_BLOB);
  if ((c->data_position_len && !c->data_position) || (c->rng_state_len && !c->rng_state))
    return invalid(d, "%s", "checkpoint: an opaque state has a length but no bytes");
  if (!isfinite(c->loss_scale.scale) || c->loss_scale.scale <= 0)
    return invalid(d, "%s", "checkpoint: the loss scale must be a positive finite number");
  if (c->loss_scale.good_steps > MAX_EXACT_INTEGER || c->loss_scale.skipped_steps > MAX_EXACT_INTEGER)
    return invalid(d, "%s", "checkpoint: a loss-scale counter is beyond 2^53");
  if (c->nhyper > ORION_CKPT_MAX_HYPER) return invalid(d, "checkpoint: more than %d hyper-parameters", ORION_CKPT_MAX_HYPER);
  for (uint32_t i = 0; i < c->nhyper; i++) {
    if (!ckpt_plain_name(c->hyper[i].name))
      return invalid(d, "checkpoint: hyper-parameter name '%s' is not 1 to 64 of [a-z0-9_]",
                     c->hyper[i].name ? c->hyper[i].name : "");
    if (!isfinite(c->hyper[i].value))
      return invalid(d, "checkpoint: hyper-parameter '%s' is not a finite number", c->hyper[i].name);
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(c->hyper[i].name, c->hyper[j].name))
        return invalid(d, "checkpoint: hyper-parameter '%s' is given twice", c->hyper[i].name);
  }
  if (c->nslots > ORION_CKPT_MAX_SLOTS) return invalid(d, "checkpoint: more than %d optimizer state slots", ORION_CKPT_MAX_SLOTS);
  for (uint32_t s = 0; s < c->nslots; s++) {
    if (!ckpt_plain_name(c->slot_names[s]))
      return invalid(d, "checkpoint: state slot name '%s' is not 1 to 64 of [a-z0-9_]",
                     c->slot_names[s] ? c->slot_names[s] : "");
    for (uint32_t j = 0; j < s; j++)
      if (!strcmp(c->slot_names[s], c->slot_names[j]))
        return invalid(d, "checkpoint: state slot '%s' is given twice", c->slot_names[s]);
    if (!c->state[s]) return invalid(d, "checkpoint: state slot '%s' has no tensors", c->slot_names[s]);
    for (uint32_t i = 0; i < c->nweights; i++)
      if (!c->state[s][i]) return invalid(d, "checkpoint: state slot '%s' lacks a tensor", c->slot_names[s]);
  }
  if (c->nweights == 0) return invalid(d, "%s", "checkpoint: no weights");
  for (uint32_t i = 0; i < c->nweights; i++) {
    const OrionCkptTensor *t = &c->weights[i];
    if (!t->name || !t->name[0] || strlen(t->name) > 1024)
      return invalid(d, "%s", "checkpoint: a weight has no name (or one over 1024 bytes)");
    if (!t->data) return invalid(d, "checkpoint: weight '%s' has no data", t->name);
    if (t->rank > ORION_MAX_RANK) return invalid(d, "checkpoint: weight '%s' has a rank over %d", t->name, ORION_MAX_RANK);
    uint64_t n = 1;
    for (uint32_t k = 0; k < t->rank; k++) {
      if (t->dims[k] <= 0 || (uint64_t)t->dims[k] > MAX_EXACT_INTEGER / 4 / n)
        return invalid(d, "checkpoint: weight '%s' has an empty or too large dimension", t->name);
      n *= (uint64_t)t->dims[k];
    }
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(t->name, c->weights[j].name)) return invalid(d, "checkpoint: weight '%s' is given twice", t->name);
  }
  return true;
}

/* ---- the manifest ------------------------------------------------------------ */

static void add_hex(cJSON *o, const char *key, const uint8_t *p, size_t n) {
  char *s = xmalloc(2 * n + 1);
  for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
  s[2 * n] = 0;
  cJSON_AddStringToObject(o, key, s);
  free(s);
}

/* cJSON prints a double to 15 digits when that is near enough, not always
 * exactly; the manifest's numbers must read back bit for bit. */
static void add_exact(cJSON *o, const char *key, double v) {
  StrBuf sb;
  sb_init(&sb);
  sb_put_double(&sb, v);
  cJSON_AddRawToObject(o, key, sb.data);
  sb_free(&sb);
}

/* The manifest's text: every field, the files' checksums, and last its own
 * checksum of the text before it (CKPT_SELF_SEP). */
static char *manifest_text(const OrionCheckpoint *c, cJSON *files) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", CKPT_FORMAT_NAME);
  cJSON_AddNumberToObject(root, "format_version", ORION_CKPT_FORMAT_VERSION);
  cJSON_AddNumberToObject(root, "step", (double)c->step);
  cJSON_AddStringToObject(root, "package", c->package_id);
  cJSON *opt = cJSON_AddObjectToObject(root, "optimizer");
  cJSON_AddStringToObject(opt, "name", c->optimizer);
  cJSON *hyper = cJSON_AddObjectToObject(opt, "hyper");
  for (uint32_t i = 0; i < c->nhyper; i++) add_exact(hyper, c->hyper[i].name, c->hyper[i].value);
  cJSON *slots = cJSON_AddArrayToObject(opt, "slots");
  for (uint32_t s = 0; s < c->nslots; s++) cJSON_AddItemToArray(slots, cJSON_CreateString(c->slot_names[s]));
  cJSON *ls = cJSON_AddObjectToObject(root, "loss_scale");
  add_exact(ls, "scale", c->loss_scale.scale);
  cJSON_AddNumberToObject(ls, "good_steps", (double)c->loss_scale.good_steps);
  cJSON_AddNumberToObject(ls, "skipped_steps", (double)c->loss_scale.skipped_steps);
  add_hex(root, "data_position", c->data_position, c->data_position_len);
  add_hex(root, "rng_state", c->rng_state, c->rng_state_len);
  cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
  for (uint32_t i = 0; i < c->nweights; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", c->weights[i].name);
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    for (uint32_t k = 0; k < c->weights[i].rank; k++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)c->weights[i].dims[k]));
    cJSON_AddItemToArray(tensors, e);
  }
  cJSON_AddItemToObject(root, "files", files);
  char *body = cJSON_Print(root); /* ends in "\n}" */
  cJSON_Delete(root);
  size_t len = strlen(body);
  CkptHash h;
  ckpt_hash_init(&h);
  ckpt_hash_update(&h, body, len);
  char hex[17];
  ckpt_hash_hex(&h, hex);
  StrBuf sb;
  sb_init(&sb);
  sb_putn(&sb, body, len - 2);
  sb_puts(&sb, CKPT_SELF_SEP);
  sb_puts(&sb, hex);
  sb_puts(&sb, "\"\n}\n");
  cJSON_free(body);
  return sb.data;
}

/* ---- the directory ------------------------------------------------------------- */

static bool make_dirs(Writer *w, const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    errno = ENOTDIR;
    return sys_fail(w, "use the directory", dir);
  }
  char *p = xstrdup(dir);
  bool ok = true;
  for (char *s = p + 1; ok; s++) {
    bool end = *s == 0;
    if (*s == '/' || end) {
      *s = 0;
      if (mkdir(p, 0755) != 0 && errno != EEXIST) ok = sys_fail(w, "make the directory", p);
      if (end) break;
      *s = '/';
    }
  }
  free(p);
  return ok;
}

/* Step number of a checkpoint directory name, or -1. */
static int64_t step_of(const char *name) {
  size_t n = strlen(CKPT_STEP_PREFIX);
  if (strncmp(name, CKPT_STEP_PREFIX, n) != 0 || !name[n] || strlen(name + n) > 16) return -1;
  int64_t v = 0;
  for (const char *s = name + n; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

/* Removes a tree: renamed out of its name first (a removal cut short leaves a
 * .trash- directory, never half a checkpoint under a checkpoint's name). */
static void discard(Writer *w, const char *dir, const char *name) {
  char *from = join(dir, name);
  char *to = NULL;
  if (strncmp(name, CKPT_TRASH_PREFIX, strlen(CKPT_TRASH_PREFIX)) != 0) {
    size_t n = strlen(dir) + strlen(name) + 16;
    to = xmalloc(n);
    snprintf(to, n, "%s/%s%s", dir, CKPT_TRASH_PREFIX, name);
    step(w, "rename to trash");
    if (rename(from, to) != 0) {
      free(to);
      to = NULL;
    }
  }
  step(w, "remove");
  remove_tree(to ? to : from);
  free(to);
  free(from);
}

/* Leftovers of an interrupted write: temporary and trash directories, a
 * temporary latest link. */
static void remove_leftovers(Writer *w, const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  char **names = NULL;
  uint32_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strncmp(e->d_name, CKPT_TMP_PREFIX, strlen(CKPT_TMP_PREFIX)) ||
        !strncmp(e->d_name, CKPT_TRASH_PREFIX, strlen(CKPT_TRASH_PREFIX)) || !strcmp(e->d_name, CKPT_LATEST_TMP)) {
      xgrow((void **)&names, sizeof *names, &cap, n + 1);
      names[n++] = xstrdup(e->d_name);
    }
  }
  closedir(dp);
  for (uint32_t i = 0; i < n; i++) {
    char *p = join(dir, names[i]);
    step(w, "remove leftover");
    remove_tree(p);
    free(p);
    free(names[i]);
  }
  free(names);
}

static int by_step_descending(const void *a, const void *b) {
  int64_t x = step_of(*(char *const *)a), y = step_of(*(char *const *)b);
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps `keep` checkpoints: the one just written and the newest others. */
static void apply_retention(Writer *w, const char *dir, const char *kept, uint32_t keep) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  char **names = NULL;
  uint32_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (step_of(e->d_name) < 0 || !strcmp(e->d_name, kept)) continue;
    xgrow((void **)&names, sizeof *names, &cap, n + 1);
    names[n++] = xstrdup(e->d_name);
  }
  closedir(dp);
  if (n) qsort(names, n, sizeof *names, by_step_descending);
  for (uint32_t i = 0; i < n; i++) {
    if (i + 1 >= keep) discard(w, dir, names[i]);
    free(names[i]);
  }
  free(names);
}

/* Points dir/latest at `name`: a new link beside it renamed over it. */
static bool point_latest(Writer *w, const char *dir, const char *name) {
  char *tmp = join(dir, CKPT_LATEST_TMP), *latest = join(dir, CKPT_LATEST);
  unlink(tmp);
  step(w, "symlink");
  bool ok = symlink(name, tmp) == 0;
  if (!ok) sys_fail(w, "make the link", tmp);
  if (ok) {
    step(w, "rename latest");
    ok = rename(tmp, latest) == 0;
    if (!ok) {
      sys_fail(w, "rename into place", latest);
      unlink(tmp);
    }
  }
  ok = ok && sync_dir(w, dir);
  free(tmp);
  free(latest);
  return ok;
}

static bool write_locked(Writer *w, const char *dir, const OrionCheckpoint *c, char **written);

bool orion_ckpt_write(const char *dir, const OrionCheckpoint *c, const OrionCkptWriteOptions *o, char **written,
                      Diag *d) {
  if (written) *written = NULL;
  if (!check_checkpoint(c, d)) return false;
  Writer w = {.o = o, .d = d};
  if (!make_dirs(&w, dir)) return false;
  /* One writer at a time per directory (two runs pointed at one directory
   * take turns instead of removing each other's temporary directories); the
   * lock goes with the process, a killed writer's too. */
  int lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock < 0) return sys_fail(&w, "open the directory", dir);
  int locked;
  do locked = flock(lock, LOCK_EX);
  while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    sys_fail(&w, "lock the directory", dir);
    close(lock);
    return false;
  }
  bool ok = write_locked(&w, dir, c, written);
  close(lock);
  return ok;
}

/* The write itself, under the directory's lock. */
static bool write_locked(Writer *w, const char *dir, const OrionCheckpoint *c, char **written) {
  const OrionCkptWriteOptions *o = w->o;
  remove_leftovers(w, dir);

  char name[32];
  snprintf(name, sizeof name, CKPT_STEP_PREFIX "%09llu", (unsigned long long)c->step);
  char *tmp = join(dir, CKPT_TMP_PREFIX "XXXXXX"), *final = join(dir, name);
  step(w, "make directory");
  bool ok = mkdtemp(tmp) != NULL;
  if (!ok) {
    sys_fail(w, "make a temporary directory in", dir);
    free(tmp);
    free(final);
    return false;
  }
  chmod(tmp, 0755); /* mkdtemp's 0700 would hide it from the run's other readers */
  cJSON *files = cJSON_CreateArray();
  ok = write_tensors(w, tmp, CKPT_WEIGHTS, c, NULL, files);
  for (uint32_t s = 0; ok && s < c->nslots; s++) {
    char file[96];
    ckpt_slot_file(c->slot_names[s], file, sizeof file);
    ok = write_tensors(w, tmp, file, c, c->state[s], files);
  }
  if (ok) {
    char *text = manifest_text(c, files);
    files = NULL; /* the manifest's now */
    char *path = join(tmp, CKPT_MANIFEST);
    OutFile f;
    out_open(&f, w, path);
    out_write(&f, text, strlen(text));
    ok = out_close(&f, CKPT_MANIFEST, NULL);
    free(path);
    free(text);
  }
  cJSON_Delete(files);
  ok = ok && sync_dir(w, tmp);
  if (ok) {
    /* A checkpoint of this step may be there already (a run resumed from an
     * earlier one): swap it out in one step, so that the name always holds a
     * complete checkpoint. */
    step(w, "rename into place");
    bool exists = rename(tmp, final) != 0;
    if (exists && (errno == EEXIST || errno == ENOTEMPTY)) {
      step(w, "exchange with the old checkpoint");
      ok = renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0;
      if (!ok) sys_fail(w, "replace", final);
    } else if (exists) {
      ok = sys_fail(w, "rename into place", final);
    }
  }
  ok = ok && sync_dir(w, dir);
  if (!ok) {
    remove_tree(tmp);
  } else if (access(tmp, F_OK) == 0) {
    /* the exchanged-out old checkpoint of the same step */
    step(w, "remove");
    remove_tree(tmp);
  }
  ok = ok && point_latest(w, dir, name);
  if (ok && o && o->keep) apply_retention(w, dir, name, o->keep);
  if (ok && written) *written = final;
  else free(final);
  free(tmp);
  return ok;
}
