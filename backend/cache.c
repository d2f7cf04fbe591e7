/*
 * The compile cache (see orion/cache.h): a package is stored under a key
 * made from everything that determines its bytes, computed once the passes
 * have run — the legalized graph as canonical text (ops, attributes, shapes,
 * param sources and seeds), the target, the compiler version and the bytes
 * of the compiler's own executable (two builds of one version may emit
 * different packages, as during development), the options
 * that shape the package, the source's name and hash, and the contents of
 * every file a weight or a pass plugin comes from. What it saves is the
 * expensive part of a compile: producing, converting and writing weights.
 */
#define _GNU_SOURCE
#include "orion/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orion/hash.h"
#include "orion/pkg_paths.h"
#include "orion/temporaries.h"

char *compile_cache_default_dir(void) {
  const char *env = getenv("ORION_CACHE_DIR");
  if (env && *env) return xstrdup(env);
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  StrBuf sb;
  sb_init(&sb);
  if (xdg && *xdg) sb_printf(&sb, "%s/orion", xdg);
  else if (home && *home) sb_printf(&sb, "%s/.cache/orion", home);
  else {
    sb_free(&sb);
    return NULL;
  }
  return sb.data;
}

/* XXH3-64 of a whole file, mapped; false if it cannot be read. */
static bool hash_file(const char *path, uint64_t *h) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  size_t len = (size_t)st.st_size;
  void *p = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && p == MAP_FAILED) return false;
  *h = XXH3_64bits(p, len);
  if (len) munmap(p, len);
  return true;
}

static void put_file(StrBuf *sb, const char *what, const char *path) {
  uint64_t h;
  if (hash_file(path, &h)) sb_printf(sb, "%s %s %016llx\n", what, path, (unsigned long long)h);
  else sb_printf(sb, "%s %s unreadable\n", what, path); /* the compile itself will report it */
}

/* The training contract shapes the manifest, so it is part of the key. */
static void put_training(StrBuf *sb, const PkgTraining *t) {
  sb_printf(sb, "training %s %s %s %llu\n", t->forward, t->backward, t->loss, (unsigned long long)t->vocabulary);
  for (uint32_t i = 0; i < t->ninputs; i++)
    sb_printf(sb, "train-input %s %d %s\n", t->inputs[i].input, (int)t->inputs[i].from,
              t->inputs[i].name ? t->inputs[i].name : "");
  for (uint32_t i = 0; i < t->ngradients; i++)
    sb_printf(sb, "train-grad %s %s%s\n", t->gradients[i].output, t->gradients[i].input ? "input " : "", t->gradients[i].param);
  for (uint32_t i = 0; i < t->nadapters; i++)
    sb_printf(sb, "train-adapter %s %u %.17g\n", t->adapters[i].module, t->adapters[i].rank, t->adapters[i].alpha);
  for (uint32_t i = 0; i < t->nrows; i++)
    sb_printf(sb, "train-rows %s %s %s\n", t->rows[i].output, t->rows[i].param, t->rows[i].indices);
  for (uint32_t i = 0; i < t->nparams; i++) sb_printf(sb, "train-param %s\n", t->params[i]);
}

void compile_cache_key(IrModule *m, const PackageOptions *opt, const char *const *plugins, uint32_t nplugins,
                       char key[COMPILE_CACHE_KEY_LEN + 1]) {
  StrBuf sb;
  sb_init(&sb);
  /* 2: file contents keyed by XXH3-64 (XXH64 before) and format-2 packages. */
  sb_printf(&sb, "orion compile cache 2\ncompiler %s\ntarget %s\nsource %s\n", ORION_VERSION,
            mil_target_name(opt->target), opt->source_name ? opt->source_name : "");
  put_file(&sb, "compiler-build", "/proc/self/exe");
  char hex[65];
  sha256_hex(opt->source_text ? opt->source_text : "", opt->source_len, hex);
  sb_printf(&sb, "source-sha256 %s\nwarnings %u lint %d %u %u dedup-by-identity %d clamp %d\n", hex, opt->warnings,
            opt->lint_checked, opt->lint_errors, opt->lint_warnings, !opt->keep_duplicate_weights, opt->weights.clamp_fp16);
  for (uint32_t i = 0; i < opt->ncompile_args; i++) sb_printf(&sb, "arg %s\n", opt->compile_args[i]);
  for (uint32_t i = 0; i < nplugins; i++) put_file(&sb, "plugin", plugins[i]);
  if (opt->training) put_training(&sb, opt->training);
  /* Every weight file, once, by content. */
  StrBuf seen;
  sb_init(&seen);
  for (IrValueId v = ir_value_id(1); v.id < m->nvalues; v.id++) {
    IrValue *val = ir_value(m, v);
    if (val->dead || val->kind != VK_PARAM || m->funcs[val->func].dead || !val->src.path) continue;
    const char *path = val->src.path;
    char *full = NULL;
    if (path[0] != '/' && m->base_dir) full = arena_printf(&m->arena, "%s/%s", m->base_dir, path);
    const char *p = full ? full : path;
    StrBuf tag;
    sb_init(&tag);
    sb_printf(&tag, "\n%s\n", p);
    bool dup = seen.data && strstr(seen.data, tag.data);
    if (!dup) {
      sb_puts(&seen, tag.data);
      put_file(&sb, "weights", p);
    }
    sb_free(&tag);
  }
  sb_free(&seen);
  ir_print_module(m, &sb);
  sha256_hex(sb.data, sb.len, hex);
  memcpy(key, hex, COMPILE_CACHE_KEY_LEN);
  key[COMPILE_CACHE_KEY_LEN] = 0;
  sb_free(&sb);
}

/* ---- copying packages ---------------------------------------------------- */

/* Copies file `rel` of the package opened as `from` (read by the package
 * rule, orion/pkg_paths.h: a link leading out is not copied) to `to`. */
static bool copy_file(const PkgDir *from, const char *rel, const char *to) {
  bool outside;
  char why[4096 + 128];
  int in = pkg_open_file(from, rel, O_RDONLY, &outside, why, sizeof why);
  if (in < 0) {
    if (outside) errno = ELOOP;
    return false;
  }
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return false;
  }
  bool ok = true;
  for (;;) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, 1u << 30, 0);
    if (n == 0) break;
    if (n < 0) {
      /* Across file systems on old kernels: plain reads and writes. */
      if (errno != EXDEV && errno != ENOSYS && errno != EINVAL) {
        ok = false;
        break;
      }
      char buf[1 << 16];
      ssize_t r;
      while (ok && (r = read(in, buf, sizeof buf)) > 0) ok = write(out, buf, (size_t)r) == r;
      break;
    }
  }
  ok = ok && fsync(out) == 0;
  close(in);
  return close(out) == 0 && ok;
}

bool package_copy(const char *from, const char *to) {
  StrBuf b;
  sb_init(&b);
  sb_printf(&b, "%s/weights", to);
  PkgDir src;
  const char *err;
  bool opened = pkg_dir_open(&src, from, &err);
  bool ok = opened && mkdir(b.data, 0755) == 0;
  DIR *dir = ok ? opendir(from) : NULL; /* for the names only: each file is opened through src */
  ok = dir != NULL;
  for (struct dirent *e; ok && dir && (e = readdir(dir));) {
    size_t n = strlen(e->d_name);
    if (strcmp(e->d_name, PACKAGE_MANIFEST) && !(n > 4 && !strcmp(e->d_name + n - 4, ".mil"))) continue;
    b.len = 0;
    sb_printf(&b, "%s/%s", to, e->d_name);
    ok = copy_file(&src, e->d_name, b.data);
  }
  if (dir) closedir(dir);
  b.len = 0;
  sb_printf(&b, "%s/%s", to, PACKAGE_WEIGHTS);
  ok = ok && copy_file(&src, PACKAGE_WEIGHTS, b.data);
  if (opened) pkg_dir_close(&src);
  sb_free(&b);
  return ok;
}

static char *entry_path(const char *dir, const char *key) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s.anepkg", dir, key);
  return sb.data;
}

bool compile_cache_fetch(const char *dir, const char *key, const char *path, const TempDirHook *temp_dir, Diag *d) {
  char *entry = entry_path(dir, key);
  Package pkg;
  bool hit = false;
  /* A damaged entry is a miss (and is replaced by the compile), never a wrong package. */
  SourceSet quiet_sources;
  srcset_init(&quiet_sources);
  StrBuf quiet_text;
  sb_init(&quiet_text);
  Diag quiet;
  diag_init(&quiet, &quiet_sources);
  quiet.capture = &quiet_text;
  if (access(entry, F_OK) == 0 && package_read(entry, &pkg, &quiet)) {
    hit = package_verify(&pkg, &quiet);
    package_free(&pkg);
  }
  sb_free(&quiet_text);
  srcset_free(&quiet_sources);
  bool ok = false, exists;
  if (hit && package_check_target(path, &exists, d)) {
    size_t n = strlen(path) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.tmp-XXXXXX", path);
    const char *err = NULL;
    bool made = temp_dir_make(temp_dir, tmp);
    if (made && package_copy(entry, tmp) && package_install(tmp, path, exists, &err)) {
      ok = true;
      utimensat(AT_FDCWD, entry, NULL, 0); /* recently used */
    } else if (!err) {
      err = strerror(errno);
    }
    if (!ok) diag_error(d, (SrcSpan){0}, "cannot write the package '%s' from the compile cache: %s", path, err);
    if (made) temp_remove(tmp); /* a failed copy, or after a swap the old package */
    if (made && temp_dir && temp_dir->fn) temp_dir->fn(temp_dir->ctx, NULL);
    free(tmp);
  }
  free(entry);
  return ok;
}

typedef struct Entry {
  char *path;
  uint64_t bytes;
  struct timespec used;
} Entry;

static uint64_t tree_bytes(const char *pkg) {
  uint64_t total = 0;
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", pkg, PACKAGE_WEIGHTS);
  struct stat st;
  if (stat(sb.data, &st) == 0) total += (uint64_t)st.st_size;
  sb_free(&sb);
  return total + 4096; /* the manifest and MIL, roughly */
}

static int older_first(const void *a, const void *b) {
  const Entry *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* Least recently used entries go until the cache fits its budget. */
static void evict(const char *dir, uint64_t max_bytes) {
  leftovers_clean(dir, NULL, NULL); /* stores whose writer was killed (orion/temporaries.h) */
  DIR *dd = opendir(dir);
  if (!dd) return;
  Entry *es = NULL;
  uint32_t n = 0, cap = 0;
  uint64_t total = 0;
  for (struct dirent *e; (e = readdir(dd));) {
    size_t len = strlen(e->d_name);
    if (len != COMPILE_CACHE_KEY_LEN + 7 || strcmp(e->d_name + COMPILE_CACHE_KEY_LEN, ".anepkg")) continue;
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(sb.data, &st) != 0) {
      sb_free(&sb);
      continue;
    }
    xgrow((void **)&es, sizeof *es, &cap, n + 1);
    es[n] = (Entry){.path = sb.data, .bytes = tree_bytes(sb.data), .used = st.st_mtim};
    total += es[n++].bytes;
  }
  closedir(dd);
  qsort(es, n, sizeof *es, older_first);
  for (uint32_t i = 0; i < n; i++) {
    if (total > max_bytes) {
      remove_tree(es[i].path);
      total -= es[i].bytes;
    }
    free(es[i].path);
  }
  free(es);
}

bool compile_cache_store(const char *dir, const char *key, const char *path, uint64_t max_bytes) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    /* Parents too (~/.cache may not exist yet). */
    char *p = xstrdup(dir);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
      *s = 0;
      mkdir(p, 0755);
      *s = '/';
    }
    free(p);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
  }
  if (tree_bytes(path) > max_bytes) return false; /* would evict everything, itself included */
  char *entry = entry_path(dir, key);
  size_t n = strlen(entry) + 32;
  char *tmp = xmalloc(n);
  snprintf(tmp, n, "%s.tmp-XXXXXX", entry);
  bool made = temp_make_dir(tmp), ok = made && package_copy(path, tmp);
  /* An entry already there was damaged (it missed): swap it out and remove it. */
  if (ok && rename(tmp, entry) != 0)
    ok = (errno == ENOTEMPTY || errno == EEXIST) && renameat2(AT_FDCWD, tmp, AT_FDCWD, entry, RENAME_EXCHANGE) == 0;
  if (made) temp_remove(tmp);
  free(tmp);
  free(entry);
  if (ok) evict(dir, max_bytes);
  return ok;
}
