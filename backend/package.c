/*
 * The .anepkg writer: MIL per function, one shared weight file, and the
 * manifest (XML property list via libxml2), written into a temporary
 * directory beside the target and renamed into place, so that a failed or
 * interrupted compile never leaves half a package and an existing package is
 * replaced only by a complete one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orion/package.h"
#include "orion/hash.h"
#include "orion/temporaries.h"
#include "weight_stream.h"

/* libxml2 strings without BAD_CAST, which casts const away. */
#define XS(s) ((const xmlChar *)(s))

static const TargetInfo targets[] = {
    /* The minimum IOSurface size reported for the ANE (about 48 KiB, e.g.
     * 16 tokens of 768 fp16 channels); the constraint table will own this. */
    {MIL_IOS16, 49152},
    {MIL_IOS17, 49152},
    {MIL_IOS18, 49152},
};

const TargetInfo *target_info(MilTarget t) { return &targets[t]; }

/* The chip's minimum when the driver passed one (orionc --chip), else the target's. */
static uint64_t min_surface_of(const PackageOptions *opt) {
  return opt->min_surface_bytes ? opt->min_surface_bytes : target_info(opt->target)->min_surface_bytes;
}

/* ---- emission ---- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct LoadCtx {
  const WeightLoadOptions *opt;
  Diag *d;
  double ms;            /* time spent producing weight bytes */
  WeightStream *stream; /* set when weights go straight into the file */
  const char *path;     /* the package, for messages */
  /* The weight being generated into the stream: where its data starts and
   * the checksum of its bytes so far (XXH3-64, format 2's), taken before
   * they are handed on; one state, reset for each weight. */
  size_t data_start, hashed;
  XXH3_state_t *hash;
} LoadCtx;

/* add_param streams format 2's weight checksum itself. */
_Static_assert(PACKAGE_FORMAT_VERSION == 2, "add_param's streamed checksum is XXH3-64, format 2's");

static void *load_param(void *ctx, IrModule *m, IrValueId v, size_t *nbytes) {
  LoadCtx *c = ctx;
  double t0 = now_ms();
  void *p = weights_materialize(m, v, c->opt, c->d, nbytes);
  c->ms += now_ms() - t0;
  return p;
}

/* Bytes [data_start, data_start + done) of the weight being generated are
 * done: hash them while they are hot, then let the writer have them. */
static void param_progress(void *ctx, size_t done) {
  LoadCtx *c = ctx;
  size_t end = c->data_start + done;
  XXH3_64bits_update(c->hash, weight_stream_base(c->stream) + c->hashed, end - c->hashed);
  c->hashed = end;
  weight_stream_tentative(c->stream, c->data_start, end);
}

/* The generator will write the weight's bytes below `end` (any thread). */
static void param_claim(void *ctx, size_t end) {
  LoadCtx *c = ctx;
  weight_stream_claim(c->stream, c->data_start + end);
}

/* Materializes a param where its blob goes in the streamed file (no copy),
 * then lays out its record; a duplicate (the same weight, stored already)
 * has its bytes simply overwritten by the next blob. */
static bool add_param(void *ctx, IrModule *m, IrValueId v, BlobWriter *blobs, BlobDType dtype, uint64_t *offset,
                      size_t *nbytes) {
  LoadCtx *c = ctx;
  double t0 = now_ms();
  const IrType *t = &ir_value(m, v)->type;
  size_t size = (size_t)(ir_type_elements(t) * ir_dtype_size(t->dtype));
  int err = weight_stream_error(c->stream);
  if (err) { /* the disk refused earlier bytes: stop making more */
    diag_error(c->d, (SrcSpan){0}, "cannot write the package '%s': %s", c->path, strerror(err));
    return false;
  }
  uint8_t *dst = blob_writer_stage(blobs, size), *base = weight_stream_base(c->stream);
  c->data_start = c->hashed = (size_t)(dst - base);
  XXH3_64bits_reset(c->hash);
  WeightLoadOptions o = *c->opt;
  o.progress = param_progress;
  o.claim = param_claim;
  o.progress_ctx = c;
  bool ok = weights_materialize_into(m, v, &o, c->d, dst, size);
  if (ok) {
    XXH3_64bits_update(c->hash, base + c->hashed, c->data_start + size - c->hashed);
    *offset = blob_writer_add_as(blobs, weights_identity(m, v), dtype, dst, size, XXH3_64bits_digest(c->hash));
    *nbytes = size;
  }
  if (ok && *offset + BLOB_METADATA_SIZE == c->data_start) weight_stream_final(c->stream, blobs->len);
  else weight_stream_rollback(c->stream); /* a duplicate (or a failure): its bytes are not the file's */
  c->ms += now_ms() - t0;
  if (ok) test_pause_at("package-weights"); /* a weight handed to the writer, the next not yet made */
  return ok;
}

typedef struct Emitted {
  StrBuf *texts;     /* per emitted function */
  MilFunction *info; /* per emitted function */
  uint32_t n;
  BlobWriter blobs;
  WeightStream *stream; /* where blobs go, when streamed */
} Emitted;

static void emitted_free(Emitted *e) {
  for (uint32_t i = 0; i < e->n; i++) sb_free(&e->texts[i]);
  free(e->texts);
  free(e->info);
  blob_writer_free(&e->blobs);
}

static bool stream_same_data(void *ctx, uint64_t data_offset, const void *bytes, size_t nbytes) {
  return weight_stream_same(ctx, data_offset, bytes, nbytes);
}

/* The blob writer is about to add a blob ending at `end`: everything before
 * it is final (so constants, which are added without add_param, are written
 * as they come too), and its bytes are claimed. */
static void stream_claim(void *ctx, uint64_t end) {
  const Emitted *e = ctx;
  weight_stream_final(e->stream, e->blobs.len);
  weight_stream_claim(e->stream, (size_t)end);
}

/* An upper bound on the weight file's size: every param and const of every
 * live function as a blob (only larger float consts become blobs). */
static uint64_t weight_file_bound(IrModule *m) {
  uint64_t total = BLOB_HEADER_SIZE;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (uint32_t i = 0; i < m->funcs[f].ndecls; i++) {
      const IrType *t = &ir_value(m, m->funcs[f].decls[i])->type;
      total = ((total + 63) & ~(uint64_t)63) + BLOB_METADATA_SIZE + ir_type_elements(t) * ir_dtype_size(t->dtype);
    }
  }
  return total;
}

/* Emits every live function; weights go into `stream` when it is set,
 * else into memory. */
static bool emit_all(IrModule *m, const PackageOptions *opt, Emitted *e, WeightStream *stream, const char *path,
                     Diag *d) {
  memset(e, 0, sizeof *e);
  if (stream) {
    blob_writer_init_fixed(&e->blobs, weight_stream_base(stream), (size_t)weight_file_bound(m));
    e->blobs.same_data = stream_same_data;
    e->blobs.same_ctx = stream;
    e->stream = stream;
    e->blobs.claim = stream_claim;
    e->blobs.claim_ctx = e;
  } else {
    blob_writer_init(&e->blobs);
    uint64_t bound = weight_file_bound(m);
    if (bound > SIZE_MAX || !blob_writer_try_reserve(&e->blobs, (size_t)bound)) { /* no growing copies */
      diag_error(d, (SrcSpan){0}, "the weights and constants (up to %llu bytes) do not fit in memory",
                 (unsigned long long)bound);
      return false;
    }
  }
  e->blobs.keep_duplicates = opt->keep_duplicate_weights;
  e->texts = xcalloc(m->nfuncs, sizeof *e->texts);
  e->info = xcalloc(m->nfuncs, sizeof *e->info);
  LoadCtx ctx = {.opt = &opt->weights, .d = d, .stream = stream, .path = path, .hash = stream ? xxh3_state_new() : NULL};
  double blob_ms = 0;
  MilEmitOptions mo = {.target = opt->target, .load_param = load_param, .add_param = stream ? add_param : NULL,
                       .load_ctx = &ctx, .blob_ms = &blob_ms,
                       .min_surface_bytes = min_surface_of(opt)};
  bool ok = true;
  double t0 = now_ms();
  for (IrFuncId f = 1; f < m->nfuncs && ok; f++) {
    if (m->funcs[f].dead) continue;
    sb_init(&e->texts[e->n]);
    ok = mil_emit_program(m, f, &mo, &e->blobs, &e->texts[e->n], &e->info[e->n], d);
    e->n++;
  }
  if (ctx.hash) XXH3_freeState(ctx.hash);
  if (opt->stats) {
    opt->stats->weights_ms = ctx.ms + blob_ms;
    opt->stats->mil_ms = now_ms() - t0 - ctx.ms - blob_ms;
    opt->stats->weight_bytes = e->blobs.len;
  }
  return ok && !diag_has_errors(d);
}

bool package_emit_mil(IrModule *m, const PackageOptions *opt, StrBuf *out, Diag *d) {
  Emitted e;
  bool ok = emit_all(m, opt, &e, NULL, NULL, d);
  for (uint32_t i = 0; ok && i < e.n; i++) {
    if (e.n > 1) sb_printf(out, "%s// function %s\n", i ? "\n" : "", e.info[i].name);
    sb_putn(out, e.texts[i].data, e.texts[i].len);
  }
  emitted_free(&e);
  return ok;
}

/* ---- manifest ---- */

static xmlNodePtr add_key(xmlNodePtr dict, const char *key) {
  return xmlNewChild(dict, NULL, XS("key"), XS(key));
}

static void add_string(xmlNodePtr dict, const char *key, const char *v) {
  add_key(dict, key);
  xmlNodePtr n = xmlNewChild(dict, NULL, XS("string"), NULL);
  xmlNodeAddContent(n, XS(v)); /* escaped by libxml2 */
}

static void add_int(xmlNodePtr dict, const char *key, uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  add_key(dict, key);
  xmlNewChild(dict, NULL, XS("integer"), XS(buf));
}

static void add_bool(xmlNodePtr dict, const char *key, bool v) {
  add_key(dict, key);
  xmlNewChild(dict, NULL, XS(v ? "true" : "false"), NULL);
}

static void add_shape(xmlNodePtr dict, const IrType *t) {
  add_key(dict, "Shape");
  xmlNodePtr arr = xmlNewChild(dict, NULL, XS("array"), NULL);
  for (int i = 0; i < t->rank; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)t->dims[i]);
    xmlNewChild(arr, NULL, XS("integer"), XS(buf));
  }
}

static void add_bindings(xmlNodePtr dict, const char *key, const MilBinding *b, uint32_t n, uint64_t surface) {
  add_key(dict, key);
  xmlNodePtr arr = xmlNewChild(dict, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < n; i++) {
    xmlNodePtr t = xmlNewChild(arr, NULL, XS("dict"), NULL);
    add_string(t, "Name", b[i].ir_name);
    add_string(t, "MILName", b[i].mil_name);
    add_string(t, "DType", ir_dtype_name(b[i].type.dtype));
    add_shape(t, &b[i].type);
    add_int(t, "Binding", b[i].binding);
    add_int(t, "Bytes", b[i].bytes);
    add_int(t, "SurfaceBytes", surface);
  }
}

static const char *mil_file_name(IrModule *m, const Emitted *e, uint32_t i) {
  return e->n == 1 ? "model.mil" : arena_printf(&m->arena, "model_%s.mil", e->info[i].name);
}

static void add_training(xmlNodePtr root, const PkgTraining *t, const Emitted *e) {
  uint64_t saved = 0;
  for (uint32_t f = 0; f < e->n; f++) {
    if (strcmp(e->info[f].name, t->forward)) continue;
    const MilFunction *fn = &e->info[f];
    for (uint32_t o = 0; o < fn->noutputs; o++) {
      /* An output split into a group counts by the group's name, which the contract names. */
      const char *name = fn->outputs[o].ir_name;
      for (uint32_t g = 0; g < fn->ngroups; g++)
        if (o >= fn->groups[g].first && o < fn->groups[g].first + fn->groups[g].nparts) name = fn->groups[g].name;
      bool read = false;
      for (uint32_t i = 0; i < t->ninputs && !read; i++)
        read = t->inputs[i].from == PKG_TRAIN_FROM_OUTPUT && !strcmp(t->inputs[i].name, name);
      if (read) saved += fn->outputs[o].bytes;
    }
  }
  add_key(root, "Training");
  xmlNodePtr td = xmlNewChild(root, NULL, XS("dict"), NULL);
  add_string(td, "Forward", t->forward);
  add_string(td, "Backward", t->backward);
  add_string(td, "Loss", t->loss);
  if (t->vocabulary) add_int(td, "Vocabulary", t->vocabulary);
  add_int(td, "SavedBytes", saved);
  add_key(td, "BackwardInputs");
  xmlNodePtr ins = xmlNewChild(td, NULL, XS("array"), NULL);
  static const char *const from[] = {"output", "input", "loss_scale"};
  for (uint32_t i = 0; i < t->ninputs; i++) {
    xmlNodePtr d = xmlNewChild(ins, NULL, XS("dict"), NULL);
    add_string(d, "Input", t->inputs[i].input);
    add_string(d, "From", from[t->inputs[i].from]);
    if (t->inputs[i].from != PKG_TRAIN_FROM_LOSS_SCALE) add_string(d, "Name", t->inputs[i].name);
  }
  add_key(td, "Gradients");
  xmlNodePtr gs = xmlNewChild(td, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < t->ngradients; i++) {
    xmlNodePtr d = xmlNewChild(gs, NULL, XS("dict"), NULL);
    add_string(d, "Output", t->gradients[i].output);
    add_string(d, t->gradients[i].input ? "Input" : "Param", t->gradients[i].param);
  }
  if (t->nrows) add_key(td, "RowGradients"); /* only when there are any: other manifests stay as they were */
  xmlNodePtr rs = t->nrows ? xmlNewChild(td, NULL, XS("array"), NULL) : NULL;
  for (uint32_t i = 0; i < t->nrows; i++) {
    xmlNodePtr d = xmlNewChild(rs, NULL, XS("dict"), NULL);
    add_string(d, "Output", t->rows[i].output);
    add_string(d, "Param", t->rows[i].param);
    add_string(d, "Indices", t->rows[i].indices);
  }
  add_key(td, "TrainableParams");
  xmlNodePtr ps = xmlNewChild(td, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < t->nparams; i++) xmlNewTextChild(ps, NULL, XS("string"), XS(t->params[i]));
  if (!t->nadapters) return; /* only LoRA training packages have the key */
  add_key(td, "Adapters");
  xmlNodePtr as = xmlNewChild(td, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < t->nadapters; i++) {
    xmlNodePtr d = xmlNewChild(as, NULL, XS("dict"), NULL);
    add_string(d, "Module", t->adapters[i].module);
    add_int(d, "Rank", t->adapters[i].rank);
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", t->adapters[i].alpha); /* round-trips the double */
    add_key(d, "Alpha");
    xmlNewChild(d, NULL, XS("real"), XS(buf));
  }
}

static char *build_manifest(IrModule *m, const PackageOptions *opt, const Emitted *e, size_t *len) {
  xmlDocPtr doc = xmlNewDoc(XS("1.0"));
  xmlCreateIntSubset(doc, XS("plist"), XS("-//Apple//DTD PLIST 1.0//EN"),
                     XS("http://www.apple.com/DTDs/PropertyList-1.0.dtd"));
  xmlNodePtr plist = xmlNewNode(NULL, XS("plist"));
  xmlNewProp(plist, XS("version"), XS("1.0"));
  xmlDocSetRootElement(doc, plist);
  xmlNodePtr root = xmlNewChild(plist, NULL, XS("dict"), NULL);
  char hex[65];
  add_int(root, "FormatVersion", PACKAGE_FORMAT_VERSION);
  add_string(root, "CompilerVersion", "orionc " ORION_VERSION);
  add_string(root, "Target", mil_target_name(opt->target));
  if (opt->chip) add_string(root, "Chip", opt->chip); /* only with --chip, so other manifests stay as they were */
  add_string(root, "ProgramVersion", mil_program_version(opt->target));
  add_string(root, "Source", opt->source_name ? opt->source_name : "");
  sha256_hex(opt->source_text ? opt->source_text : "", opt->source_len, hex);
  add_string(root, "SourceSHA256", hex);
  add_string(root, "WeightsFile", PACKAGE_WEIGHTS);
  char xx[17];
  /* Everything but the blobs' data, which the weights' own checksums cover
   * (from the writer's records: streamed bytes are no longer in memory). */
  hash64_hex(blob_writer_layout_xxh64(&e->blobs), xx);
  add_string(root, "WeightsLayoutXXH64", xx);
  add_int(root, "WeightsSize", e->blobs.len);
  add_int(root, "WeightsGeneration", 0);
  uint64_t min_surface = min_surface_of(opt);
  add_int(root, "MinimumSurfaceBytes", min_surface);
  add_key(root, "Functions");
  xmlNodePtr funcs = xmlNewChild(root, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < e->n; i++) {
    const MilFunction *fn = &e->info[i];
    xmlNodePtr fd = xmlNewChild(funcs, NULL, XS("dict"), NULL);
    add_string(fd, "Name", fn->name);
    add_string(fd, "MILFile", mil_file_name(m, e, i));
    xxh64_hex(e->texts[i].data, e->texts[i].len, xx);
    add_string(fd, "MILXXH64", xx);
    /* Names, binding order and sizes are io-legalize's binding table, as the emitter used it. */
    add_int(fd, "SurfaceBytes", fn->surface_bytes);
    add_bindings(fd, "Inputs", fn->inputs, fn->ninputs, fn->surface_bytes);
    add_bindings(fd, "Outputs", fn->outputs, fn->noutputs, fn->surface_bytes);
    if (fn->ngroups) {
      /* Outputs the compiler split (the ANE has no concat): the caller concatenates the parts. */
      add_key(fd, "OutputGroups");
      xmlNodePtr gs = xmlNewChild(fd, NULL, XS("array"), NULL);
      for (uint32_t g = 0; g < fn->ngroups; g++) {
        const IrOutputGroup *gr = &fn->groups[g];
        xmlNodePtr gd = xmlNewChild(gs, NULL, XS("dict"), NULL);
        add_string(gd, "Name", gr->name);
        add_int(gd, "Axis", (uint64_t)gr->axis);
        add_string(gd, "DType", ir_dtype_name(gr->type.dtype));
        add_shape(gd, &gr->type);
        add_key(gd, "Parts");
        xmlNodePtr parts = xmlNewChild(gd, NULL, XS("array"), NULL);
        for (uint32_t k = 0; k < gr->nparts; k++) {
          xmlNodePtr n = xmlNewChild(parts, NULL, XS("string"), NULL);
          xmlNodeAddContent(n, XS(fn->outputs[gr->first + k].ir_name));
        }
      }
    }
    add_key(fd, "Weights");
    xmlNodePtr ws = xmlNewChild(fd, NULL, XS("array"), NULL);
    for (uint32_t k = 0; k < fn->nweights; k++) {
      const MilWeight *w = &fn->weights[k];
      xmlNodePtr wd = xmlNewChild(ws, NULL, XS("dict"), NULL);
      add_string(wd, "Name", w->ir_name);
      add_string(wd, "MILName", w->mil_name);
      add_string(wd, "DType", ir_dtype_name(w->type.dtype));
      add_shape(wd, &w->type);
      add_int(wd, "Offset", w->offset);
      add_int(wd, "Bytes", w->nbytes);
      uint64_t h;
      if (!blob_writer_data_hash(&e->blobs, w->offset, &h)) ice("weight '%s' has no record in the weight file", w->ir_name);
      hash64_hex(h, xx);
      add_string(wd, package_weight_checksum_key(PACKAGE_FORMAT_VERSION), xx);
    }
  }
  add_key(root, "CompileArguments");
  xmlNodePtr args = xmlNewChild(root, NULL, XS("array"), NULL);
  for (uint32_t i = 0; i < opt->ncompile_args; i++) xmlNewTextChild(args, NULL, XS("string"), XS(opt->compile_args[i]));
  add_key(root, "Lint");
  xmlNodePtr lint = xmlNewChild(root, NULL, XS("dict"), NULL);
  add_bool(lint, "Checked", opt->lint_checked);
  add_int(lint, "Errors", opt->lint_errors);
  add_int(lint, "Warnings", opt->lint_warnings);
  if (opt->training) add_training(root, opt->training, e);
  xmlChar *buf = NULL;
  int n = 0;
  xmlDocDumpFormatMemoryEnc(doc, &buf, &n, "UTF-8", 1);
  xmlFreeDoc(doc);
  char *text = xmalloc((size_t)n + 1);
  memcpy(text, buf, (size_t)n);
  text[n] = 0;
  xmlFree(buf);
  *len = (size_t)n;
  return text;
}

/* ---- files ---- */

static bool sync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return false;
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

/* What may be replaced: nothing there, or a directory holding a manifest. */
bool package_check_target(const char *path, bool *exists, Diag *d) {
  struct stat st;
  *exists = false;
  if (lstat(path, &st) != 0) return true;
  *exists = true;
  if (!S_ISDIR(st.st_mode)) {
    diag_error(d, (SrcSpan){0}, "cannot write the package '%s': a file of that name exists", path);
    return false;
  }
  size_t n = strlen(path) + sizeof "/" PACKAGE_MANIFEST;
  char *mp = xmalloc(n);
  snprintf(mp, n, "%s/%s", path, PACKAGE_MANIFEST);
  bool is_pkg = access(mp, F_OK) == 0;
  free(mp);
  if (!is_pkg) {
    diag_error(d, (SrcSpan){0}, "refusing to replace '%s': it is a directory but not an orion package", path);
    return false;
  }
  return true;
}

bool package_install(const char *tmp, const char *path, bool exists, const char **err) {
  size_t n = strlen(tmp) + sizeof "/weights";
  char *sub = xmalloc(n);
  snprintf(sub, n, "%s/weights", tmp);
  bool ok = chmod(tmp, 0755) == 0 && sync_dir(sub) && sync_dir(tmp);
  free(sub);
  /* An existing package is swapped atomically and ends up at tmp, for the caller to remove. */
  if (ok) ok = exists ? renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0 : rename(tmp, path) == 0;
  if (!ok) {
    *err = strerror(errno);
    return false;
  }
  /* The rename itself must reach the disk too. */
  char *parent = xstrdup(path), *slash = strrchr(parent, '/');
  if (slash) *(slash == parent ? slash + 1 : slash) = 0;
  sync_dir(slash ? parent : ".");
  free(parent);
  return true;
}

bool temp_dir_make(const TempDirHook *h, char *tmpl) {
  if (h && h->begin) h->begin(h->ctx);
  bool made = temp_make_dir(tmpl); /* with its marker (orion/temporaries.h) */
  int saved = errno;
  if (h && h->fn && (made || h->begin)) h->fn(h->ctx, made ? tmpl : NULL);
  errno = saved;
  return made;
}

bool package_write(IrModule *m, const char *path, const PackageOptions *opt, Diag *d) {
  bool exists;
  if (!package_check_target(path, &exists, d)) return false;
  size_t plen = strlen(path);
  char *tmp = xmalloc(plen + 32), *sub = xmalloc(plen + 64);
  snprintf(tmp, plen + 32, "%s.tmp-XXXXXX", path);
  const char *err = NULL;
  bool ok = false, emit_ran = false;
  char *manifest = NULL;
  Emitted e;
  WeightStream *stream = NULL;
  int fd = -1; /* the weight file when it is built in memory */
  if (!temp_dir_make(&opt->temp_dir, tmp)) {
    err = strerror(errno);
    goto out_nodir;
  }
  snprintf(sub, plen + 64, "%s/weights", tmp);
  if (mkdir(sub, 0755) != 0) {
    err = strerror(errno);
    goto out;
  }
  /* The weights are generated straight into the (temporary) weight file's
   * stream, which sends them to the disk while later weights are made. When
   * the address space for it cannot be had, the file is built in memory,
   * which then says whether it fits. */
  snprintf(sub, plen + 64, "%s/%s", tmp, PACKAGE_WEIGHTS);
  uint64_t bound = weight_file_bound(m);
  if (bound <= SIZE_MAX) stream = weight_stream_open(sub, (size_t)bound);
  if (!stream && bound <= SIZE_MAX && errno != ENOMEM) {
    err = strerror(errno);
    goto out;
  }
  if (!stream && (fd = open(sub, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
    err = strerror(errno);
    goto out;
  }
  emit_ran = true;
  if (!emit_all(m, opt, &e, stream, path, d)) goto out_quiet; /* the emitter reported why */
  size_t mlen;
  double t0 = now_ms();
  manifest = build_manifest(m, opt, &e, &mlen);
  double t1 = now_ms();
  if (opt->stats) opt->stats->manifest_ms = t1 - t0;
  if (opt->training) { /* the reader's own checks, before anything is put in place */
    Package check;
    if (!package_parse_manifest(manifest, mlen, "the training contract", &check, d)) goto out_quiet;
    package_free(&check);
  }
  if (stream ? !weight_stream_finish(stream, e.blobs.len)
             : !write_fd_all(fd, e.blobs.data, e.blobs.len) || fsync(fd) != 0) {
    err = strerror(errno);
    goto out;
  }
  for (uint32_t i = 0; i < e.n; i++) {
    char *mp = arena_printf(&m->arena, "%s/%s", tmp, mil_file_name(m, &e, i));
    if (!write_file_atomic(mp, e.texts[i].data, e.texts[i].len, &err)) goto out;
  }
  snprintf(sub, plen + 64, "%s/%s", tmp, PACKAGE_MANIFEST);
  if (!write_file_atomic(sub, manifest, mlen, &err)) goto out;
  test_pause_at("package-temp");
  if (!package_install(tmp, path, exists, &err)) goto out;
  ok = true;
  if (opt->stats) opt->stats->write_ms = now_ms() - t1;
out:
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot write the package '%s': %s", path, err ? err : "unknown error");
out_quiet:
  if (emit_ran) emitted_free(&e);
  weight_stream_close(stream);
  if (fd >= 0) close(fd);
  temp_remove(tmp); /* the temporary, or after a swap the old package */
  if (opt->temp_dir.fn) opt->temp_dir.fn(opt->temp_dir.ctx, NULL);
  free(tmp);
  free(sub);
  free(manifest);
  return ok;
out_nodir:
  diag_error(d, (SrcSpan){0}, "cannot write the package '%s': %s", path, err ? err : "unknown error");
  free(tmp);
  free(sub);
  return false;
}
