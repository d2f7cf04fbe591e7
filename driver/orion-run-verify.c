/*
 * `orion-run patch --verify`: the patched package must be exactly what a
 * fresh compile of its source with the new weights gives — the same MIL text,
 * the same weight file byte for byte — and must compute bit-identical outputs.
 * The compile is a call of the compile library (orion/compile.h), with the
 * options the manifest recorded (CompileArguments) plus the new weights as
 * overrides; no orionc binary is needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion-run.h"
#include "tool_memory.h"
#include "orion/compile.h"
#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/pkg_paths.h"
#include "orion/runtime.h"
#include "orion/hash.h"
#include "orion/temporaries.h"

/* The source as the manifest names it: relative to the current directory, or else to the package's. */
static char *find_source(const char *package, const Package *pkg, const char *given, Diag *d) {
  if (given) return xstrdup(given);
  if (access(pkg->source_name, R_OK) == 0) return xstrdup(pkg->source_name);
  char *dir = xstrdup(package);
  size_t n = strlen(dir) + strlen(pkg->source_name) + 8;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/../%s", dir, pkg->source_name);
  free(dir);
  if (pkg->source_name[0] != '/' && access(p, R_OK) == 0) return p;
  free(p);
  diag_error(d, (SrcSpan){0}, "--verify: cannot find the source '%s' the package was compiled from; give "
             "--verify=SOURCE.oir", pkg->source_name);
  return NULL;
}

static bool same_source(const char *path, const Package *pkg, Diag *d) {
  char *text;
  size_t len;
  const char *err;
  if (!read_file(path, SIZE_MAX / 2, &text, &len, &err)) {
    diag_error(d, (SrcSpan){0}, "--verify: cannot read '%s': %s", path, err);
    return false;
  }
  char hex[65];
  sha256_hex(text, len, hex);
  free(text);
  if (strcmp(hex, pkg->source_sha256)) {
    diag_error(d, (SrcSpan){0}, "--verify: '%s' is not the source the package was compiled from (its SHA-256 differs)",
               path);
    return false;
  }
  return true;
}

/* Compiles the source again through the compile library, with the options the
 * manifest recorded (in orionc's spelling) and the new weights as overrides. */
static bool fresh_compile(const Package *pkg, const char *source, const char *out, const char *const *files,
                          const char *const *npy_names, uint32_t nfiles, bool verbose, Diag *d) {
  char **extra = xcalloc(nfiles + 1, sizeof *extra);
  for (uint32_t i = 0; i < nfiles; i++) {
    StrBuf sb;
    sb_init(&sb);
    if (npy_names[i]) sb_printf(&sb, "--weight-override=%s=%s", npy_names[i], files[i]);
    else sb_printf(&sb, "--weights-override=%s", files[i]);
    extra[i] = sb.data;
  }
  OrionCompileArgs args;
  orion_compile_args_init(&args);
  bool ok = true;
  char err[512];
  for (uint32_t i = 0; ok && i < pkg->ncompile_args + nfiles; i++) {
    const char *arg = i < pkg->ncompile_args ? pkg->compile_args[i] : extra[i - pkg->ncompile_args];
    OrionArgStatus st = orion_compile_args_parse(&args, arg, err, sizeof err);
    if (st == ORION_ARG_NOT_MINE)
      diag_error(d, (SrcSpan){0}, "--verify: the manifest's CompileArguments has '%s', which is not a compile option",
                 arg);
    else if (st == ORION_ARG_INVALID)
      diag_error(d, (SrcSpan){0}, "--verify: the manifest's CompileArguments: %s", err);
    ok = st == ORION_ARG_TAKEN;
  }
  if (ok && verbose) {
    fputs("orion-run: verifying with a fresh compile:", stderr);
    for (uint32_t i = 0; i < args.options.ncompile_args; i++) fprintf(stderr, " %s", args.options.compile_args[i]);
    fprintf(stderr, " -o %s %s\n", out, source);
  }
  /* A fresh compile, not a copy from the compile cache (cache_dir stays NULL). */
  OrionCompileResult result = {0};
  ok = ok && orion_compile_load_plugins(args.options.plugins, args.options.nplugins, d) &&
       orion_compile_file(source, &args.options, out, &result, d);
  if (!ok) diag_error(d, (SrcSpan){0}, "--verify: the fresh compile with the new weights failed");
  orion_compile_result_free(&result);
  orion_compile_args_free(&args);
  for (uint32_t i = 0; i < nfiles; i++) free(extra[i]);
  free(extra);
  return ok;
}

/* Names the weight holding byte `at` of the weight file, for the message. */
static const char *weight_at(const Package *pkg, uint64_t at) {
  for (uint32_t i = 0; i < pkg->nfunctions; i++)
    for (uint32_t k = 0; k < pkg->functions[i].nweights; k++) {
      const PkgTensor *w = &pkg->functions[i].weights[k];
      if (at >= w->offset && at < w->offset + 64 + w->bytes) return w->name;
    }
  return "(the file header or a blob record)";
}

/* `shown`: how messages name file a. */
/* File `rel` of the package at `dir`, read by the package rule (orion/pkg_paths.h). */
static bool read_in(const char *dir, const char *rel, char **data, size_t *len, char *err, size_t n) {
  PkgDir pd;
  const char *derr;
  if (!pkg_dir_open(&pd, dir, &derr)) {
    snprintf(err, n, "%s", derr);
    return false;
  }
  bool outside;
  bool ok = pkg_read_file(&pd, rel, SIZE_MAX / 2, data, len, &outside, err, n);
  pkg_dir_close(&pd);
  return ok;
}

/* File `rel` of packages a and b; `shown`: how messages name a's. */
static bool same_file(const char *a, const char *b, const char *rel, const char *shown, const Package *pkg,
                      bool weights, Diag *d) {
  char *x = NULL, *y = NULL, err[4096 + 128];
  size_t nx = 0, ny = 0;
  bool ok = read_in(a, rel, &x, &nx, err, sizeof err) && read_in(b, rel, &y, &ny, err, sizeof err);
  if (!ok) {
    diag_error(d, (SrcSpan){0}, "--verify: %s", err);
  } else if (nx != ny || memcmp(x, y, nx)) {
    size_t at = 0;
    while (at < nx && at < ny && x[at] == y[at]) at++;
    if (weights)
      diag_error(d, (SrcSpan){0}, "--verify: %s differs from a fresh compile at byte %zu (weight '%s')", shown, at,
                 weight_at(pkg, at));
    else
      diag_error(d, (SrcSpan){0}, "--verify: %s differs from a fresh compile at byte %zu", shown, at);
    ok = false;
  }
  free(x);
  free(y);
  return ok;
}

void orion_run_fill_probe_input(CpuTensor *t, const OrionTensorInfo *info, uint64_t *state) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < info->rank; i++) n *= (uint64_t)info->dims[i];
  size_t es = cpu_dtype_size(info->dtype);
  *t = (CpuTensor){.dtype = info->dtype, .rank = info->rank, .data = xcalloc(n ? n : 1, es)};
  memcpy(t->dims, info->dims, sizeof(int64_t) * info->rank);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = splitmix64(state);
    double u = (double)(r >> 11) * 0x1p-53 * 2.0 - 1.0;
    switch (info->dtype) {
    case MIL_DT_FP16: ((uint16_t *)t->data)[i] = fp16_from_double(u); break;
    case MIL_DT_FP32: ((float *)t->data)[i] = (float)u; break;
    case MIL_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)(r % 4); break;
    default: ((bool *)t->data)[i] = r & 1; break;
    }
  }
}

static bool same_outputs(const char *a, const char *b, Diag *d) {
  OrionProgram *pa = orion_open(a, NULL, d), *pb = pa ? orion_open(b, NULL, d) : NULL;
  bool ok = pa && pb;
  for (uint32_t fn = 0; ok && fn < orion_function_count(pa); fn++) {
    uint32_t nin = orion_input_count(pa, fn), nout = orion_output_count(pa, fn);
    CpuTensor *in = xcalloc(nin + 1, sizeof *in), *oa = xcalloc(nout + 1, sizeof *oa), *ob = xcalloc(nout + 1, sizeof *ob);
    uint64_t state = 1;
    for (uint32_t i = 0; i < nin; i++) orion_run_fill_probe_input(&in[i], orion_input(pa, fn, i), &state);
    CpuProgram *ca = cpu_prepare(pa, fn, CPU_NUMERICS_ANE, d), *cb = ca ? cpu_prepare(pb, fn, CPU_NUMERICS_ANE, d) : NULL;
    ok = ca && cb && cpu_run(ca, in, oa, d) && cpu_run(cb, in, ob, d);
    for (uint32_t i = 0; ok && i < nout; i++) {
      const OrionTensorInfo *info = orion_output(pa, fn, i);
      if (memcmp(oa[i].data, ob[i].data, (size_t)info->bytes)) {
        diag_error(d, (SrcSpan){0}, "--verify: output '%s' of function '%s' differs from a fresh compile's", info->name,
                   orion_function_name(pa, fn));
        ok = false;
      }
    }
    for (uint32_t i = 0; i < nin; i++) free(in[i].data);
    for (uint32_t i = 0; i < nout; i++) {
      cpu_tensor_free(&oa[i]);
      cpu_tensor_free(&ob[i]);
    }
    free(in);
    free(oa);
    free(ob);
    cpu_free(ca);
    cpu_free(cb);
  }
  orion_close(pa);
  orion_close(pb);
  return ok;
}

bool orion_run_verify_patch(const char *package, const char *shown, const char *source, const char *const *files,
                            const char *const *npy_names, uint32_t nfiles, bool verbose, Diag *d) {
  Package pkg;
  if (!package_read(package, &pkg, d)) return false;
  char *src = find_source(package, &pkg, source, d);
  const char *tmpdir = getenv("TMPDIR");
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/orion-verify-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  bool made = false, ok = src && same_source(src, &pkg, d);
  /* A killed run's fresh compile: its maker is gone (orion/temporaries.h). */
  if (ok) leftovers_clean(tmpdir && *tmpdir ? tmpdir : "/tmp", "orion-verify", NULL);
  if (ok && !(made = temp_make_dir(tmp))) {
    diag_error(d, (SrcSpan){0}, "--verify: cannot make a temporary directory: %s", strerror(errno));
    ok = false;
  }
  StrBuf out, label;
  sb_init(&label);
  sb_init(&out);
  sb_printf(&out, "%s/fresh.anepkg", tmp);
  ok = ok && fresh_compile(&pkg, src, out.data, files, npy_names, nfiles, verbose, d);
  for (uint32_t i = 0; ok && i < pkg.nfunctions; i++) {
    label.len = 0;
    sb_printf(&label, "%s/%s", shown, pkg.functions[i].mil_file);
    ok = same_file(package, out.data, pkg.functions[i].mil_file, label.data, &pkg, false, d);
  }
  if (ok) {
    label.len = 0;
    sb_printf(&label, "%s/%s", shown, PACKAGE_WEIGHTS);
    ok = same_file(package, out.data, PACKAGE_WEIGHTS, label.data, &pkg, true, d);
  }
  ok = ok && same_outputs(package, out.data, d);
  if (ok) printf("%s: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs\n", shown);
  if (made) temp_remove(tmp); /* our own directory, and its marker */
  sb_free(&out);
  sb_free(&label);
  free(src);
  package_free(&pkg);
  return ok;
}
