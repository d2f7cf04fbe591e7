/*
 * The .anepkg reader: Manifest.plist (libxml2, no network, no entities)
 * parsed into a Package with every field checked for presence, type and
 * range, and package_verify, which checks the files on disk against it:
 * MIL and weight-file checksums, and each weight's blob record.
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "orion/blob.h"
#include "orion/manifest.h"
#include "orion/mil_target.h"
#include "orion/pkg_paths.h"
#include "orion/hash.h"
#include "plist_util.h"

/* Size limits on what a manifest may describe. */
#define MAX_MANIFEST_BYTES (64u * 1024u * 1024u)
#define MAX_PKG_FUNCTIONS 1024u
#define MAX_PKG_TENSORS (1u << 20)

typedef struct Reader {
  const char *path; /* for messages */
  Diag *d;
  bool ok;
  bool where;       /* a file on disk: messages say PATH:LINE:COL: */
  const char *text; /* the manifest's text, for columns */
  size_t len;
  /* Where each line of the text starts, made when the first column is asked:
   * the training contract asks for one per entry, and a scan from the top
   * for each would be quadratic in a large manifest. */
  size_t *line_start;
  size_t nlines;
} Reader;

/* The column of element `at`'s start tag on line `line` of the text (libxml2
 * gives the line only), 0 when it is not found there. */
static uint32_t column_of(Reader *r, xmlNodePtr at, long line) {
  if (!r->line_start) {
    size_t n = 1;
    for (size_t i = 0; i < r->len; i++) n += r->text[i] == '\n';
    r->line_start = xmalloc(n * sizeof *r->line_start);
    r->line_start[0] = 0;
    r->nlines = 1;
    for (size_t i = 0; i < r->len; i++)
      if (r->text[i] == '\n') r->line_start[r->nlines++] = i + 1;
  }
  if (line < 1 || (size_t)line > r->nlines) return 0;
  size_t i = r->line_start[line - 1];
  size_t n = strlen((const char *)at->name);
  for (size_t c = i; c < r->len && r->text[c] != '\n'; c++) {
    if (r->text[c] != '<' || c + 1 + n >= r->len || memcmp(r->text + c + 1, at->name, n)) continue;
    char after = r->text[c + 1 + n];
    if (after == '>' || after == '/' || after == ' ' || after == '\t' || after == '\r') return (uint32_t)(c - i + 1);
  }
  return 0;
}

/* Where element `at` is, for the training contract's messages; 0, 0 when
 * the manifest is not a file. */
static PkgPos pos_of(Reader *r, xmlNodePtr at) {
  long line = at && r->where ? xmlGetLineNo(at) : -1;
  if (line <= 0 || line > (long)UINT32_MAX) return (PkgPos){0};
  return (PkgPos){(uint32_t)line, column_of(r, at, line)};
}

/* Reports the manifest's first problem, at element `at` (NULL: the whole
 * manifest): "PATH:LINE:COL: error: ..." for a file on disk. */
static void fail(Reader *r, xmlNodePtr at, const char *fmt, ...) ORION_PRINTF(3, 4);
static void fail(Reader *r, xmlNodePtr at, const char *fmt, ...) {
  if (!r->ok) return; /* the first problem explains the rest */
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  long line = at && r->where ? xmlGetLineNo(at) : -1;
  if (line > 0)
    diag_report_line(r->d, DIAG_ERROR, r->path, (uint32_t)line, column_of(r, at, line), "%s", sb.data);
  else
    diag_error(r->d, (SrcSpan){0}, "%s: %s", r->path, sb.data);
  sb_free(&sb);
  r->ok = false;
}


static xmlNodePtr need(Reader *r, xmlNodePtr dict, const char *key, const char *kind, const char *where) {
  xmlNodePtr v = dict ? plist_dict_get(dict, key) : NULL;
  if (!v) fail(r, dict, "manifest: %s has no '%s'", where, key);
  else if (!plist_is_elem(v, kind)) fail(r, v, "manifest: '%s' of %s must be <%s>", key, where, kind);
  else return v;
  return NULL;
}

/* The string under `key`; *at (may be NULL) its element, for messages about its value. */
static char *get_string_at(Reader *r, xmlNodePtr dict, const char *key, const char *where, xmlNodePtr *at) {
  xmlNodePtr v = need(r, dict, key, "string", where);
  if (at) *at = v;
  if (!v) return xstrdup("");
  xmlChar *t = xmlNodeGetContent(v);
  char *s = xstrdup(t ? (const char *)t : "");
  xmlFree(t);
  return s;
}

static char *get_string(Reader *r, xmlNodePtr dict, const char *key, const char *where) {
  return get_string_at(r, dict, key, where, NULL);
}

/* The integer under `key`; *at (may be NULL) its element. */
static uint64_t get_uint_at(Reader *r, xmlNodePtr dict, const char *key, const char *where, uint64_t max,
                            xmlNodePtr *at) {
  xmlNodePtr v = need(r, dict, key, "integer", where);
  if (at) *at = v;
  if (!v) return 0;
  xmlChar *t = xmlNodeGetContent(v);
  char *end = NULL;
  errno = 0;
  unsigned long long x = t && t[0] != '-' ? strtoull((const char *)t, &end, 10) : 0;
  bool bad = !t || !t[0] || t[0] == '-' || *end || errno;
  xmlFree(t);
  if (bad || x > max) {
    fail(r, v, "manifest: '%s' of %s must be an integer from 0 to %llu", key, where, (unsigned long long)max);
    return 0;
  }
  return x;
}

static uint64_t get_uint(Reader *r, xmlNodePtr dict, const char *key, const char *where, uint64_t max) {
  return get_uint_at(r, dict, key, where, max, NULL);
}

/* A checksum of `digits` lowercase hex digits (64 for SHA-256, 16 for XXH64 and XXH3-64). */
static void get_hash(Reader *r, xmlNodePtr dict, const char *key, const char *where, char *out, size_t digits) {
  xmlNodePtr at;
  char *s = get_string_at(r, dict, key, where, &at);
  bool ok = strlen(s) == digits && strspn(s, "0123456789abcdef") == digits;
  if (!ok) fail(r, at, "manifest: '%s' of %s must be %zu lowercase hex digits", key, where, digits);
  snprintf(out, digits + 1, "%s", ok ? s : "");
  free(s);
}

/* A name as messages show it: control characters as \xNN, so that a
 * hostile name cannot drive the terminal. */
static const char *shown(const char *name, char *buf, size_t size) {
  size_t o = 0;
  for (const unsigned char *c = (const unsigned char *)name; *c && o + 5 < size; c++)
    if (*c < 0x20 || *c == 0x7f) o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *c);
    else buf[o++] = (char)*c;
  buf[o] = '\0';
  return buf;
}

/* A name that orion-run writes as NAME.npy (an output, an output group). */
static void check_file_name(Reader *r, xmlNodePtr at, const char *what, const char *name, const char *fn) {
  char why[128], buf[256];
  if (r->ok && !pkg_name_ok(name, PKG_NAME_PLAIN, why, sizeof why))
    fail(r, at, "manifest: %s name '%s' of function '%s' %s (outputs are written as NAME.npy)", what,
         shown(name, buf, sizeof buf), fn, why);
}

/* The dtypes a package's tensors have (those of the IR, which wrote it). */
static OrionDType package_dtype(const char *name) {
  static const OrionDType held[] = {ORION_DT_FP16, ORION_DT_FP32, ORION_DT_INT32,
                                    ORION_DT_INT8, ORION_DT_UINT8, ORION_DT_BOOL};
  OrionDType t = orion_dtype_from_name(name, strlen(name));
  for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
    if (held[i] == t) return t;
  return ORION_DT_NONE;
}

uint64_t package_weight_checksum(uint32_t version, const void *data, size_t len) {
  return version < 2 ? XXH64(data, len, 0) : XXH3_64bits(data, len);
}

const char *package_weight_checksum_key(uint32_t version) { return version < 2 ? "XXH64" : "XXH3"; }

const char *package_weight_checksum_name(uint32_t version) { return version < 2 ? "xxh64" : "xxh3"; }

/* Where a tensor's values are, for messages found after it was read. */
typedef struct TensorAt {
  xmlNodePtr name, binding;
} TensorAt;

static void read_tensor(Reader *r, xmlNodePtr dict, PkgTensor *t, bool io, const char *where, uint32_t version,
                        TensorAt *at) {
  t->name = get_string_at(r, dict, "Name", where, &at->name);
  t->mil_name = get_string(r, dict, "MILName", where);
  xmlNodePtr dt_at;
  char *dt = get_string_at(r, dict, "DType", where, &dt_at);
  t->dtype = package_dtype(dt);
  if (t->dtype == ORION_DT_NONE && r->ok) fail(r, dt_at, "manifest: %s '%s' has the unknown dtype '%s'", where, t->name, dt);
  free(dt);
  xmlNodePtr shape = need(r, dict, "Shape", "array", where);
  uint64_t elements = 1;
  for (xmlNodePtr n = shape ? plist_next_elem(shape->children) : NULL; n && r->ok; n = plist_next_elem(n->next)) {
    if (t->rank >= ORION_MAX_RANK) {
      fail(r, n, "manifest: %s '%s' has rank above %d", where, t->name, ORION_MAX_RANK);
      break;
    }
    xmlChar *s = xmlNodeGetContent(n);
    char *end = NULL;
    long long v = plist_is_elem(n, "integer") && s ? strtoll((const char *)s, &end, 10) : -1;
    bool bad = v <= 0 || !end || *end;
    xmlFree(s);
    if (bad || __builtin_mul_overflow(elements, (uint64_t)v, &elements) || elements > ORION_MAX_ELEMENTS) {
      fail(r, n, "manifest: %s '%s' has an invalid shape", where, t->name);
      break;
    }
    t->dims[t->rank++] = v;
  }
  xmlNodePtr bytes_at;
  t->bytes = get_uint_at(r, dict, "Bytes", where, UINT64_MAX, &bytes_at);
  if (r->ok && t->bytes != elements * orion_dtype_size(t->dtype))
    fail(r, bytes_at, "manifest: %s '%s' has %llu bytes but its shape and dtype need %llu", where, t->name,
         (unsigned long long)t->bytes, (unsigned long long)(elements * orion_dtype_size(t->dtype)));
  if (io) {
    t->binding = (uint32_t)get_uint_at(r, dict, "Binding", where, MAX_PKG_TENSORS, &at->binding);
    t->surface_bytes = get_uint(r, dict, "SurfaceBytes", where, UINT64_MAX);
  } else {
    t->offset = get_uint(r, dict, "Offset", where, UINT64_MAX);
    get_hash(r, dict, package_weight_checksum_key(version), where, t->checksum, 16);
  }
}

/* The tensors under `key`; *at (may be NULL) where each one's values are. */
static PkgTensor *read_tensors(Reader *r, xmlNodePtr dict, const char *key, bool io, uint32_t version,
                                uint32_t *count, TensorAt **at) {
  xmlNodePtr arr = need(r, dict, key, "array", "a function");
  *count = 0;
  if (at) *at = NULL;
  if (!arr) return NULL;
  uint32_t n = 0;
  for (xmlNodePtr c = plist_next_elem(arr->children); c; c = plist_next_elem(c->next)) n++;
  if (n > MAX_PKG_TENSORS) {
    fail(r, arr, "manifest: too many %s (limit is %u)", key, MAX_PKG_TENSORS);
    return NULL;
  }
  PkgTensor *t = xcalloc(n ? n : 1, sizeof *t);
  TensorAt *where_at = xcalloc(n ? n : 1, sizeof *where_at);
  const char *where = !strcmp(key, "Inputs") ? "input" : !strcmp(key, "Outputs") ? "output" : "weight";
  for (xmlNodePtr c = plist_next_elem(arr->children); c && r->ok; c = plist_next_elem(c->next)) {
    if (!plist_is_elem(c, "dict")) {
      fail(r, c, "manifest: entries of '%s' must be <dict>", key);
    } else {
      read_tensor(r, c, &t[*count], io, where, version, &where_at[*count]);
      ++*count;
    }
  }
  if (io && r->ok) { /* bindings are a permutation */
    bool *seen = xcalloc(*count ? *count : 1, 1);
    for (uint32_t i = 0; i < *count && r->ok; i++) {
      if (t[i].binding >= *count || seen[t[i].binding])
        fail(r, where_at[i].binding, "manifest: the %s bindings are not 0..%u, each once", where, *count - 1);
      else seen[t[i].binding] = true;
    }
    free(seen);
  }
  if (at) *at = where_at;
  else free(where_at);
  return t;
}

/* Optional "OutputGroups": each part must name an output of the function.
 * *names_at: each group's Name element. */
static void read_groups(Reader *r, xmlNodePtr dict, PkgFunction *f, xmlNodePtr **names_at) {
  xmlNodePtr arr = plist_dict_get(dict, "OutputGroups");
  *names_at = NULL;
  if (!arr || !r->ok) return;
  if (!plist_is_elem(arr, "array")) {
    fail(r, arr, "manifest: 'OutputGroups' of a function must be <array>");
    return;
  }
  uint32_t n = 0;
  for (xmlNodePtr c = plist_next_elem(arr->children); c; c = plist_next_elem(c->next)) n++;
  if (n > f->noutputs) {
    fail(r, arr, "manifest: function '%s' has more output groups than outputs", f->name);
    return;
  }
  f->groups = xcalloc(n ? n : 1, sizeof *f->groups);
  *names_at = xcalloc(n ? n : 1, sizeof **names_at);
  for (xmlNodePtr c = plist_next_elem(arr->children); c && r->ok; c = plist_next_elem(c->next)) {
    xmlNodePtr *name_at = &(*names_at)[f->ngroups];
    PkgGroup *g = &f->groups[f->ngroups++];
    g->name = get_string_at(r, c, "Name", "an output group", name_at);
    check_file_name(r, *name_at, "output group", g->name, f->name);
    g->axis = (uint32_t)get_uint(r, c, "Axis", "an output group", ORION_MAX_RANK - 1);
    xmlNodePtr parts = need(r, c, "Parts", "array", "an output group");
    uint32_t np = 0;
    for (xmlNodePtr p = parts ? plist_next_elem(parts->children) : NULL; p; p = plist_next_elem(p->next)) np++;
    if (!r->ok) break;
    if (np < 1 || np > f->noutputs) {
      fail(r, parts, "manifest: output group '%s' has %u parts", g->name, np);
      break;
    }
    g->parts = xcalloc(np, sizeof *g->parts);
    for (xmlNodePtr p = plist_next_elem(parts->children); p && r->ok; p = plist_next_elem(p->next)) {
      xmlChar *t = plist_is_elem(p, "string") ? xmlNodeGetContent(p) : NULL;
      char *part = xstrdup(t ? (const char *)t : "");
      xmlFree(t);
      g->parts[g->nparts++] = part;
      bool found = false;
      for (uint32_t k = 0; k < f->noutputs; k++) found |= !strcmp(f->outputs[k].name, part);
      if (!found) fail(r, p, "manifest: output group '%s' names '%s', which is not an output", g->name, part);
    }
  }
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A name orion-run writes a file under, and where the manifest gives it. */
typedef struct FileName {
  const char *name;
  xmlNodePtr at;
} FileName;

static int by_file_name(const void *a, const void *b) {
  const FileName *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  /* Equal names in the manifest's order, so a collision is reported at the later one. */
  long lx = x->at ? xmlGetLineNo(x->at) : 0, ly = y->at ? xmlGetLineNo(y->at) : 0;
  return c ? c : (lx > ly) - (lx < ly);
}

/* The names orion-run writes a function's outputs under (each output that is
 * no group's part, and each group) must be confined and differ, or one file
 * would overwrite another. Sorted, so a hostile manifest's million outputs
 * cost n log n. */
static void check_output_files(Reader *r, const PkgFunction *f, const TensorAt *outputs_at, xmlNodePtr const *groups_at) {
  uint32_t nparts = 0, n = 0; /* a 64 MB manifest holds fewer than 2^32 parts */
  for (uint32_t g = 0; g < f->ngroups; g++) nparts += f->groups[g].nparts;
  const char **parts = xcalloc(nparts + 1, sizeof *parts);
  for (uint32_t g = 0, k = 0; g < f->ngroups; g++)
    for (uint32_t i = 0; i < f->groups[g].nparts; i++) parts[k++] = f->groups[g].parts[i];
  qsort(parts, nparts, sizeof *parts, by_name);
  FileName *names = xcalloc(f->noutputs + f->ngroups + 1, sizeof *names);
  for (uint32_t i = 0; i < f->noutputs; i++) {
    const char *name = f->outputs[i].name;
    xmlNodePtr at = outputs_at ? outputs_at[i].name : NULL;
    check_file_name(r, at, "output", name, f->name);
    if (!nparts || !bsearch(&name, parts, nparts, sizeof *parts, by_name)) names[n++] = (FileName){name, at};
  }
  for (uint32_t g = 0; g < f->ngroups; g++) names[n++] = (FileName){f->groups[g].name, groups_at ? groups_at[g] : NULL};
  qsort(names, n, sizeof *names, by_file_name);
  char buf[256];
  for (uint32_t i = 1; i < n && r->ok; i++)
    if (!strcmp(names[i].name, names[i - 1].name))
      fail(r, names[i].at, "manifest: two outputs of function '%s' would both be written as '%s.npy'", f->name,
           shown(names[i].name, buf, sizeof buf));
  free(names);
  free(parts);
}

/* The manifest's XML, or NULL after reporting; `where` puts libxml2's line
 * and reason in the message ("path:LINE: ..."), for a file on disk. */
static xmlDocPtr parse_xml(Reader *r, const char *text, size_t len, bool where) {
  xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
  if (!ctxt) ice("out of memory");
  /* No entity expansion, no DTD loading, no network. */
  /* BIG_LINES: line numbers past 65535 as they are, for messages. */
  xmlDocPtr doc = xmlCtxtReadMemory(ctxt, text, (int)len, r->path, NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES);
  const xmlError *e = doc ? NULL : xmlCtxtGetLastError(ctxt);
  if (!doc && where && e && e->line > 0) {
    char reason[256];
    snprintf(reason, sizeof reason, "%s", e->message ? e->message : "");
    reason[strcspn(reason, "\n")] = '\0';
    diag_error(r->d, (SrcSpan){0}, "%s:%d: manifest is not well-formed XML: %s", r->path, e->line, reason);
    r->ok = false;
  } else if (!doc) {
    fail(r, NULL, "manifest is not well-formed XML");
  }
  xmlFreeParserCtxt(ctxt);
  return doc;
}

/* Entries of an <array> value, counted (bounded by the manifest's size). */
static uint32_t count_elems(xmlNodePtr arr) {
  uint32_t n = 0;
  for (xmlNodePtr c = arr ? plist_next_elem(arr->children) : NULL; c; c = plist_next_elem(c->next)) n++;
  return n;
}

/* A <real> under `key`, finite and above 0 (a LoRA alpha). */
static double get_positive_real(Reader *r, xmlNodePtr dict, const char *key, const char *where) {
  xmlNodePtr v = need(r, dict, key, "real", where);
  if (!v) return 0;
  xmlChar *t = xmlNodeGetContent(v);
  char *end = NULL;
  double x = t ? strtod((const char *)t, &end) : 0;
  bool bad = !t || !t[0] || *end || !(x > 0) || !isfinite(x);
  xmlFree(t);
  if (bad) fail(r, v, "manifest: '%s' of %s must be a positive finite number", key, where);
  return bad ? 0 : x;
}

/* Optional "Adapters" of a LoRA training contract. */
static void read_adapters(Reader *r, xmlNodePtr td, PkgTraining *t) {
  if (!plist_dict_get(td, "Adapters")) return;
  xmlNodePtr as = need(r, td, "Adapters", "array", "'Training'");
  if (!as) return;
  t->adapters = xcalloc(count_elems(as) + 1, sizeof *t->adapters);
  for (xmlNodePtr c = plist_next_elem(as->children); c && r->ok; c = plist_next_elem(c->next)) {
    if (!plist_is_elem(c, "dict")) {
      fail(r, c, "manifest: entries of 'Adapters' must be <dict>");
      break;
    }
    PkgTrainAdapter *a = &t->adapters[t->nadapters++];
    a->at = pos_of(r, c);
    a->module = get_string(r, c, "Module", "an adapter");
    a->rank = (uint32_t)get_uint(r, c, "Rank", "an adapter", 4096);
    if (r->ok && a->rank == 0) fail(r, c, "manifest: 'Rank' of the adapter '%s' must be at least 1", a->module);
    a->alpha = get_positive_real(r, c, "Alpha", "an adapter");
  }
}

/* Optional "Training": the training contract, read, then checked against the functions. */
static void read_training(Reader *r, xmlNodePtr dict, Package *pkg) {
  xmlNodePtr td = plist_dict_get(dict, "Training");
  if (!td || !r->ok) return;
  if (!plist_is_elem(td, "dict")) {
    fail(r, td, "manifest: 'Training' must be a <dict>");
    return;
  }
  PkgTraining *t = xcalloc(1, sizeof *t);
  pkg->training = t;
  t->at = pos_of(r, td);
  t->forward_at = pos_of(r, plist_dict_get(td, "Forward"));
  t->backward_at = pos_of(r, plist_dict_get(td, "Backward"));
  t->loss_at = pos_of(r, plist_dict_get(td, "Loss"));
  t->saved_bytes_at = pos_of(r, plist_dict_get(td, "SavedBytes"));
  t->forward = get_string(r, td, "Forward", "'Training'");
  t->backward = get_string(r, td, "Backward", "'Training'");
  t->loss = get_string(r, td, "Loss", "'Training'");
  if (plist_dict_get(td, "Vocabulary")) t->vocabulary = get_uint(r, td, "Vocabulary", "'Training'", INT32_MAX);
  t->saved_bytes = get_uint(r, td, "SavedBytes", "'Training'", UINT64_MAX);
  xmlNodePtr ins = need(r, td, "BackwardInputs", "array", "'Training'");
  xmlNodePtr grads = need(r, td, "Gradients", "array", "'Training'");
  xmlNodePtr params = need(r, td, "TrainableParams", "array", "'Training'");
  if (!r->ok) return;
  t->inputs = xcalloc(count_elems(ins) + 1, sizeof *t->inputs);
  for (xmlNodePtr c = plist_next_elem(ins->children); c && r->ok; c = plist_next_elem(c->next)) {
    if (!plist_is_elem(c, "dict")) {
      fail(r, c, "manifest: entries of 'BackwardInputs' must be <dict>");
      break;
    }
    PkgTrainInput *in = &t->inputs[t->ninputs++];
    in->at = pos_of(r, c);
    in->input = get_string(r, c, "Input", "a backward input");
    char *from = get_string(r, c, "From", "a backward input");
    if (!strcmp(from, "output")) in->from = PKG_TRAIN_FROM_OUTPUT;
    else if (!strcmp(from, "input")) in->from = PKG_TRAIN_FROM_INPUT;
    else if (!strcmp(from, "loss_scale")) in->from = PKG_TRAIN_FROM_LOSS_SCALE;
    else if (r->ok) fail(r, c, "manifest: 'From' of the backward input '%s' must be output, input or loss_scale, not '%s'",
                         in->input, from);
    free(from);
    if (r->ok && in->from != PKG_TRAIN_FROM_LOSS_SCALE) in->name = get_string(r, c, "Name", "a backward input");
  }
  t->gradients = xcalloc(count_elems(grads) + 1, sizeof *t->gradients);
  for (xmlNodePtr c = plist_next_elem(grads->children); c && r->ok; c = plist_next_elem(c->next)) {
    if (!plist_is_elem(c, "dict")) {
      fail(r, c, "manifest: entries of 'Gradients' must be <dict>");
      break;
    }
    PkgTrainGradient *g = &t->gradients[t->ngradients++];
    g->at = pos_of(r, c);
    g->output = get_string(r, c, "Output", "a gradient");
    g->input = plist_dict_get(c, "Input") != NULL; /* a LoRA adapter's gradient names the input */
    g->param = get_string(r, c, g->input ? "Input" : "Param", "a gradient");
  }
  xmlNodePtr rows = plist_dict_get(td, "RowGradients") ? need(r, td, "RowGradients", "array", "'Training'") : NULL;
  t->rows = xcalloc(rows ? count_elems(rows) + 1 : 1, sizeof *t->rows);
  for (xmlNodePtr c = rows ? plist_next_elem(rows->children) : NULL; c && r->ok; c = plist_next_elem(c->next)) {
    if (!plist_is_elem(c, "dict")) {
      fail(r, c, "manifest: entries of 'RowGradients' must be <dict>");
      break;
    }
    PkgTrainRows *g = &t->rows[t->nrows++];
    g->at = pos_of(r, c);
    g->output = get_string(r, c, "Output", "a row gradient");
    g->param = get_string(r, c, "Param", "a row gradient");
    g->indices = get_string(r, c, "Indices", "a row gradient");
  }
  t->params = xcalloc(count_elems(params) + 1, sizeof *t->params);
  t->params_at = xcalloc(count_elems(params) + 1, sizeof *t->params_at);
  for (xmlNodePtr c = plist_next_elem(params->children); c && r->ok; c = plist_next_elem(c->next)) {
    xmlChar *s = plist_is_elem(c, "string") ? xmlNodeGetContent(c) : NULL;
    if (!s) {
      fail(r, c, "manifest: entries of 'TrainableParams' must be <string>");
      break;
    }
    t->params_at[t->nparams] = pos_of(r, c);
    t->params[t->nparams++] = xstrdup((const char *)s);
    xmlFree(s);
  }
  if (r->ok) read_adapters(r, td, t);
  if (r->ok && !package_training_check(pkg, t, r->path, r->d)) r->ok = false;
}

static bool parse_manifest(const char *text, size_t len, const char *name, Package *pkg, Diag *d, bool where);

bool package_parse_manifest(const char *text, size_t len, const char *name, Package *pkg, Diag *d) {
  return parse_manifest(text, len, name, pkg, d, false);
}

static bool parse_manifest(const char *text, size_t len, const char *name, Package *pkg, Diag *d, bool where) {
  memset(pkg, 0, sizeof *pkg);
  Reader r = {.path = name, .d = d, .ok = true, .where = where, .text = text, .len = len};
  if (len > MAX_MANIFEST_BYTES) {
    fail(&r, NULL, "manifest is too large (limit is %u bytes)", MAX_MANIFEST_BYTES);
    return false;
  }
  xmlDocPtr doc = parse_xml(&r, text, len, where);
  xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
  xmlNodePtr dict = root && plist_is_elem(root, "plist") ? plist_next_elem(root->children) : NULL;
  if (doc && !plist_is_elem(dict, "dict")) fail(&r, dict ? dict : root, "manifest is not a property list with a <dict> at its root");
  if (r.ok) {
    xmlNodePtr version_at;
    pkg->format_version = (uint32_t)get_uint_at(&r, dict, "FormatVersion", "the manifest", UINT32_MAX, &version_at);
    if (r.ok && (pkg->format_version < PACKAGE_FORMAT_OLDEST || pkg->format_version > PACKAGE_FORMAT_VERSION))
      fail(&r, version_at, "package format version %u is not supported (this reads versions %d to %d)",
           pkg->format_version, PACKAGE_FORMAT_OLDEST, PACKAGE_FORMAT_VERSION);
  }
  if (r.ok) {
    pkg->compiler_version = get_string(&r, dict, "CompilerVersion", "the manifest");
    xmlNodePtr target_at, weights_at, chip_at;
    pkg->target = get_string_at(&r, dict, "Target", "the manifest", &target_at);
    pkg->program_version = get_string(&r, dict, "ProgramVersion", "the manifest");
    pkg->source_name = get_string(&r, dict, "Source", "the manifest");
    get_hash(&r, dict, "SourceSHA256", "the manifest", pkg->source_sha256, 64);
    char *wf = get_string_at(&r, dict, "WeightsFile", "the manifest", &weights_at);
    if (r.ok && strcmp(wf, PACKAGE_WEIGHTS)) fail(&r, weights_at, "manifest: 'WeightsFile' must be '%s'", PACKAGE_WEIGHTS);
    free(wf);
    get_hash(&r, dict, "WeightsLayoutXXH64", "the manifest", pkg->weights_layout_xxh64, 16);
    pkg->weights_size = get_uint(&r, dict, "WeightsSize", "the manifest", UINT64_MAX);
    pkg->weights_generation = get_uint(&r, dict, "WeightsGeneration", "the manifest", UINT64_MAX);
    pkg->min_surface_bytes = get_uint(&r, dict, "MinimumSurfaceBytes", "the manifest", UINT32_MAX);
    MilTarget t;
    if (r.ok && !mil_target_from_name(pkg->target, &t)) fail(&r, target_at, "manifest: unknown target '%s'", pkg->target);
    /* Optional: only packages compiled with --chip have it. A chip name as
     * the constraint table spells them (lowercase letters and digits, at most 16). */
    if (r.ok && plist_dict_get(dict, "Chip")) {
      pkg->chip = get_string_at(&r, dict, "Chip", "the manifest", &chip_at);
      size_t n = strlen(pkg->chip);
      if (r.ok && (n == 0 || n > 16 || strspn(pkg->chip, "abcdefghijklmnopqrstuvwxyz0123456789") != n))
        fail(&r, chip_at, "manifest: 'Chip' must be a chip name of 1 to 16 lowercase letters and digits, e.g. m4");
    }
    xmlNodePtr funcs = need(&r, dict, "Functions", "array", "the manifest");
    uint32_t nf = 0;
    for (xmlNodePtr c = funcs ? plist_next_elem(funcs->children) : NULL; c; c = plist_next_elem(c->next)) nf++;
    if (r.ok && (nf == 0 || nf > MAX_PKG_FUNCTIONS)) fail(&r, funcs, "manifest: a package holds 1 to %u functions, not %u", MAX_PKG_FUNCTIONS, nf);
    pkg->functions = xcalloc(nf ? nf : 1, sizeof *pkg->functions);
    for (xmlNodePtr c = funcs ? plist_next_elem(funcs->children) : NULL; c && r.ok; c = plist_next_elem(c->next)) {
      if (!plist_is_elem(c, "dict")) {
        fail(&r, c, "manifest: entries of 'Functions' must be <dict>");
        break;
      }
      PkgFunction *f = &pkg->functions[pkg->nfunctions++];
      f->name = get_string(&r, c, "Name", "a function");
      xmlNodePtr mil_at;
      f->mil_file = get_string_at(&r, c, "MILFile", "a function", &mil_at);
      char why[128], buf[256];
      /* A leading '.' too: a hidden file is no package's MIL. */
      if (r.ok && !pkg_name_ok(f->mil_file, PKG_NAME_PLAIN, why, sizeof why))
        fail(&r, mil_at, "manifest: MIL file name '%s' %s; it must be a plain name inside the package",
             shown(f->mil_file, buf, sizeof buf), why);
      else if (r.ok && f->mil_file[0] == '.')
        fail(&r, mil_at, "manifest: MIL file name '%s' starts with '.'; it must be a plain name inside the package",
             shown(f->mil_file, buf, sizeof buf));
      get_hash(&r, c, "MILXXH64", "a function", f->mil_xxh64, 16);
      f->surface_bytes = get_uint(&r, c, "SurfaceBytes", "a function", UINT64_MAX);
      f->inputs = read_tensors(&r, c, "Inputs", true, pkg->format_version, &f->ninputs, NULL);
      TensorAt *outputs_at;
      xmlNodePtr *groups_at;
      f->outputs = read_tensors(&r, c, "Outputs", true, pkg->format_version, &f->noutputs, &outputs_at);
      f->weights = read_tensors(&r, c, "Weights", false, pkg->format_version, &f->nweights, NULL);
      read_groups(&r, c, f, &groups_at);
      if (r.ok) check_output_files(&r, f, outputs_at, groups_at);
      free(outputs_at);
      free(groups_at);
    }
    /* Optional: packages from before it was recorded lack it. */
    xmlNodePtr args = plist_dict_get(dict, "CompileArguments");
    if (args && !plist_is_elem(args, "array")) fail(&r, args, "manifest: 'CompileArguments' must be an <array>");
    for (xmlNodePtr c = args ? plist_next_elem(args->children) : NULL; c && r.ok; c = plist_next_elem(c->next)) {
      if (!plist_is_elem(c, "string") || pkg->ncompile_args >= 1024) {
        fail(&r, c, "manifest: 'CompileArguments' holds up to 1024 <string> entries");
        break;
      }
      xmlChar *s = xmlNodeGetContent(c);
      pkg->compile_args = xrealloc(pkg->compile_args, (pkg->ncompile_args + 1) * sizeof *pkg->compile_args);
      pkg->compile_args[pkg->ncompile_args++] = xstrdup(s ? (const char *)s : "");
      xmlFree(s);
    }
    xmlNodePtr lint = need(&r, dict, "Lint", "dict", "the manifest");
    if (lint) {
      xmlNodePtr checked = plist_dict_get(lint, "Checked");
      pkg->lint_checked = plist_is_elem(checked, "true");
      if (r.ok && !plist_is_elem(checked, "true") && !plist_is_elem(checked, "false"))
        fail(&r, checked ? checked : lint, "manifest: 'Checked' of 'Lint' must be <true/> or <false/>");
      pkg->lint_errors = (uint32_t)get_uint(&r, lint, "Errors", "'Lint'", UINT32_MAX);
      pkg->lint_warnings = (uint32_t)get_uint(&r, lint, "Warnings", "'Lint'", UINT32_MAX);
    }
    read_training(&r, dict, pkg);
  }
  xmlFreeDoc(doc);
  free(r.line_start);
  if (!r.ok) package_free(pkg);
  return r.ok;
}

bool package_read(const char *path, Package *pkg, Diag *d) {
  memset(pkg, 0, sizeof *pkg);
  size_t n = strlen(path) + sizeof "/" PACKAGE_MANIFEST;
  char *mpath = xmalloc(n);
  snprintf(mpath, n, "%s/%s", path, PACKAGE_MANIFEST);
  char *text = NULL;
  size_t len;
  const char *err;
  char why[4096 + 128]; /* a path and the reason */
  bool outside = false, ok = false;
  PkgDir dir;
  if (!pkg_dir_open(&dir, path, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot read the package '%s': %s: %s", path, mpath, err);
    free(mpath);
    return false;
  }
  /* Opened once, relative to the package (pkg_open_file): what is judged is what is read. */
  if (!pkg_read_file(&dir, PACKAGE_MANIFEST, MAX_MANIFEST_BYTES, &text, &len, &outside, why, sizeof why)) {
    struct stat st;
    if (outside)
      diag_error(d, (SrcSpan){0}, "%s: %s", mpath, why);
    else if (fstatat(dir.fd, PACKAGE_MANIFEST, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT &&
             pkg_dir_kind(path) == PKG_DIR_PACKAGE_NO_MANIFEST)
      diag_error(d, (SrcSpan){0}, "cannot read the package '%s': it has no %s, so nothing in it can be verified", path,
                 PACKAGE_MANIFEST);
    else
      diag_error(d, (SrcSpan){0}, "cannot read the package '%s': %s: %s", path, mpath, why);
  } else {
    ok = parse_manifest(text, len, mpath, pkg, d, true);
  }
  free(text);
  free(mpath);
  /* Every file the manifest names, before any tool reads one: the same rule
   * for inspect, lint, run and patch (docs/package-format.md). Whatever
   * reads them opens them the same way again. */
  for (uint32_t i = 0; ok && i <= pkg->nfunctions; i++) {
    const char *rel = i < pkg->nfunctions ? pkg->functions[i].mil_file : PACKAGE_WEIGHTS;
    int fd = pkg_open_file(&dir, rel, O_RDONLY, &outside, why, sizeof why);
    if (fd >= 0) close(fd);
    if (outside) {
      diag_error(d, (SrcSpan){0}, "%s/%s: %s", path, rel, why);
      package_free(pkg);
      ok = false;
    }
  }
  pkg_dir_close(&dir);
  if (ok) pkg->path = xstrdup(path);
  return ok;
}

/* A read-only mapping of a whole file of the package (weight files are large: no copy). */
static bool map_whole(const PkgDir *dir, const char *rel, const uint8_t **data, size_t *len, char *why, size_t n) {
  bool outside;
  return pkg_map_file(dir, rel, data, len, &outside, why, n);
}

static void unmap_whole(const uint8_t *data, size_t len) { pkg_unmap_file(data, len); }

static bool hash_file(const PkgDir *dir, const char *rel, char hex[17], uint64_t *size, char *why, size_t n) {
  const uint8_t *data;
  size_t len;
  if (!map_whole(dir, rel, &data, &len, why, n)) return false;
  xxh64_hex(data, len, hex);
  *size = len;
  unmap_whole(data, len);
  return true;
}

/* Whether weight k of function i has the checksum it had in `before` (the
 * same manifest structure), so that its verified bytes need no new look. */
static bool unchanged_since(const Package *before, const Package *pkg, uint32_t i, uint32_t k) {
  if (!before || before->format_version != pkg->format_version || before->nfunctions != pkg->nfunctions || before->functions[i].nweights != pkg->functions[i].nweights)
    return false;
  const PkgTensor *a = &before->functions[i].weights[k], *b = &pkg->functions[i].weights[k];
  return a->offset == b->offset && a->bytes == b->bytes && !strcmp(a->checksum, b->checksum) && !strcmp(a->name, b->name);
}

static bool verify(const Package *pkg, const Package *before, Diag *d);

bool package_verify(const Package *pkg, Diag *d) { return verify(pkg, NULL, d); }

bool package_verify_since(const Package *pkg, const Package *before, Diag *d) { return verify(pkg, before, d); }

static bool verify(const Package *pkg, const Package *before, Diag *d) {
  bool ok = true;
  StrBuf p;
  sb_init(&p);
  char hex[17];
  uint64_t size;
  char err[4096 + 128];
  PkgDir dir;
  const char *derr;
  if (!pkg_dir_open(&dir, pkg->path, &derr)) {
    diag_error(d, (SrcSpan){0}, "%s: cannot read: %s", pkg->path, derr);
    sb_free(&p);
    return false;
  }
  for (uint32_t i = 0; i < pkg->nfunctions; i++) {
    const PkgFunction *f = &pkg->functions[i];
    p.len = 0;
    sb_printf(&p, "%s/%s", pkg->path, f->mil_file);
    if (!hash_file(&dir, f->mil_file, hex, &size, err, sizeof err)) {
      diag_error(d, (SrcSpan){0}, "%s: cannot read: %s", p.data, err);
      ok = false;
    } else if (strcmp(hex, f->mil_xxh64)) {
      diag_error(d, (SrcSpan){0}, "%s: checksum mismatch (the file changed since it was written)", p.data);
      ok = false;
    }
  }
  p.len = 0;
  sb_printf(&p, "%s/%s", pkg->path, PACKAGE_WEIGHTS);
  const uint8_t *data = NULL;
  size_t len = 0;
  bool mapped = map_whole(&dir, PACKAGE_WEIGHTS, &data, &len, err, sizeof err);
  pkg_dir_close(&dir);
  if (!mapped) {
    diag_error(d, (SrcSpan){0}, "%s: cannot read: %s", p.data, err);
    sb_free(&p);
    return false;
  }
  /* The layout checksum covers every byte but the blobs' data; each weight's
   * own checksum covers its data, and every blob must belong to a weight. */
  BlobFile bf;
  char berr[256];
  uint64_t layout = 0, *records = NULL;
  uint32_t nrecords = 0;
  bool opened = blob_file_open(&bf, data, len, berr, sizeof berr);
  if (!opened) {
    diag_error(d, (SrcSpan){0}, "%s: %s", p.data, berr);
    ok = false;
  } else if (len != pkg->weights_size || !blob_file_layout(&bf, &layout, &records, &nrecords, berr, sizeof berr)) {
    diag_error(d, (SrcSpan){0}, "%s: checksum mismatch (the file changed since it was written)", p.data);
    ok = false;
  } else {
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)layout);
    if (strcmp(hex, pkg->weights_layout_xxh64)) {
      diag_error(d, (SrcSpan){0}, "%s: checksum mismatch (the file changed since it was written)", p.data);
      ok = false;
    }
    for (uint32_t r = 0; r < nrecords; r++) {
      bool described = false;
      for (uint32_t i = 0; i < pkg->nfunctions && !described; i++)
        for (uint32_t k = 0; k < pkg->functions[i].nweights && !described; k++)
          described = pkg->functions[i].weights[k].offset == records[r];
      if (!described) {
        diag_error(d, (SrcSpan){0}, "%s: the blob at offset %llu belongs to no weight of the manifest", p.data,
                   (unsigned long long)records[r]);
        ok = false;
      }
    }
  }
  free(records);
  if (opened) {
    for (uint32_t i = 0; i < pkg->nfunctions; i++)
      for (uint32_t k = 0; k < pkg->functions[i].nweights; k++) {
        const PkgTensor *w = &pkg->functions[i].weights[k];
        BlobInfo info;
        uint32_t code = orion_dtype_blob_code(w->dtype);
        if (!blob_file_read_expect(&bf, w->offset, code, w->bytes, &info, berr, sizeof berr)) {
          diag_error(d, (SrcSpan){0}, "%s: weight '%s': %s", p.data, w->name, berr);
          ok = false;
          continue;
        }
        if (unchanged_since(before, pkg, i, k)) continue;
        hash64_hex(package_weight_checksum(pkg->format_version, data + info.data_offset, (size_t)info.size), hex);
        if (strcmp(hex, w->checksum)) {
          diag_error(d, (SrcSpan){0}, "%s: weight '%s' fails its checksum", p.data, w->name);
          ok = false;
        }
      }
  }
  unmap_whole(data, len);
  sb_free(&p);
  return ok;
}

static void free_tensors(PkgTensor *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    free(t[i].name);
    free(t[i].mil_name);
  }
  free(t);
}

void package_free(Package *pkg) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++) {
    PkgFunction *f = &pkg->functions[i];
    free(f->name);
    free(f->mil_file);
    free_tensors(f->inputs, f->ninputs);
    free_tensors(f->outputs, f->noutputs);
    free_tensors(f->weights, f->nweights);
    for (uint32_t g = 0; g < f->ngroups; g++) {
      for (uint32_t k = 0; k < f->groups[g].nparts; k++) free(f->groups[g].parts[k]);
      free(f->groups[g].parts);
      free(f->groups[g].name);
    }
    free(f->groups);
  }
  free(pkg->functions);
  free(pkg->path);
  free(pkg->compiler_version);
  free(pkg->target);
  free(pkg->chip);
  free(pkg->program_version);
  free(pkg->source_name);
  for (uint32_t i = 0; i < pkg->ncompile_args; i++) free(pkg->compile_args[i]);
  free(pkg->compile_args);
  package_training_free(pkg->training);
  memset(pkg, 0, sizeof *pkg);
}
