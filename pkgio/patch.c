/*
 * Delta patching of a package's weights (see orion/patch.h and
 * docs/package-format.md, "Weight updates").
 *
 * A patch is validated completely before anything is written. The new bytes
 * then go through a redo journal, weights/weight.bin.journal, which appears
 * atomically (written under a temporary name, synced, renamed) and holds the
 * new manifest and either the changed regions ("regions" mode) or nothing
 * but a promise that weights/weight.bin.new is complete ("shadow" mode, used
 * when most of the file changes, so the bytes are written once, not twice).
 * Once the journal exists the patch is decided: applying it is idempotent, and
 * package_recover re-applies it after a crash. Before it exists, the old files
 * are untouched and leftovers are simply removed. The file steps themselves
 * (confined to the package, synced, counted for the crash tests' fault
 * injection) are patch_files.c's.
 */
#define _GNU_SOURCE
#include "orion/patch.h"

#include <errno.h>
#include <fcntl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orion/blob.h"
#include "orion/fp16.h"
#include "orion/hash.h"
#include "orion/pkg_paths.h"
#include "orion/temporaries.h"
#include "patch_files.h"
#include "plist_util.h"

#define JOURNAL_MAGIC "ORIONJ01"
#define JOURNAL_NAME "weights/weight.bin.journal"
#define JOURNAL_TMP "weights/weight.bin.journal.tmp"
#define SHADOW_NAME "weights/weight.bin.new"
#define MANIFEST_TMP "Manifest.plist.tmp"
#define JOURNAL_HEADER 40u /* magic, generation, manifest length, regions, mode + reserved */
#define MODE_REGIONS 0u
#define MODE_SHADOW 1u

/* ---- the journal -------------------------------------------------------------- */

bool package_has_journal(const char *path) {
  char *j = patch_pkg_path(path, JOURNAL_NAME);
  bool has = access(j, F_OK) == 0;
  free(j);
  return has;
}

typedef struct Region {
  uint64_t offset; /* of the data in weight.bin */
  uint64_t len;
  const uint8_t *data;
} Region;

typedef struct Journal {
  uint32_t mode;
  uint64_t generation;
  const char *manifest;
  uint64_t manifest_len;
  Region *regions;
  uint32_t nregions;
} Journal;

static bool journal_parse(const uint8_t *p, size_t len, Journal *j) {
  memset(j, 0, sizeof *j);
  if (len < JOURNAL_HEADER + 8 || memcmp(p, JOURNAL_MAGIC, 8)) return false;
  if (patch_get_u64(p + len - 8) != XXH64(p, len - 8, 0)) return false;
  j->generation = patch_get_u64(p + 8);
  j->manifest_len = patch_get_u64(p + 16);
  uint64_t n = patch_get_u64(p + 24);
  j->mode = (uint32_t)patch_get_u64(p + 32);
  uint64_t at = JOURNAL_HEADER, end = len - 8;
  if (j->mode > MODE_SHADOW || j->manifest_len > end - at || n > (end - at) / 16) return false;
  j->manifest = (const char *)p + at;
  at += j->manifest_len;
  j->regions = xcalloc(n ? (size_t)n : 1, sizeof *j->regions);
  for (uint64_t i = 0; i < n; i++) {
    if (end - at < 16) return false;
    Region *r = &j->regions[j->nregions++];
    r->offset = patch_get_u64(p + at);
    r->len = patch_get_u64(p + at + 8);
    at += 16;
    if (r->len > end - at) return false;
    r->data = p + at;
    at += r->len;
  }
  return at == end;
}

bool patch_journal_valid(const uint8_t *data, size_t len) {
  Journal j;
  bool ok = journal_parse(data, len, &j);
  free(j.regions);
  return ok;
}

static bool journal_write(const char *pkg, const Journal *j) {
  uint32_t nparts = 3 + 2 * j->nregions;
  const uint8_t **parts = xcalloc(nparts, sizeof *parts);
  uint64_t *lens = xcalloc(nparts, sizeof *lens);
  uint8_t head[JOURNAL_HEADER], *rheads = xcalloc(j->nregions ? j->nregions : 1, 16), tail[8];
  memcpy(head, JOURNAL_MAGIC, 8);
  patch_put_u64(head + 8, j->generation);
  patch_put_u64(head + 16, j->manifest_len);
  patch_put_u64(head + 24, j->nregions);
  patch_put_u64(head + 32, j->mode);
  parts[0] = head;
  lens[0] = sizeof head;
  parts[1] = (const uint8_t *)j->manifest;
  lens[1] = j->manifest_len;
  for (uint32_t i = 0; i < j->nregions; i++) {
    patch_put_u64(rheads + 16 * i, j->regions[i].offset);
    patch_put_u64(rheads + 16 * i + 8, j->regions[i].len);
    parts[2 + 2 * i] = rheads + 16 * i;
    lens[2 + 2 * i] = 16;
    parts[3 + 2 * i] = j->regions[i].data;
    lens[3 + 2 * i] = j->regions[i].len;
  }
  /* The checksum covers everything before it, computed over the pieces. */
  size_t total = 0;
  for (uint32_t i = 0; i + 1 < nparts; i++) total += (size_t)lens[i];
  uint8_t *all = xmalloc(total ? total : 1);
  size_t at = 0;
  for (uint32_t i = 0; i + 1 < nparts; i++) {
    memcpy(all + at, parts[i], (size_t)lens[i]);
    at += (size_t)lens[i];
  }
  patch_put_u64(tail, XXH64(all, total, 0)); /* XXH64 in every format: journals stay readable */
  free(all);
  parts[nparts - 1] = tail;
  lens[nparts - 1] = 8;
  patch_track_in(pkg, JOURNAL_TMP);
  bool ok = patch_write_new_file(pkg, JOURNAL_TMP, parts, lens, nparts);
  if (ok) test_pause_at("patch-journal");
  /* The commit: from the rename on, the shadow copy is part of the update,
   * no temporary any more; the signal cleanup must see both before or both after. */
  temp_registry_lock();
  ok = ok && patch_rename_in(pkg, JOURNAL_TMP, JOURNAL_NAME);
  patch_untrack_in(pkg, JOURNAL_TMP);
  if (ok) patch_untrack_in(pkg, SHADOW_NAME);
  temp_registry_unlock();
  ok = ok && patch_sync_parent(pkg, "weights");
  free(parts);
  free(lens);
  free(rheads);
  return ok;
}

/* Carries out a committed journal; safe to repeat after a crash at any point. */
static bool journal_apply(const char *pkg, const Journal *j, const char **err) {
  if (j->mode == MODE_SHADOW) {
    char *shadow = patch_pkg_path(pkg, SHADOW_NAME);
    bool present = access(shadow, F_OK) == 0;
    free(shadow);
    /* Absent means the rename below already happened before a crash. */
    if (present && (!patch_rename_in(pkg, SHADOW_NAME, PACKAGE_WEIGHTS) || !patch_sync_parent(pkg, "weights"))) {
      *err = strerror(errno);
      return false;
    }
  } else {
    int fd = patch_open_member(pkg, PACKAGE_WEIGHTS, O_WRONLY);
    bool ok = fd >= 0;
    for (uint32_t i = 0; ok && i < j->nregions; i++) ok = patch_write_all(fd, j->regions[i].data, j->regions[i].len, j->regions[i].offset);
    ok = ok && patch_sync_fd(fd);
    if (!ok) *err = strerror(errno);
    if (fd >= 0) close(fd);
    if (!ok) return false;
  }
  const uint8_t *parts[1] = {(const uint8_t *)j->manifest};
  uint64_t lens[1] = {j->manifest_len};
  patch_track_in(pkg, MANIFEST_TMP); /* removed by a signal, the journal still has it */
  bool written = patch_write_new_file(pkg, MANIFEST_TMP, parts, lens, 1) && patch_rename_in(pkg, MANIFEST_TMP, PACKAGE_MANIFEST);
  patch_untrack_in(pkg, MANIFEST_TMP);
  if (!written || !patch_sync_dir(pkg)) {
    *err = strerror(errno);
    return false;
  }
  patch_step();
  bool ok = patch_unlink_in(pkg, JOURNAL_NAME) && patch_sync_parent(pkg, "weights");
  if (!ok) *err = strerror(errno);
  return ok;
}

/* Removes what an interrupted update can leave; `removed` (may be NULL) is
 * told each file that was there. */
static void remove_leftovers(const char *pkg, const PatchRemovedHook *removed) {
  /* "-removing": where a signal cleanup moves one before it removes it. */
  static const char *const names[] = {JOURNAL_TMP,  SHADOW_NAME,  MANIFEST_TMP, JOURNAL_TMP "-removing",
                                      SHADOW_NAME "-removing", MANIFEST_TMP "-removing"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char *p = patch_pkg_path(pkg, names[i]);
    if (patch_unlink_in(pkg, names[i]) && removed && removed->fn) removed->fn(removed->ctx, p);
    free(p);
  }
}

/* One updater at a time per package, and no recovery while an update is
 * under way (it would take the update's files for leftovers): an exclusive
 * flock on the package directory, held for the whole update. Returns the
 * descriptor to close, or -1 after reporting. */
static int lock_package(const char *path, Diag *d) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    diag_error(d, (SrcSpan){0}, "cannot open the package '%s': %s", path, strerror(errno));
    return -1;
  }
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    diag_error(d, (SrcSpan){0}, "cannot lock the package '%s': %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static bool recover_locked(const char *path, bool *did_recover, const PatchRemovedHook *removed, Diag *d);

bool package_recover(const char *path, bool *did_recover, Diag *d) {
  return package_recover_reporting(path, did_recover, NULL, d);
}

bool package_recover_reporting(const char *path, bool *did_recover, const PatchRemovedHook *removed, Diag *d) {
  int lock = lock_package(path, d);
  if (lock < 0) return false;
  bool ok = recover_locked(path, did_recover, removed, d);
  close(lock);
  return ok;
}

static bool recover_locked(const char *path, bool *did_recover, const PatchRemovedHook *removed, Diag *d) {
  if (did_recover) *did_recover = false;
  char *jp = patch_pkg_path(path, JOURNAL_NAME);
  char *text = NULL;
  size_t len = 0;
  const char *err = NULL;
  bool ok = true;
  if (access(jp, F_OK) != 0) {
    remove_leftovers(path, removed); /* an uncommitted patch: the old weights stand */
  } else if (!patch_read_member(path, JOURNAL_NAME, &text, &len, &err)) {
    diag_error(d, (SrcSpan){0}, "%s: cannot read the journal of an interrupted weight update: %s", jp, err);
    ok = false;
  } else {
    Journal j;
    if (!journal_parse((const uint8_t *)text, len, &j)) {
      /* The journal was synced before it got its name: damage means the disk lost it. */
      diag_error(d, (SrcSpan){0},
                 "%s: the journal of an interrupted weight update is damaged; the package cannot be trusted "
                 "(recompile it, or restore it from a copy)",
                 jp);
      ok = false;
    } else if (!journal_apply(path, &j, &err)) {
      diag_error(d, (SrcSpan){0}, "cannot complete the interrupted weight update of '%s': %s", path, err);
      ok = false;
    } else {
      remove_leftovers(path, removed);
      if (did_recover) *did_recover = true;
    }
    free(j.regions);
  }
  free(text);
  free(jp);
  return ok;
}

/* ---- converting the new values ------------------------------------------------- */

static bool float_source(OrionDType t) {
  return t == ORION_DT_FP16 || t == ORION_DT_FP32 || t == ORION_DT_BF16 || t == ORION_DT_FP64;
}

static bool all_finite(const uint8_t *p, uint64_t n, bool fp16) {
  unsigned special = 0;
  if (fp16) {
    /* Four values per 64-bit word: a lane is special when its exponent bits
     * are all set, i.e. when (h & 0x7C00) ^ 0x7C00 is zero (the classic
     * zero-lane test on the xor). */
    const uint64_t exp = 0x7C007C007C007C00ull, ones = 0x0001000100010001ull, highs = 0x8000800080008000ull;
    uint64_t any = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
      uint64_t x;
      memcpy(&x, p + 2 * i, 8);
      uint64_t t = (x & exp) ^ exp;
      any |= (t - ones) & ~t & highs;
    }
    special = any != 0;
    for (; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      special |= (h & 0x7C00u) == 0x7C00u;
    }
  } else {
    for (uint64_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, p + 4 * i, 4);
      special |= (u & 0x7F800000u) == 0x7F800000u;
    }
  }
  return !special;
}

/* The bytes weight w gets from tensor t, or NULL after reporting why not;
 * *owned tells whether they were converted into a new buffer (else they are
 * t's own data). */
static const uint8_t *convert(const PatchTensor *t, const PkgTensor *w, const PatchOptions *opt, bool *owned,
                              Diag *d) {
  uint64_t n = w->bytes / orion_dtype_size(w->dtype);
  bool same_int = w->dtype == t->dtype &&
                  (w->dtype == ORION_DT_INT32 || w->dtype == ORION_DT_INT8 || w->dtype == ORION_DT_UINT8);
  bool is_float = w->dtype == ORION_DT_FP16 || w->dtype == ORION_DT_FP32;
  if (!(is_float && float_source(t->dtype)) && !same_int) {
    diag_error(d, (SrcSpan){0}, "%s: weight '%s' is %s; a tensor of dtype %s cannot replace it (a dtype change needs a recompile)",
               t->origin, w->name, orion_dtype_name(w->dtype), weight_file_dtype_name(t->dtype));
    return NULL;
  }
  if (t->nbytes != n * weight_file_dtype_size(t->dtype)) ice("patch tensor '%s' has %llu bytes", t->name, (unsigned long long)t->nbytes);
  bool as_is = same_int || (is_float && w->dtype == t->dtype);
  uint8_t *out = as_is ? (uint8_t *)(uintptr_t)t->data : xmalloc(w->bytes ? (size_t)w->bytes : 1);
  *owned = !as_is;
  /* As is, the data is used where it is: the caller's buffer or the mapped file. */
  if (!as_is) weights_convert_floats(t->data, t->dtype, n, w->dtype, out);
  /* Finite values beyond fp16's range came out as infinities: clamped or an
   * error, up to the first NaN or infinity, which the checks below report. */
  uint64_t clamped = 0;
  bool look = !as_is && w->dtype == ORION_DT_FP16 && !all_finite(out, n, true);
  for (uint64_t i = 0; look && i < n; i++) {
    uint16_t h;
    memcpy(&h, out + 2 * i, 2);
    if ((h & 0x7C00u) != 0x7C00u) continue;
    double v = weight_file_float_value(t->data, t->dtype, i);
    if (isnan(v) || isinf(v)) break; /* reported below */
    if (!opt->clamp_fp16) {
      diag_error(d, (SrcSpan){0},
                 "%s: weight '%s' has the value %.9g at index %llu, beyond fp16's range (largest is 65504; "
                 "--clamp-fp16 clamps)",
                 t->origin, w->name, v, (unsigned long long)i);
      free(out);
      return NULL;
    }
    h = v > 0 ? 0x7BFFu : 0xFBFFu;
    memcpy(out + 2 * i, &h, 2);
    clamped++;
  }
  if (clamped)
    diag_warning(d, (SrcSpan){0}, "%s: weight '%s': %llu values beyond fp16's range clamped to +-65504", t->origin,
                 w->name, (unsigned long long)clamped);
  /* NaN and infinity are checked on the result, whatever the source: a
   * branch-free scan first, the element-wise search only to name one. */
  if (is_float && all_finite(out, n, w->dtype == ORION_DT_FP16)) return out;
  for (uint64_t i = 0; i < n && is_float; i++) {
    bool bad;
    if (w->dtype == ORION_DT_FP16) {
      uint16_t h;
      memcpy(&h, out + 2 * i, 2);
      bad = (h & 0x7C00u) == 0x7C00u;
    } else {
      float f;
      memcpy(&f, out + 4 * i, 4);
      bad = !isfinite(f);
    }
    if (bad) {
      double v = weight_file_float_value(t->data, t->dtype, i);
      if (isnan(v))
        diag_error(d, (SrcSpan){0}, "%s: weight '%s' has NaN at index %llu", t->origin, w->name, (unsigned long long)i);
      else
        diag_error(d, (SrcSpan){0}, "%s: weight '%s' has the value %.17g at index %llu, which %s cannot hold", t->origin,
                   w->name, v, (unsigned long long)i, orion_dtype_name(w->dtype));
      if (*owned) free(out);
      return NULL;
    }
  }
  return out;
}

typedef struct Target {
  const PkgTensor *w;   /* first manifest entry of this storage */
  uint64_t data_offset; /* of the bytes in weight.bin */
  const uint8_t *bytes; /* new bytes, or NULL when no tensor names this storage */
  bool owned;           /* bytes were converted into a buffer of ours */
  const PatchTensor *by;
} Target;

/* ---- the manifest ---------------------------------------------------------------- */


static void set_text(xmlNodePtr n, const char *text) {
  if (n) xmlNodeSetContent(n, (const xmlChar *)text);
}

/* The manifest after the patch: new per-weight and whole-file checksums and
 * the next generation. The package was read from this text, so every node is there. */
static char *updated_manifest(const char *text, size_t len, const Package *pkg, const Target *targets, uint32_t nt,
                              uint64_t generation, size_t *out_len) {
  xmlDocPtr doc = xmlReadMemory(text, (int)len, PACKAGE_MANIFEST, NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
  if (!doc) ice("manifest parsed once but not twice");
  xmlNodePtr root = plist_next_elem(xmlDocGetRootElement(doc)->children);
  char hex[17], num[32];
  /* WeightsLayoutXXH64 stays: a patch changes only blobs' data. */
  snprintf(num, sizeof num, "%llu", (unsigned long long)generation);
  set_text(plist_dict_get(root, "WeightsGeneration"), num);
  xmlNodePtr funcs = plist_dict_get(root, "Functions");
  uint32_t fi = 0;
  for (xmlNodePtr f = plist_next_elem(funcs ? funcs->children : NULL); f && fi < pkg->nfunctions; f = plist_next_elem(f->next), fi++) {
    const PkgFunction *pf = &pkg->functions[fi];
    xmlNodePtr ws = plist_dict_get(f, "Weights");
    uint32_t wi = 0;
    for (xmlNodePtr w = plist_next_elem(ws ? ws->children : NULL); w && wi < pf->nweights; w = plist_next_elem(w->next), wi++) {
      const PkgTensor *t = &pf->weights[wi];
      uint32_t j = 0;
      while (j < nt && targets[j].w->offset != t->offset) j++;
      if (j == nt || !targets[j].bytes) continue; /* unchanged: so is its checksum */
      /* By the package's own format: a patch never changes its version. */
      hash64_hex(package_weight_checksum(pkg->format_version, targets[j].bytes, (size_t)t->bytes), hex);
      set_text(plist_dict_get(w, package_weight_checksum_key(pkg->format_version)), hex);
    }
  }
  xmlChar *buf = NULL;
  int n = 0;
  xmlDocDumpFormatMemoryEnc(doc, &buf, &n, "UTF-8", 1);
  xmlFreeDoc(doc);
  char *res = xmalloc((size_t)n + 1);
  memcpy(res, buf, (size_t)n);
  res[n] = 0;
  xmlFree(buf);
  *out_len = (size_t)n;
  return res;
}

/* ---- the patch ----------------------------------------------------------------------- */

static const PkgTensor *find_weight(const Package *pkg, const char *name) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    for (uint32_t k = 0; k < pkg->functions[i].nweights; k++)
      if (!strcmp(pkg->functions[i].weights[k].name, name)) return &pkg->functions[i].weights[k];
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    for (uint32_t k = 0; k < pkg->functions[i].nweights; k++)
      if (!strcmp(pkg->functions[i].weights[k].mil_name, name)) return &pkg->functions[i].weights[k];
  return NULL;
}

static void shape_text(char *buf, size_t n, uint32_t rank, const int64_t *dims) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (uint32_t i = 0; i < rank && at < n; i++) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

/* Finds and checks each tensor's weight; fills targets (one per distinct blob). */
static bool validate(const Package *pkg, const BlobFile *bf, const PatchTensor *t, uint32_t n, const PatchOptions *opt,
                     Target **targets_out, uint32_t *ntargets, Diag *d) {
  /* Distinct blobs of the package, in offset order of first appearance. */
  uint32_t cap = 0, nt = 0;
  Target *targets = NULL;
  bool ok = true;
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    for (uint32_t k = 0; k < pkg->functions[i].nweights; k++) {
      const PkgTensor *w = &pkg->functions[i].weights[k];
      uint32_t j = 0;
      while (j < nt && targets[j].w->offset != w->offset) j++;
      if (j < nt) continue;
      BlobInfo info;
      char berr[256];
      if (!blob_file_read(bf, w->offset, &info, berr, sizeof berr) || info.size != w->bytes) {
        diag_error(d, (SrcSpan){0}, "%s/%s: weight '%s': %s", pkg->path, PACKAGE_WEIGHTS, w->name,
                   info.size != w->bytes ? "its blob record does not match the manifest" : berr);
        ok = false;
        continue;
      }
      xgrow((void **)&targets, sizeof *targets, &cap, nt + 1);
      targets[nt++] = (Target){.w = w, .data_offset = info.data_offset};
    }
  for (uint32_t i = 0; ok && i < n; i++) {
    const PkgTensor *w = find_weight(pkg, t[i].name);
    if (!w) {
      diag_error(d, (SrcSpan){0}, "%s: the package has no weight named '%s' (orion-inspect lists them)", t[i].origin,
                 t[i].name);
      ok = false;
      continue;
    }
    if (t[i].rank != w->rank || memcmp(t[i].dims, w->dims, w->rank * sizeof *w->dims)) {
      char a[256], b[256];
      shape_text(a, sizeof a, t[i].rank, t[i].dims);
      shape_text(b, sizeof b, w->rank, w->dims);
      diag_error(d, (SrcSpan){0}, "%s: tensor '%s' has shape %s, but the weight's shape is %s (a shape change needs a recompile)",
                 t[i].origin, t[i].name, a, b);
      ok = false;
      continue;
    }
    bool owned = false;
    const uint8_t *bytes = convert(&t[i], w, opt, &owned, d);
    if (!bytes) {
      ok = false;
      continue;
    }
    uint32_t j = 0;
    while (targets[j].w->offset != w->offset) j++;
    if (targets[j].bytes) {
      if (memcmp(targets[j].bytes, bytes, (size_t)w->bytes)) {
        diag_error(d, (SrcSpan){0}, "%s: '%s' and '%s' (from %s) share their storage but get different values",
                   t[i].origin, t[i].name, targets[j].by->name, targets[j].by->origin);
        ok = false;
      }
      if (owned) free((void *)(uintptr_t)bytes);
      continue;
    }
    targets[j].bytes = bytes;
    targets[j].owned = owned;
    targets[j].by = &t[i];
  }
  /* A blob stored once for weights that are one (the same source tensor) changes for all or none. */
  const PkgTensor **named = xcalloc(n ? n : 1, sizeof *named); /* the weight each tensor names */
  for (uint32_t m = 0; ok && m < n; m++) named[m] = find_weight(pkg, t[m].name);
  for (uint32_t j = 0; ok && j < nt; j++) {
    if (!targets[j].bytes) continue;
    const char *first = NULL;
    uint32_t others = 0;
    for (uint32_t i = 0; i < pkg->nfunctions; i++)
      for (uint32_t k = 0; k < pkg->functions[i].nweights; k++) {
        const PkgTensor *w = &pkg->functions[i].weights[k];
        if (w->offset != targets[j].w->offset) continue;
        bool is_named = false;
        for (uint32_t m = 0; m < n && !is_named; m++) is_named = named[m] && !strcmp(named[m]->name, w->name);
        if (is_named) continue;
        if (!first) first = w->name;
        else others++;
      }
    /* Sharers that keep their value anyway are fine. */
    if (first && !memcmp(targets[j].bytes, bf->data + targets[j].data_offset, (size_t)targets[j].w->bytes)) first = NULL;
    if (first) {
      char more[64] = "";
      if (others) snprintf(more, sizeof more, " and %u other weight%s", others, others == 1 ? "" : "s");
      diag_error(d, (SrcSpan){0},
                 "%s: weight '%s' shares its storage with '%s'%s (they were compiled from one source tensor), so patching "
                 "it alone would change them too; patch them all with the same values, or compile with --no-dedup",
                 targets[j].by->origin, targets[j].by->name, first, more);
      ok = false;
    }
  }
  free(named);
  *targets_out = targets;
  *ntargets = nt;
  return ok;
}

static bool map_fd(int fd, int flags, uint8_t **base, size_t *len, int *fd_out, const char **err);

/* Maps what `fd` (or -1 with errno, from the open) holds; the descriptor is kept in *fd_out. */
static bool map_fd(int fd, int flags, uint8_t **base, size_t *len, int *fd_out, const char **err) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    *err = strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  *len = (size_t)st.st_size;
  *base = *len ? mmap(NULL, *len, PROT_READ | (flags ? PROT_WRITE : 0), MAP_PRIVATE, fd, 0) : NULL;
  if (*len && *base == MAP_FAILED) {
    *err = strerror(errno);
    close(fd);
    return false;
  }
  *fd_out = fd;
  return true;
}

/* PatchOptions.unsynced: the regions into the weight file in place, then the
 * manifest by rename, nothing synced (a working copy; see patch.h). */
static bool apply_unsynced(const char *pkg, const Region *regions, uint32_t nr, const char *manifest, size_t mlen,
                           const char **err) {
  int fd = patch_open_member(pkg, PACKAGE_WEIGHTS, O_WRONLY);
  bool ok = fd >= 0;
  for (uint32_t r = 0; ok && r < nr; r++) ok = patch_write_all(fd, regions[r].data, regions[r].len, regions[r].offset);
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (ok) {
    const char *base;
    int dir = patch_open_parent(pkg, PACKAGE_MANIFEST ".tmp", &base);
    int mfd = dir < 0 ? -1 : openat(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (dir >= 0) close(dir);
    ok = mfd >= 0 && patch_write_all(mfd, (const uint8_t *)manifest, mlen, 0);
    if (mfd >= 0 && close(mfd) != 0) ok = false;
  }
  ok = ok && patch_rename_in(pkg, PACKAGE_MANIFEST ".tmp", PACKAGE_MANIFEST);
  if (!ok) *err = strerror(errno);
  return ok;
}

static int by_offset(const void *a, const void *b) {
  const Region *x = a, *y = b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

bool package_patch(const char *path, const PatchTensor *t, uint32_t n, const PatchOptions *opt, Diag *d) {
  static const PatchOptions defaults = {0};
  if (!opt) opt = &defaults;
  patch_fault_init();
  double t0 = patch_now_ms();
  int lock = lock_package(path, d);
  if (lock < 0) return false;
  Package pkg;
  if (!recover_locked(path, NULL, NULL, d) || !package_read(path, &pkg, d)) {
    close(lock);
    return false;
  }
  char *wpath = patch_pkg_path(path, PACKAGE_WEIGHTS);
  char *mtext = NULL;
  size_t mlen = 0;
  const char *err = NULL;
  uint8_t *image = NULL;
  size_t size = 0;
  int fd = -1;
  Target *targets = NULL;
  uint32_t nt = 0;
  bool ok = false;
  if (!patch_read_member(path, PACKAGE_MANIFEST, &mtext, &mlen, &err) ||
      !map_fd(patch_open_member(path, PACKAGE_WEIGHTS, O_RDONLY), 0, &image, &size, &fd, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot patch '%s': %s", path, err);
    goto out;
  }
  BlobFile bf;
  char berr[256];
  if (size != pkg.weights_size || !blob_file_open(&bf, image, size, berr, sizeof berr)) {
    diag_error(d, (SrcSpan){0}, "%s: %s", wpath, size != pkg.weights_size ? "its size differs from the manifest's" : berr);
    goto out;
  }
  uint32_t errors_before = d->nerrors; /* the caller's Diag may hold earlier errors */
  if (!validate(&pkg, &bf, t, n, opt, &targets, &nt, d) || d->nerrors > errors_before) goto out;

  /* The new file is the old one with the changed blobs' data replaced: a
   * list of regions in file order, never a copy of the file in memory. */
  Region *regions = xcalloc(nt ? nt : 1, sizeof *regions);
  uint32_t nr = 0;
  uint64_t changed = 0;
  for (uint32_t j = 0; j < nt; j++) {
    if (!targets[j].bytes || !memcmp(image + targets[j].data_offset, targets[j].bytes, (size_t)targets[j].w->bytes)) continue;
    regions[nr++] = (Region){targets[j].data_offset, targets[j].w->bytes, targets[j].bytes};
    changed += targets[j].w->bytes;
  }
  qsort(regions, nr, sizeof *regions, by_offset);
  /* Its pieces (for a shadow copy): unchanged stretches from the mapping, new data from the regions. */
  const uint8_t **parts = xcalloc(2 * nr + 1, sizeof *parts);
  uint64_t *lens = xcalloc(2 * nr + 1, sizeof *lens);
  uint32_t np = 0;
  uint64_t at = 0;
  for (uint32_t r = 0; r <= nr; r++) {
    uint64_t end = r < nr ? regions[r].offset : size;
    parts[np] = image + at;
    lens[np++] = end - at;
    if (r < nr) {
      parts[np] = regions[r].data;
      lens[np++] = regions[r].len;
      at = end + regions[r].len;
    }
  }
  double t1 = patch_now_ms();
  if (nr == 0) { /* every value is already there: nothing to write, the generation stays */
    if (opt->stats)
      *opt->stats = (PatchStats){.tensors = n, .generation = pkg.weights_generation, .validate_ms = t1 - t0};
    free(regions);
    free(parts);
    free(lens);
    ok = true;
    goto out;
  }
  uint64_t generation = pkg.weights_generation + 1;
  size_t new_mlen;
  char *new_manifest = updated_manifest(mtext, mlen, &pkg, targets, nt, generation, &new_mlen);
  /* Most of the file new: write it once as a shadow copy instead of twice. */
  bool shadow = changed * 2 > size;
  Journal j = {.mode = shadow ? MODE_SHADOW : MODE_REGIONS, .generation = generation, .manifest = new_manifest,
               .manifest_len = new_mlen, .regions = regions, .nregions = shadow ? 0 : nr};
  ok = true;
  if (opt->unsynced) {
    ok = apply_unsynced(path, regions, nr, new_manifest, new_mlen, &err);
    if (!ok) diag_error(d, (SrcSpan){0}, "cannot patch '%s': %s", path, err);
    shadow = false;
  } else if (shadow) {
    patch_track_in(path, SHADOW_NAME); /* until the journal commits it */
    ok = patch_write_new_file(path, SHADOW_NAME, parts, lens, np);
    if (!ok) err = strerror(errno);
  }
  if (!opt->unsynced) ok = ok && journal_write(path, &j);
  if (!ok && !err) err = strerror(errno);
  if (opt->unsynced) {
    /* written already, or reported */
  } else if (ok) {
    ok = journal_apply(path, &j, &err);
    if (!ok) {
      /* Committed: the next open or patch completes it. */
      diag_error(d, (SrcSpan){0}, "the weight update of '%s' was committed but could not be completed (%s); it "
                 "will be completed when the package is next opened", path, err);
      err = NULL;
    }
  } else {
    remove_leftovers(path, NULL);
    if (shadow) patch_untrack_in(path, SHADOW_NAME);
    diag_error(d, (SrcSpan){0}, "cannot patch '%s': %s (the package is unchanged)", path, err);
  }
  if (opt->stats) {
    *opt->stats = (PatchStats){.tensors = n, .regions = nr, .bytes_changed = changed, .shadow = shadow,
                               .generation = ok ? generation : pkg.weights_generation, .validate_ms = t1 - t0,
                               .commit_ms = patch_now_ms() - t1};
  }
  free(new_manifest);
  free(regions);
  free(parts);
  free(lens);
out:
  for (uint32_t i = 0; i < nt; i++)
    if (targets[i].owned) free((void *)(uintptr_t)targets[i].bytes);
  free(targets);
  if (image) munmap(image, size);
  if (fd >= 0) close(fd);
  free(mtext);
  free(wpath);
  package_free(&pkg);
  close(lock);
  return ok;
}

/* ---- checksums after an in-place write ----------------------------------------------- */

bool package_refresh_checksums(const char *path, uint32_t *nchanged, Diag *d) {
  static const PatchOptions no_options = {0};
  if (nchanged) *nchanged = 0;
  patch_fault_init();
  int lock = lock_package(path, d);
  if (lock < 0) return false;
  Package pkg;
  if (!recover_locked(path, NULL, NULL, d) || !package_read(path, &pkg, d)) {
    close(lock);
    return false;
  }
  char *mtext = NULL;
  size_t mlen = 0, size = 0;
  const char *err = NULL;
  uint8_t *image = NULL;
  int fd = -1;
  Target *targets = NULL;
  uint32_t nt = 0, changed = 0;
  bool ok = false;
  BlobFile bf;
  char berr[256];
  if (!patch_read_member(path, PACKAGE_MANIFEST, &mtext, &mlen, &err) ||
      !map_fd(patch_open_member(path, PACKAGE_WEIGHTS, O_RDONLY), 0, &image, &size, &fd, &err)) {
    diag_error(d, (SrcSpan){0}, "cannot update the checksums of '%s': %s", path, err);
  } else if (size != pkg.weights_size || !blob_file_open(&bf, image, size, berr, sizeof berr)) {
    diag_error(d, (SrcSpan){0}, "%s/%s: %s", path, PACKAGE_WEIGHTS,
               size != pkg.weights_size ? "its size differs from the manifest's" : berr);
  } else if (validate(&pkg, &bf, NULL, 0, &no_options, &targets, &nt, d)) {
    /* A blob whose checksum still matches keeps its entry (bytes NULL). */
    for (uint32_t j = 0; j < nt; j++) {
      char hex[17];
      const uint8_t *data = image + targets[j].data_offset;
      hash64_hex(package_weight_checksum(pkg.format_version, data, (size_t)targets[j].w->bytes), hex);
      if (strcmp(hex, targets[j].w->checksum)) targets[j].bytes = data, changed++;
    }
    ok = true;
    if (changed) {
      size_t new_mlen;
      char *manifest = updated_manifest(mtext, mlen, &pkg, targets, nt, pkg.weights_generation + 1, &new_mlen);
      /* The data is in the file already: only the manifest changes, by rename. */
      ok = apply_unsynced(path, NULL, 0, manifest, new_mlen, &err);
      if (!ok) diag_error(d, (SrcSpan){0}, "cannot update the checksums of '%s': %s", path, err);
      free(manifest);
    }
  }
  if (ok && nchanged) *nchanged = changed;
  free(targets);
  if (image) munmap(image, size);
  if (fd >= 0) close(fd);
  free(mtext);
  package_free(&pkg);
  close(lock);
  return ok;
}
