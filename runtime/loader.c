/*
 * The runtime's program loader (orion_open/orion_close, runtime.h).
 *
 * A package is read through the backend's manifest reader and checksum
 * verifier, then each function's MIL file is parsed and checked against the
 * manifest (parameters and returns by MIL name, dtype and shape). A bare
 * directory (the inside of a compiled .mlmodelc) has only model.mil; its I/O
 * description comes from the MIL functions themselves. In both cases every
 * BLOBFILE literal is resolved under the model directory with its path
 * confined there (`@model_path/` prefix, no `..`, no absolute or empty
 * components, no symlink leading out: opened through the directory's
 * descriptor, orion/pkg_paths.h), its weight file mapped read-only once
 * (privately writable with OrionOpenOptions.writable_weights, for
 * orion_write_weights), and its record checked by the blob reader against
 * the declared type.
 *
 * The loader reports every problem it finds before failing, so one run shows
 * all of a broken package's faults.
 */
/* realpath() is XSI, beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include "orion/runtime.h"
#include "loader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/blob.h"
#include "orion/manifest.h"
#include "orion/patch.h"
#include "orion/pkg_paths.h"

#define MODEL_PATH_PREFIX "@model_path/"
#define BARE_MIL "model.mil"

/* One weight file, mapped once however many BLOBFILEs name it. */
typedef struct Mapping {
  char *real; /* realpath, for messages and orion_program_weight_file */
  char *rel;  /* the path under the model directory it was opened by (reloads open it so again) */
  dev_t dev;  /* the file's identity: two spellings of one file share a mapping */
  ino_t ino;
  const uint8_t *base;
  size_t len;
  BlobFile bf;
  bool header_ok;
  /* After a reload: the previous mapping, kept until the backends have moved
   * to the new one (orion_release_retired_weights) or the reload is undone. */
  const uint8_t *retired;
  const uint8_t *fresh; /* during a reload: the new mapping, not yet committed */
  /* Writable programs: the bytes orion_write_weights changed since they were
   * last written back to the file, [dirty_lo, dirty_hi) (empty if equal). */
  size_t dirty_lo, dirty_hi;
} Mapping;

typedef struct LoadedFunc {
  const char *name;
  const MilFunc *mil;
  OrionTensorInfo *inputs, *outputs;
  uint32_t ninputs, noutputs;
  OrionWeight *weights;
  uint32_t nweights, wcap;
  bool dynamic;
} LoadedFunc;

struct OrionProgram {
  char *path; /* as orion_open was given it */
  char *root; /* realpath of the model directory: what @model_path stands for */
  MilProgram **programs;
  uint32_t nprograms;
  LoadedFunc *funcs;
  uint32_t nfuncs;
  Mapping *maps;
  uint32_t nmaps, mapcap;
  Arena arena; /* copied names, I/O arrays */
  bool is_package;
  bool writable;        /* weight files mapped shared and writable (OrionOpenOptions.writable_weights) */
  bool weights_written; /* orion_write_weights changed the files since the manifest was last made to match */
  uint64_t generation;  /* the manifest's WeightsGeneration when the weights were (re)loaded */
  uint64_t version;     /* orion_weights_version: counts the writes and moves of the weight data */
  char (*mil_xxh64)[17]; /* per function: its MIL file's checksum at open */
  Package manifest;      /* as verified at open or at the last reload (packages) */
  /* What the last reload replaced, until it is released or undone. */
  bool has_retired;
  uint64_t retired_generation;
  Package retired_manifest;
};

/* The state of one orion_open call. */
typedef struct Loader {
  OrionProgram *p;
  PkgDir dir; /* the model directory, opened once: its files are opened relative to it */
  Diag *d;
  bool failed;
} Loader;

static void lerr(Loader *L, SrcSpan at, const char *fmt, ...) ORION_PRINTF(3, 4);
static void lerr(Loader *L, SrcSpan at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(L->d, DIAG_ERROR, at, fmt, ap);
  va_end(ap);
  L->failed = true;
}

/* A weight file's mapping: private, read-only or (writable programs)
 * writable. Private even then: the pages orion_write_weights changes become
 * the process's own, so a training step costs no file I/O and no writeback;
 * orion_program_write_back puts them into the file when asked. */
static void *map_weights(const OrionProgram *p, int fd, size_t len) {
  return mmap(NULL, len, p->writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
}

/* ---- types ---------------------------------------------------------------- */

/* The blob dtype code a BLOBFILE of this element type must carry, for the
 * types whose blobs we load (the set our writer and Apple's reader share);
 * 0 for the others. */
static uint32_t blob_code(MilDType t) {
  bool loaded = t == MIL_DT_FP16 || t == MIL_DT_FP32 || t == MIL_DT_UINT8 || t == MIL_DT_INT8 || t == MIL_DT_INT32;
  return loaded ? orion_dtype_blob_code(t) : 0;
}

/* elements x element size, 0 when a dimension is unknown or it overflows. */
static uint64_t tensor_bytes(MilDType t, uint32_t rank, const int64_t *dims) {
  uint64_t n = orion_dtype_size(t); /* 0 for sub-byte and string */
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] < 0) return 0;
    if (dims[i] != 0 && n > UINT64_MAX / (uint64_t)dims[i]) return 0;
    n *= (uint64_t)dims[i];
  }
  return n;
}

static bool dims_dynamic(uint32_t rank, const int64_t *dims) {
  for (uint32_t i = 0; i < rank; i++)
    if (dims[i] < 0) return true;
  return false;
}

/* Always the long spelling, so a manifest type and a MIL type compare as text. */
static void print_tensor(StrBuf *sb, MilDType t, uint32_t rank, const int64_t *dims) {
  sb_printf(sb, "tensor<%s, [", mil_dtype_name(t));
  for (uint32_t i = 0; i < rank; i++) {
    if (i) sb_puts(sb, ", ");
    if (dims[i] < 0) sb_putc(sb, '?');
    else sb_printf(sb, "%" PRId64, dims[i]);
  }
  sb_puts(sb, "]>");
}

static void print_mil_type(StrBuf *sb, const MilType *t) {
  if (t->kind == MIL_TYPE_TENSOR) print_tensor(sb, t->dtype, t->rank, t->dims);
  else mil_type_print(t, sb);
}

/* ---- weight files ------------------------------------------------------------ */

/* Checks the textual form of a BLOBFILE path; returns the part after the prefix. */
static const char *check_blob_path(Loader *L, SrcSpan at, const char *path) {
  if (path[0] == '/') {
    lerr(L, at, "BLOBFILE path '%s' is absolute; weight paths must start with " MODEL_PATH_PREFIX, path);
    return NULL;
  }
  size_t plen = strlen(MODEL_PATH_PREFIX);
  if (strncmp(path, MODEL_PATH_PREFIX, plen) != 0) {
    lerr(L, at, "BLOBFILE path '%s' does not start with " MODEL_PATH_PREFIX, path);
    return NULL;
  }
  const char *rest = path + plen;
  if (rest[0] == '/') {
    lerr(L, at, "BLOBFILE path '%s' is absolute after " MODEL_PATH_PREFIX, path);
    return NULL;
  }
  for (const char *c = rest;;) {
    size_t n = strcspn(c, "/");
    if (n == 0) {
      lerr(L, at, "BLOBFILE path '%s' has an empty component", path);
      return NULL;
    }
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      lerr(L, at, "BLOBFILE path '%s' has a '..' component; weights must stay inside the model directory", path);
      return NULL;
    }
    if (c[n] == '\0') break;
    c += n + 1;
  }
  return rest;
}

/* The mapping of the weight file a BLOBFILE names, mapping it on first use;
 * NULL after reporting. The file is opened through the model directory's
 * descriptor by the package rule (pkg_open_file), and a refusal is worded
 * as every package reader words it, at the BLOBFILE's place in the MIL. */
static Mapping *weight_file(Loader *L, SrcSpan at, const char *path) {
  OrionProgram *p = L->p;
  const char *rest = check_blob_path(L, at, path);
  if (!rest) return NULL;
  StrBuf full;
  sb_init(&full);
  sb_printf(&full, "%s/%s", p->root, rest);
  Mapping *m = NULL;
  bool outside;
  char why[4096 + 128];
  struct stat st;
  int fd = pkg_open_file(&L->dir, rest, O_RDONLY, &outside, why, sizeof why);
  if (fd < 0) {
    if (outside) lerr(L, at, "%s/%s: %s", p->path, rest, why);
    else if (!strcmp(why, "is a directory") || !strcmp(why, "is not a regular file"))
      lerr(L, at, "BLOBFILE path '%s': '%s' is not a regular file", path, full.data);
    else lerr(L, at, "BLOBFILE path '%s': cannot open '%s': %s", path, full.data, why);
    goto done;
  }
  if (fstat(fd, &st) != 0) {
    lerr(L, at, "BLOBFILE path '%s': cannot open '%s': %s", path, full.data, strerror(errno));
    close(fd);
    goto done;
  }
  for (uint32_t i = 0; i < p->nmaps; i++)
    if (p->maps[i].dev == st.st_dev && p->maps[i].ino == st.st_ino) {
      m = &p->maps[i];
      close(fd);
      goto done;
    }
  const uint8_t *base = NULL;
  size_t len = (size_t)st.st_size;
  /* mmap refuses length 0; an empty file is left to the header check. */
  if (len > 0) {
    void *addr = map_weights(p, fd, len);
    if (addr == MAP_FAILED) {
      lerr(L, at, "BLOBFILE path '%s': cannot map '%s': %s", path, full.data, strerror(errno));
      close(fd);
      goto done;
    }
    base = addr;
  }
  close(fd);
  /* The realpath only names the file (messages, look-ups by name); the mapping is of what was opened. */
  char *real = realpath(full.data, NULL);
  xgrow((void **)&p->maps, sizeof *p->maps, &p->mapcap, p->nmaps + 1);
  m = &p->maps[p->nmaps++];
  *m = (Mapping){.real = real ? real : xstrdup(full.data), .rel = xstrdup(rest), .dev = st.st_dev, .ino = st.st_ino,
                 .base = base, .len = len};
  char berr[256];
  m->header_ok = blob_file_open(&m->bf, base, len, berr, sizeof berr);
  /* Reported once, at the first statement naming the file; later ones fail quietly. */
  if (!m->header_ok) lerr(L, at, "%s: %s", path, berr);
done:
  sb_free(&full);
  return m;
}

/* Resolves one BLOBFILE literal of statement `si` into a weight of lf. */
static void load_blob(Loader *L, LoadedFunc *lf, uint32_t si, const MilAttr *a) {
  const MilStmt *s = &lf->mil->stmts[si];
  const MilLiteral *lit = a->value;
  const MilType *t = &lit->type;
  uint32_t code = blob_code(t->dtype);
  if (t->kind != MIL_TYPE_TENSOR || !code) {
    StrBuf sb;
    sb_init(&sb);
    mil_type_print(t, &sb);
    lerr(L, s->loc, "BLOBFILE of %s is not supported", t->kind == MIL_TYPE_TENSOR ? mil_dtype_name(t->dtype) : sb.data);
    sb_free(&sb);
    return;
  }
  uint64_t nbytes = tensor_bytes(t->dtype, t->rank, t->dims);
  if (nbytes == 0) {
    StrBuf sb;
    sb_init(&sb);
    print_tensor(&sb, t->dtype, t->rank, t->dims);
    lerr(L, s->loc, "BLOBFILE of type %s has no fixed, non-zero byte size", sb.data);
    sb_free(&sb);
    return;
  }
  Mapping *m = weight_file(L, s->loc, lit->blob_path);
  if (!m) return;
  if (!m->header_ok) {
    L->failed = true;
    return;
  }
  BlobInfo info;
  char berr[256];
  if (!blob_file_read_expect(&m->bf, lit->blob_offset, code, nbytes, &info, berr, sizeof berr)) {
    lerr(L, s->loc, "%s: %s", lit->blob_path, berr);
    return;
  }
  if (info.offset_unusual)
    diag_warning(L->d, s->loc, "%s: the blob record at offset %" PRIu64 " has its data at %" PRIu64
                 ", not right after the record", lit->blob_path, lit->blob_offset, info.data_offset);
  xgrow((void **)&lf->weights, sizeof *lf->weights, &lf->wcap, lf->nweights + 1);
  lf->weights[lf->nweights++] = (OrionWeight){
      .name = s->nresults ? s->results[0].name : (s->op_name ? s->op_name : ""),
      .attr = a->name,
      .stmt = si,
      .dtype = t->dtype,
      .data = m->base + info.data_offset,
      .size = info.size,
  };
}

/* Every BLOBFILE in a function's statement attributes (const's val, and the
 * blob operands of constexpr_* ops). */
static void load_weights(Loader *L, LoadedFunc *lf) {
  for (uint32_t si = 0; si < lf->mil->nstmts; si++) {
    const MilStmt *s = &lf->mil->stmts[si];
    for (uint32_t ai = 0; ai < s->nattrs; ai++)
      if (s->attrs[ai].value && s->attrs[ai].value->payload == MIL_PAYLOAD_BLOB) load_blob(L, lf, si, &s->attrs[ai]);
  }
}

/* ---- I/O description ---------------------------------------------------------- */

static void info_from_mil(OrionTensorInfo *ti, const char *name, const MilType *t) {
  *ti = (OrionTensorInfo){.name = name, .mil_name = name};
  if (t && t->kind == MIL_TYPE_TENSOR) {
    ti->dtype = t->dtype;
    ti->rank = t->rank;
    memcpy(ti->dims, t->dims, sizeof ti->dims);
    ti->bytes = tensor_bytes(t->dtype, t->rank, t->dims);
  }
}

static bool type_dynamic(const MilType *t) {
  return t && t->kind == MIL_TYPE_TENSOR && dims_dynamic(t->rank, t->dims);
}

/* Bare directory: I/O straight from the MIL function; bindings in ASCII order
 * of the names, as the ANE binds surfaces. */
static void io_from_mil(Loader *L, LoadedFunc *lf) {
  const MilFunc *f = lf->mil;
  Arena *a = &L->p->arena;
  lf->ninputs = f->nparams;
  lf->inputs = arena_alloc(a, (f->nparams + 1) * sizeof *lf->inputs);
  for (uint32_t i = 0; i < f->nparams; i++) {
    info_from_mil(&lf->inputs[i], f->params[i].name, &f->params[i].type);
    for (uint32_t j = 0; j < f->nparams; j++) lf->inputs[i].binding += strcmp(f->params[j].name, f->params[i].name) < 0;
    lf->dynamic |= type_dynamic(&f->params[i].type);
  }
  lf->noutputs = f->nreturns;
  lf->outputs = arena_alloc(a, (f->nreturns + 1) * sizeof *lf->outputs);
  for (uint32_t i = 0; i < f->nreturns; i++) {
    const MilType *t = mil_operand_type(f, &f->returns[i]);
    info_from_mil(&lf->outputs[i], f->returns[i].name, t);
    for (uint32_t j = 0; j < f->nreturns; j++)
      lf->outputs[i].binding += strcmp(f->returns[j].name, f->returns[i].name) < 0;
    lf->dynamic |= type_dynamic(t);
  }
}

static void info_from_manifest(Arena *a, OrionTensorInfo *ti, const PkgTensor *t) {
  *ti = (OrionTensorInfo){
      .name = arena_strdup(a, t->name),
      .mil_name = arena_strdup(a, t->mil_name),
      .dtype = t->dtype, /* the manifest's dtypes are MIL's */
      .rank = t->rank,
      .binding = t->binding,
      .bytes = t->bytes,
      .surface_bytes = t->surface_bytes,
  };
  for (uint32_t i = 0; i < t->rank && i < MIL_MAX_RANK; i++) ti->dims[i] = t->dims[i];
}

/* Reports a manifest entry whose MIL counterpart has another type. */
static void check_type(Loader *L, const char *what, const OrionTensorInfo *ti, const MilType *t, SrcSpan at) {
  StrBuf want, got;
  sb_init(&want);
  sb_init(&got);
  print_tensor(&want, ti->dtype, ti->rank, ti->dims);
  if (t) print_mil_type(&got, t);
  else sb_puts(&got, "<unknown>");
  if (strcmp(want.data, got.data) != 0)
    lerr(L, at, "%s '%s' is %s in the manifest but %s in the MIL", what, ti->name, want.data, got.data);
  sb_free(&want);
  sb_free(&got);
}

/* Package: I/O from the manifest, checked against the MIL function both ways. */
static void io_from_manifest(Loader *L, LoadedFunc *lf, const PkgFunction *pf) {
  const MilFunc *f = lf->mil;
  Arena *a = &L->p->arena;
  lf->ninputs = pf->ninputs;
  lf->inputs = arena_alloc(a, (pf->ninputs + 1) * sizeof *lf->inputs);
  for (uint32_t i = 0; i < pf->ninputs; i++) {
    OrionTensorInfo *ti = &lf->inputs[i];
    info_from_manifest(a, ti, &pf->inputs[i]);
    const MilVar *v = NULL;
    for (uint32_t j = 0; j < f->nparams && !v; j++)
      if (strcmp(f->params[j].name, ti->mil_name) == 0) v = &f->params[j];
    if (!v) {
      lerr(L, f->loc, "input '%s' of the manifest (MIL name '%s') is not a parameter of function '%s'", ti->name,
           ti->mil_name, f->name);
      continue;
    }
    check_type(L, "input", ti, &v->type, v->loc);
    lf->dynamic |= type_dynamic(&v->type);
  }
  for (uint32_t j = 0; j < f->nparams; j++) {
    bool found = false;
    for (uint32_t i = 0; i < lf->ninputs && !found; i++) found = strcmp(lf->inputs[i].mil_name, f->params[j].name) == 0;
    if (!found) lerr(L, f->params[j].loc, "parameter '%s' is not an input in the manifest", f->params[j].name);
  }
  lf->noutputs = pf->noutputs;
  lf->outputs = arena_alloc(a, (pf->noutputs + 1) * sizeof *lf->outputs);
  for (uint32_t i = 0; i < pf->noutputs; i++) {
    OrionTensorInfo *ti = &lf->outputs[i];
    info_from_manifest(a, ti, &pf->outputs[i]);
    const MilOperand *r = NULL;
    for (uint32_t j = 0; j < f->nreturns && !r; j++)
      if (strcmp(f->returns[j].name, ti->mil_name) == 0) r = &f->returns[j];
    if (!r) {
      lerr(L, f->loc, "output '%s' of the manifest (MIL name '%s') is not returned by function '%s'", ti->name,
           ti->mil_name, f->name);
      continue;
    }
    const MilType *t = mil_operand_type(f, r);
    check_type(L, "output", ti, t, r->loc);
    lf->dynamic |= type_dynamic(t);
  }
  for (uint32_t j = 0; j < f->nreturns; j++) {
    bool found = false;
    for (uint32_t i = 0; i < lf->noutputs && !found; i++)
      found = strcmp(lf->outputs[i].mil_name, f->returns[j].name) == 0;
    if (!found) lerr(L, f->returns[j].loc, "returned value '%s' is not an output in the manifest", f->returns[j].name);
  }
}

/* ---- opening -------------------------------------------------------------------- */

static MilProgram *read_mil(Loader *L, const char *dir, const char *file) {
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/%s", dir, file);
  char why[4096 + 128], *text;
  size_t len;
  bool outside;
  /* Through the directory's descriptor, by the package rule (pkg_open_file), for packages and bare directories alike. */
  if (!pkg_read_file(&L->dir, file, MAX_SOURCE_BYTES, &text, &len, &outside, why, sizeof why)) {
    if (outside) lerr(L, (SrcSpan){0}, "%s: %s", path.data, why);
    else if (!strcmp(why, "file too large"))
      lerr(L, (SrcSpan){0}, "'%s' is too large (limit is %u bytes)", path.data, MAX_SOURCE_BYTES);
    else lerr(L, (SrcSpan){0}, "cannot read '%s': %s", path.data, why);
    sb_free(&path);
    return NULL;
  }
  MilProgram *mp = mil_read_string(path.data, text, len, L->d);
  free(text);
  sb_free(&path);
  if (!mp) {
    L->failed = true;
    return NULL;
  }
  OrionProgram *p = L->p;
  p->programs = xrealloc(p->programs, (p->nprograms + 1) * sizeof *p->programs);
  p->programs[p->nprograms++] = mp;
  return mp;
}

static void open_package(Loader *L, const char *path, const OrionOpenOptions *opt) {
  Package pkg;
  bool recovered = false;
  /* A weight update killed after it committed is completed first (see package_recover). */
  if (!package_recover(path, &recovered, L->d)) {
    L->failed = true;
    return;
  }
  if (recovered) diag_note(L->d, (SrcSpan){0}, "%s: completed an interrupted weight update", path);
  if (!package_read(path, &pkg, L->d)) {
    L->failed = true;
    return;
  }
  if (opt->verify_checksums && !package_verify(&pkg, L->d)) {
    L->failed = true;
    package_free(&pkg);
    return;
  }
  OrionProgram *p = L->p;
  p->is_package = true;
  p->generation = pkg.weights_generation;
  p->mil_xxh64 = arena_alloc(&p->arena, (pkg.nfunctions + 1) * sizeof *p->mil_xxh64);
  p->funcs = xcalloc(pkg.nfunctions + 1, sizeof *p->funcs);
  for (uint32_t i = 0; i < pkg.nfunctions; i++) {
    const PkgFunction *pf = &pkg.functions[i];
    MilProgram *mp = read_mil(L, path, pf->mil_file);
    if (!mp) continue;
    /* The compiler names every MIL function main, one file per function. */
    const MilFunc *f = mil_find_func(mp, "main");
    if (!f) {
      lerr(L, (SrcSpan){0}, "%s/%s: has no function 'main'", path, pf->mil_file);
      continue;
    }
    memcpy(p->mil_xxh64[p->nfuncs], pf->mil_xxh64, 17);
    LoadedFunc *lf = &p->funcs[p->nfuncs++];
    lf->name = arena_strdup(&p->arena, pf->name);
    lf->mil = f;
    io_from_manifest(L, lf, pf);
    load_weights(L, lf);
  }
  p->manifest = pkg; /* kept: reloads verify only what changed since */
}

static void open_bare(Loader *L, const char *path) {
  MilProgram *mp = read_mil(L, path, BARE_MIL);
  if (!mp) return;
  OrionProgram *p = L->p;
  p->funcs = xcalloc(mp->nfuncs + 1, sizeof *p->funcs);
  for (uint32_t i = 0; i < mp->nfuncs; i++) {
    LoadedFunc *lf = &p->funcs[p->nfuncs++];
    lf->name = mp->funcs[i].name;
    lf->mil = &mp->funcs[i];
    io_from_mil(L, lf);
    load_weights(L, lf);
  }
}

OrionProgram *orion_open(const char *path, const OrionOpenOptions *opt, Diag *d) {
  OrionOpenOptions defaults = ORION_OPEN_OPTIONS_DEFAULT;
  if (!opt) opt = &defaults;
  if (!d->sources) {
    /* The MIL reader registers sources there; without a set nothing can point at MIL lines. */
    diag_error(d, (SrcSpan){0}, "orion_open needs a Diag with a SourceSet");
    return NULL;
  }
  struct stat st;
  if (stat(path, &st) != 0) {
    diag_error(d, (SrcSpan){0}, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  if (!S_ISDIR(st.st_mode)) {
    diag_error(d, (SrcSpan){0}, "cannot open '%s': not a directory (a .anepkg package or a model directory)", path);
    return NULL;
  }
  /* A package without its manifest goes the package's way, where reading the
   * manifest refuses it: it cannot be verified (orion/pkg_paths.h). */
  PkgDirKind kind = pkg_dir_kind(path);
  bool is_package = kind == PKG_DIR_PACKAGE || kind == PKG_DIR_PACKAGE_NO_MANIFEST;
  if (kind == PKG_DIR_NONE) {
    diag_error(d, (SrcSpan){0}, "cannot open '%s': it holds neither %s (a package) nor %s (a model directory)", path,
               PACKAGE_MANIFEST, BARE_MIL);
    return NULL;
  }
  OrionProgram *p = xcalloc(1, sizeof *p);
  arena_init(&p->arena);
  p->path = xstrdup(path);
  p->writable = opt->writable_weights;
  p->root = realpath(path, NULL);
  if (!p->root) {
    diag_error(d, (SrcSpan){0}, "cannot open '%s': %s", path, strerror(errno));
    orion_close(p);
    return NULL;
  }
  Loader L = {.p = p, .d = d};
  const char *err;
  if (!pkg_dir_open(&L.dir, path, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot open '%s': %s", path, err);
    orion_close(p);
    return NULL;
  }
  if (is_package) open_package(&L, path, opt);
  else open_bare(&L, path);
  pkg_dir_close(&L.dir);
  if (L.failed) {
    orion_close(p);
    return NULL;
  }
  return p;
}

void orion_close(OrionProgram *p) {
  if (!p) return;
  for (uint32_t i = 0; i < p->nmaps; i++) {
    /* The mapping is read-only; munmap takes a non-const pointer. */
    if (p->maps[i].len) munmap((void *)(uintptr_t)p->maps[i].base, p->maps[i].len);
    if (p->maps[i].retired) munmap((void *)(uintptr_t)p->maps[i].retired, p->maps[i].len);
    free(p->maps[i].real);
    free(p->maps[i].rel);
  }
  free(p->maps);
  for (uint32_t i = 0; i < p->nfuncs; i++) free(p->funcs[i].weights);
  free(p->funcs);
  for (uint32_t i = 0; i < p->nprograms; i++) mil_program_free(p->programs[i]);
  free(p->programs);
  free(p->root);
  free(p->path);
  package_free(&p->manifest);
  package_free(&p->retired_manifest);
  arena_free(&p->arena);
  free(p);
}

/* ---- accessors ------------------------------------------------------------------ */

static const LoadedFunc *func_at(const OrionProgram *p, uint32_t fn) {
  if (fn >= p->nfuncs) ice("orion: function index %u out of range (%u functions)", fn, p->nfuncs);
  return &p->funcs[fn];
}

uint32_t orion_function_count(const OrionProgram *p) { return p->nfuncs; }
const char *orion_function_name(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->name; }
const MilFunc *orion_function_mil(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->mil; }
bool orion_function_has_dynamic_shapes(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->dynamic; }

const char *orion_program_path(const OrionProgram *p) { return p->path; }
const Package *orion_program_manifest(const OrionProgram *p) { return p->is_package ? &p->manifest : NULL; }

const MilProgram *orion_function_program(const OrionProgram *p, uint32_t fn) {
  const MilFunc *f = func_at(p, fn)->mil;
  for (uint32_t i = 0; i < p->nprograms; i++)
    for (uint32_t k = 0; k < p->programs[i]->nfuncs; k++)
      if (&p->programs[i]->funcs[k] == f) return p->programs[i];
  ice("orion: function %u has no MIL program", fn);
}

void *orion_weight_data_writable(OrionProgram *p, uint32_t fn, uint32_t i) {
  const LoadedFunc *lf = func_at(p, fn);
  /* The loader's own mapping: writable when the program was opened so. */
  return p->writable && i < lf->nweights ? (void *)(uintptr_t)lf->weights[i].data : NULL;
}

void orion_program_note_weight_written(OrionProgram *p, const void *data, size_t len) {
  const uint8_t *at = data;
  p->version++;
  for (uint32_t i = 0; i < p->nmaps; i++) {
    Mapping *m = &p->maps[i];
    if (at < m->base || at >= m->base + m->len) continue;
    size_t lo = (size_t)(at - m->base), hi = lo + len;
    if (m->dirty_lo == m->dirty_hi) m->dirty_lo = lo, m->dirty_hi = hi;
    if (lo < m->dirty_lo) m->dirty_lo = lo;
    if (hi > m->dirty_hi) m->dirty_hi = hi;
  }
  p->weights_written = true;
}

bool orion_program_write_back(OrionProgram *p, Diag *d) {
  PkgDir dir;
  const char *err;
  if (!pkg_dir_open(&dir, p->root, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot write the weights of '%s': %s", p->path, err);
    return false;
  }
  bool ok = true;
  for (uint32_t i = 0; ok && i < p->nmaps; i++) {
    Mapping *m = &p->maps[i];
    if (m->dirty_lo == m->dirty_hi) continue;
    bool outside;
    char why[4096 + 128];
    int fd = pkg_open_file(&dir, m->rel, O_WRONLY, &outside, why, sizeof why);
    const char *fail = fd < 0 ? why : NULL;
    for (size_t at = m->dirty_lo; !fail && at < m->dirty_hi;) {
      ssize_t w = pwrite(fd, m->base + at, m->dirty_hi - at, (off_t)at);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail = w < 0 ? strerror(errno) : "nothing written";
      else at += (size_t)w;
    }
    if (fd >= 0 && close(fd) != 0 && !fail) fail = strerror(errno);
    if (fail) {
      diag_error(d, (SrcSpan){0}, "cannot write the weights into '%s': %s", m->real, fail);
      ok = false;
    } else {
      m->dirty_lo = m->dirty_hi = 0;
    }
  }
  pkg_dir_close(&dir);
  return ok;
}
bool orion_program_weights_written(const OrionProgram *p) { return p->weights_written; }

void orion_program_weights_committed(OrionProgram *p, Package *manifest) {
  if (p->is_package) {
    package_free(&p->manifest);
    p->manifest = *manifest;
    p->generation = manifest->weights_generation;
    memset(manifest, 0, sizeof *manifest);
  }
  p->weights_written = false;
}

uint32_t orion_program_weight_file_count(const OrionProgram *p) { return p->nmaps; }

const uint8_t *orion_program_weight_file_at(const OrionProgram *p, uint32_t i, const char **relpath, size_t *len) {
  *relpath = p->maps[i].rel;
  *len = p->maps[i].len;
  return p->maps[i].base;
}

const uint8_t *orion_program_weight_file(const OrionProgram *p, const char *relpath, size_t *len) {
  StrBuf full;
  sb_init(&full);
  sb_printf(&full, "%s/%s", p->root, relpath);
  char *real = realpath(full.data, NULL);
  sb_free(&full);
  const uint8_t *data = NULL;
  for (uint32_t i = 0; real && i < p->nmaps && !data; i++)
    if (!strcmp(p->maps[i].real, real)) {
      data = p->maps[i].base;
      *len = p->maps[i].len;
    }
  free(real);
  return data;
}

uint32_t orion_function_find(const OrionProgram *p, const char *name) {
  for (uint32_t i = 0; i < p->nfuncs; i++)
    if (strcmp(p->funcs[i].name, name) == 0) return i;
  return UINT32_MAX;
}

uint32_t orion_input_count(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->ninputs; }
uint32_t orion_output_count(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->noutputs; }
uint32_t orion_weight_count(const OrionProgram *p, uint32_t fn) { return func_at(p, fn)->nweights; }

const OrionTensorInfo *orion_input(const OrionProgram *p, uint32_t fn, uint32_t i) {
  const LoadedFunc *lf = func_at(p, fn);
  return i < lf->ninputs ? &lf->inputs[i] : NULL;
}

const OrionTensorInfo *orion_output(const OrionProgram *p, uint32_t fn, uint32_t i) {
  const LoadedFunc *lf = func_at(p, fn);
  return i < lf->noutputs ? &lf->outputs[i] : NULL;
}

const OrionWeight *orion_weight(const OrionProgram *p, uint32_t fn, uint32_t i) {
  const LoadedFunc *lf = func_at(p, fn);
  return i < lf->nweights ? &lf->weights[i] : NULL;
}

/* ---- reloading weights ------------------------------------------------------------ */

uint64_t orion_weights_generation(const OrionProgram *p) { return p->generation; }
uint64_t orion_weights_version(const OrionProgram *p) { return p->version; }

/* Maps one weight file again into m->fresh, without changing anything the
 * program uses yet; the layout must be the one loaded (a patch keeps every
 * record and offset). */
static bool map_again(OrionProgram *p, const PkgDir *dir, Mapping *m, Diag *d) {
  bool outside;
  char why[4096 + 128];
  int fd = pkg_open_file(dir, m->rel, O_RDONLY, &outside, why, sizeof why);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (outside) diag_error(d, (SrcSpan){0}, "%s/%s: %s", p->path, m->rel, why);
    else diag_error(d, (SrcSpan){0}, "cannot reload '%s': %s", m->real, fd < 0 ? why : strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  if ((size_t)st.st_size != m->len || m->len == 0) {
    close(fd);
    diag_error(d, (SrcSpan){0}, "cannot reload '%s': its size changed from %zu to %lld bytes (recompiled? open it again)",
               m->real, m->len, (long long)st.st_size);
    return false;
  }
  void *addr = map_weights(p, fd, m->len);
  close(fd);
  if (addr == MAP_FAILED) {
    diag_error(d, (SrcSpan){0}, "cannot reload '%s': %s", m->real, strerror(errno));
    return false;
  }
  const uint8_t *base = addr;
  bool same_layout = memcmp(base, m->base, BLOB_HEADER_SIZE) == 0;
  for (uint32_t f = 0; same_layout && f < p->nfuncs; f++)
    for (uint32_t i = 0; same_layout && i < p->funcs[f].nweights; i++) {
      const OrionWeight *w = &p->funcs[f].weights[i];
      const uint8_t *data = w->data;
      if (data < m->base || data >= m->base + m->len) continue; /* another file's */
      size_t rec = (size_t)(data - m->base) - BLOB_METADATA_SIZE;
      same_layout = memcmp(base + rec, m->base + rec, BLOB_METADATA_SIZE) == 0;
    }
  if (!same_layout) {
    munmap(addr, m->len);
    diag_error(d, (SrcSpan){0}, "cannot reload '%s': its blob layout changed (recompiled? open it again)", m->real);
    return false;
  }
  m->fresh = base;
  return true;
}

/* Moves every weight pointer of mapping m from one base to another. */
static void move_weights(OrionProgram *p, const uint8_t *from, const uint8_t *to, size_t len) {
  p->version++; /* every OrionWeight pointing into [from, from + len) now reads other bytes */
  for (uint32_t f = 0; f < p->nfuncs; f++)
    for (uint32_t i = 0; i < p->funcs[f].nweights; i++) {
      OrionWeight *w = &p->funcs[f].weights[i];
      const uint8_t *data = w->data;
      if (data >= from && data < from + len) w->data = to + (data - from);
    }
}

void orion_release_retired_weights(OrionProgram *p) {
  for (uint32_t i = 0; i < p->nmaps; i++) {
    Mapping *m = &p->maps[i];
    if (m->retired) munmap((void *)(uintptr_t)m->retired, m->len);
    m->retired = NULL;
  }
  if (p->has_retired) package_free(&p->retired_manifest);
  p->has_retired = false;
}

bool orion_reload_weights_undo(OrionProgram *p) {
  if (!p->has_retired) return false;
  for (uint32_t i = 0; i < p->nmaps; i++) {
    Mapping *m = &p->maps[i];
    if (!m->retired) continue;
    move_weights(p, m->base, m->retired, m->len);
    munmap((void *)(uintptr_t)m->base, m->len);
    m->base = m->retired;
    m->bf.data = m->base;
    m->retired = NULL;
  }
  if (p->is_package) {
    package_free(&p->manifest);
    p->manifest = p->retired_manifest;
    memset(&p->retired_manifest, 0, sizeof p->retired_manifest);
    p->generation = p->retired_generation;
  }
  p->has_retired = false;
  return true;
}

bool orion_reload_weights(OrionProgram *p, const OrionOpenOptions *opt, bool *changed, Diag *d) {
  OrionOpenOptions defaults = ORION_OPEN_OPTIONS_DEFAULT;
  if (!opt) opt = &defaults;
  if (changed) *changed = false;
  switch (opt->reload) {
  case ORION_RELOAD_AUTO:
  case ORION_RELOAD_REMAP: break;
  case ORION_RELOAD_INPUTS: return true; /* nothing is baked in: the caller binds the new weights */
  case ORION_RELOAD_RELOAD_FILES:
  case ORION_RELOAD_RECOMPILE:
  case ORION_RELOAD_PATCH_DATA:
    diag_error(d, (SrcSpan){0}, "reloading weights by %s needs the ANE backend, which runs only on macOS; the CPU "
               "backend remaps (ORION_RELOAD_REMAP)", opt->reload == ORION_RELOAD_RECOMPILE ? "recompiling" :
               opt->reload == ORION_RELOAD_PATCH_DATA ? "patching the compiled program's data" :
               "loading the compiled program again");
    return false;
  }
  Package pkg = {0};
  if (p->is_package) {
    bool recovered;
    if (!package_recover(p->root, &recovered, d) || !package_read(p->root, &pkg, d)) return false;
    if (pkg.weights_generation == p->generation) {
      package_free(&pkg);
      return true;
    }
    bool ok = pkg.nfunctions == p->nfuncs;
    for (uint32_t i = 0; ok && i < pkg.nfunctions; i++) ok = !strcmp(pkg.functions[i].mil_xxh64, p->mil_xxh64[i]);
    if (!ok) {
      diag_error(d, (SrcSpan){0}, "cannot reload '%s': its MIL changed, not only its weights (recompiled? open it again)",
                 p->root);
      package_free(&pkg);
      return false;
    }
    if (opt->verify_checksums && !package_verify_since(&pkg, &p->manifest, d)) {
      package_free(&pkg);
      return false;
    }
  }
  /* Every file is mapped and checked before anything changes, so a failure
   * leaves the program as it was. */
  PkgDir dir;
  const char *err;
  bool ok = pkg_dir_open(&dir, p->root, &err);
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot reload '%s': %s", p->root, err);
  for (uint32_t i = 0; ok && i < p->nmaps; i++) ok = map_again(p, &dir, &p->maps[i], d);
  if (dir.path) pkg_dir_close(&dir);
  if (!ok) {
    for (uint32_t i = 0; i < p->nmaps; i++)
      if (p->maps[i].fresh) munmap((void *)(uintptr_t)p->maps[i].fresh, p->maps[i].len), p->maps[i].fresh = NULL;
    package_free(&pkg);
    return false;
  }
  orion_release_retired_weights(p);
  for (uint32_t i = 0; i < p->nmaps; i++) {
    Mapping *m = &p->maps[i];
    move_weights(p, m->base, m->fresh, m->len);
    m->retired = m->base;
    m->base = m->fresh;
    m->bf.data = m->base;
    m->fresh = NULL;
  }
  p->has_retired = true;
  p->retired_generation = p->generation;
  if (p->is_package) {
    p->generation = pkg.weights_generation;
    p->retired_manifest = p->manifest;
    p->manifest = pkg;
    memset(&pkg, 0, sizeof pkg);
  }
  if (changed) *changed = true;
  return true;
}

static void size_bare_surfaces(OrionTensorInfo *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (t[i].surface_bytes) continue;
    uint64_t elements = 1;
    for (uint32_t k = 0; k < t[i].rank; k++) elements *= t[i].dims[k] > 0 ? (uint64_t)t[i].dims[k] : 1;
    t[i].surface_bytes = elements * 2;
  }
}

void orion_program_size_bare_surfaces(OrionProgram *p) {
  if (p->is_package) return;
  for (uint32_t fn = 0; fn < p->nfuncs; fn++) {
    size_bare_surfaces(p->funcs[fn].inputs, p->funcs[fn].ninputs);
    size_bare_surfaces(p->funcs[fn].outputs, p->funcs[fn].noutputs);
  }
}
