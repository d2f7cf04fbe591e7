/*
 * libFuzzer target for the confinement of the names a package uses as paths
 * (orion/pkg_paths.h). The input is up to nine newline-separated fields put
 * into a valid manifest: the MIL file name, the weights file, an input's, an
 * output's and a weight's name, the weight's dtype, offset, byte count and
 * dimension. Whatever the manifest reader accepts must be confined: a MIL
 * file and an output name are plain names, and each field is also judged by
 * pkg_name_ok directly, whose acceptance must mean a relative path of real
 * components only. Names accepted as relative paths are then looked up by
 * pkg_file_inside in a package whose links lead out ("up", "abs"), in
 * ("in"), nowhere ("gone") and to themselves ("loop"): true must mean the
 * file (or its longest existing prefix) is really inside the package.
 */
#define _XOPEN_SOURCE 700 /* realpath, mkdtemp, symlink */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/manifest.h"
#include "orion/pkg_paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { NFIELDS = 9 };
static const char *const defaults[NFIELDS] = {"model.mil", "weights/weight.bin", "x", "y", "w", "fp16", "64", "8", "4"};

static const char template_text[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
    "<plist version=\"1.0\">\n"
    "  <dict>\n"
    "    <key>FormatVersion</key>\n"
    "    <integer>1</integer>\n"
    "    <key>CompilerVersion</key>\n"
    "    <string>orionc 0.1.0</string>\n"
    "    <key>Target</key>\n"
    "    <string>ios18</string>\n"
    "    <key>ProgramVersion</key>\n"
    "    <string>1.3</string>\n"
    "    <key>Source</key>\n"
    "    <string>s.oir</string>\n"
    "    <key>SourceSHA256</key>\n"
    "    <string>e295ae5c3bb76f375cde560ee089ddc06faafd83d7e1113b4cd864381e8b9b23</string>\n"
    "    <key>WeightsFile</key>\n"
    "    <string>@1</string>\n"
    "    <key>WeightsLayoutXXH64</key>\n"
    "    <string>6b580df8cb8a46d1</string>\n"
    "    <key>WeightsSize</key>\n"
    "    <integer>136</integer>\n"
    "    <key>WeightsGeneration</key>\n"
    "    <integer>0</integer>\n"
    "    <key>MinimumSurfaceBytes</key>\n"
    "    <integer>49152</integer>\n"
    "    <key>Functions</key>\n"
    "    <array>\n"
    "      <dict>\n"
    "        <key>Name</key>\n"
    "        <string>main</string>\n"
    "        <key>MILFile</key>\n"
    "        <string>@0</string>\n"
    "        <key>MILXXH64</key>\n"
    "        <string>113da1eaf3ba9ac3</string>\n"
    "        <key>SurfaceBytes</key>\n"
    "        <integer>49152</integer>\n"
    "        <key>Inputs</key>\n"
    "        <array>\n"
    "          <dict>\n"
    "            <key>Name</key>\n"
    "            <string>@2</string>\n"
    "            <key>MILName</key>\n"
    "            <string>x</string>\n"
    "            <key>DType</key>\n"
    "            <string>fp16</string>\n"
    "            <key>Shape</key>\n"
    "            <array>\n"
    "              <integer>1</integer>\n"
    "              <integer>4</integer>\n"
    "            </array>\n"
    "            <key>Binding</key>\n"
    "            <integer>0</integer>\n"
    "            <key>Bytes</key>\n"
    "            <integer>8</integer>\n"
    "            <key>SurfaceBytes</key>\n"
    "            <integer>49152</integer>\n"
    "          </dict>\n"
    "        </array>\n"
    "        <key>Outputs</key>\n"
    "        <array>\n"
    "          <dict>\n"
    "            <key>Name</key>\n"
    "            <string>@3</string>\n"
    "            <key>MILName</key>\n"
    "            <string>y</string>\n"
    "            <key>DType</key>\n"
    "            <string>fp16</string>\n"
    "            <key>Shape</key>\n"
    "            <array>\n"
    "              <integer>1</integer>\n"
    "              <integer>4</integer>\n"
    "            </array>\n"
    "            <key>Binding</key>\n"
    "            <integer>0</integer>\n"
    "            <key>Bytes</key>\n"
    "            <integer>8</integer>\n"
    "            <key>SurfaceBytes</key>\n"
    "            <integer>49152</integer>\n"
    "          </dict>\n"
    "        </array>\n"
    "        <key>Weights</key>\n"
    "        <array>\n"
    "          <dict>\n"
    "            <key>Name</key>\n"
    "            <string>@4</string>\n"
    "            <key>MILName</key>\n"
    "            <string>w</string>\n"
    "            <key>DType</key>\n"
    "            <string>@5</string>\n"
    "            <key>Shape</key>\n"
    "            <array>\n"
    "              <integer>@8</integer>\n"
    "            </array>\n"
    "            <key>Offset</key>\n"
    "            <integer>@6</integer>\n"
    "            <key>Bytes</key>\n"
    "            <integer>@7</integer>\n"
    "            <key>XXH64</key>\n"
    "            <string>34c96acdcadb1bbb</string>\n"
    "          </dict>\n"
    "        </array>\n"
    "      </dict>\n"
    "    </array>\n"
    "    <key>CompileArguments</key>\n"
    "    <array>\n"
    "      <string>--no-lint</string>\n"
    "    </array>\n"
    "    <key>Lint</key>\n"
    "    <dict>\n"
    "      <key>Checked</key>\n"
    "      <false/>\n"
    "      <key>Errors</key>\n"
    "      <integer>0</integer>\n"
    "      <key>Warnings</key>\n"
    "      <integer>0</integer>\n"
    "    </dict>\n"
    "  </dict>\n"
    "</plist>\n";

/* The manifest with @0..@8 replaced by the fields, XML-escaped. */
static char *fill_template(char *const fields[NFIELDS]) {
  StrBuf sb;
  sb_init(&sb);
  for (const char *c = template_text; *c; c++) {
    if (*c != '@') {
      sb_putc(&sb, *c);
      continue;
    }
    const char *f = fields[*++c - '0'];
    for (; *f; f++) {
      if (*f == '&') sb_puts(&sb, "&amp;");
      else if (*f == '<') sb_puts(&sb, "&lt;");
      else if (*f == '>') sb_puts(&sb, "&gt;");
      else sb_putc(&sb, *f);
    }
  }
  return sb.data;
}

/* What pkg_name_ok's acceptance promises, checked from the outside. */
static void check_name(const char *name, PkgNameKind kind) {
  char why[128];
  if (!pkg_name_ok(name, kind, why, sizeof why)) {
    if (!why[0]) abort(); /* a refusal says why */
    return;
  }
  if (!name[0] || name[0] == '/') abort();
  if (kind == PKG_NAME_PLAIN && strchr(name, '/')) abort();
  for (const unsigned char *c = (const unsigned char *)name; *c; c++)
    if (*c < 0x20 || *c == 0x7f) abort();
  char *copy = xstrdup(name), *save = NULL;
  size_t components = 0, slashes = 0;
  for (const char *c = name; *c; c++) slashes += *c == '/';
  for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
    if (!strcmp(part, ".") || !strcmp(part, "..")) abort();
    components++;
  }
  if (components != slashes + 1) abort(); /* no empty component */
  free(copy);
}

static char root[64], real_root[4096];

static void remove_package(void) { remove_tree(root); }

static void make_package(void) {
  if (root[0]) return;
  snprintf(root, sizeof root, "/tmp/fuzz-pkg-paths-XXXXXX");
  if (!mkdtemp(root)) abort();
  atexit(remove_package);
  char p[128];
  snprintf(p, sizeof p, "%s/weights", root);
  mkdir(p, 0755);
  static const char *const links[][2] = {{"up", ".."}, {"abs", "/etc"}, {"in", "weights"}, {"gone", "nothing"},
                                         {"loop", "loop"}, {"weights/back", "../up"}};
  for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
    snprintf(p, sizeof p, "%s/%s", root, links[i][0]);
    if (symlink(links[i][1], p) != 0) abort();
  }
  if (!realpath(root, real_root)) abort();
}

/* pkg_file_inside's true: the longest existing prefix of the path lies in the package. */
static void check_inside(const char *rel) {
  char why[256];
  bool inside = pkg_file_inside(root, rel, why, sizeof why);
  if (!inside) {
    if (!why[0]) abort();
    return;
  }
  /* No rule by the path's first component: "up/<the package's own name>/x"
   * leaves through a link and comes back in, and is inside (the fuzzer finds
   * the scratch directory's name). Where the path really ends is the oracle. */
  size_t n = strlen(root) + strlen(rel) + 2;
  char *path = xmalloc(n);
  snprintf(path, n, "%s/%s", root, rel);
  for (;;) {
    char real[4096];
    if (realpath(path, real)) {
      size_t k = strlen(real_root);
      if (strncmp(real, real_root, k) != 0 || (real[k] != '/' && real[k] != 0)) abort();
      break;
    }
    char *slash = strrchr(path, '/');
    if (!slash || slash - path < (long)strlen(root)) break;
    *slash = 0;
  }
  free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  make_package();
  char *text = xmalloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  char *fields[NFIELDS];
  char *c = text;
  for (int i = 0; i < NFIELDS; i++) {
    char *nl = c ? strchr(c, '\n') : NULL;
    if (nl) *nl = 0;
    fields[i] = c ? c : NULL;
    c = nl ? nl + 1 : NULL;
  }
  char *copies[NFIELDS] = {0};
  for (int i = 0; i < NFIELDS; i++)
    if (!fields[i]) fields[i] = copies[i] = xstrdup(defaults[i]);
  for (int i = 0; i < 5; i++) {
    check_name(fields[i], PKG_NAME_PLAIN);
    check_name(fields[i], PKG_NAME_RELPATH);
    char why[128];
    if (pkg_name_ok(fields[i], PKG_NAME_RELPATH, why, sizeof why)) check_inside(fields[i]);
  }
  char *manifest = fill_template(fields);
  StrBuf diags;
  sb_init(&diags);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &diags;
  Package pkg;
  if (package_parse_manifest(manifest, strlen(manifest), "fuzz", &pkg, &d)) {
    char why[128];
    for (uint32_t i = 0; i < pkg.nfunctions; i++) {
      const PkgFunction *f = &pkg.functions[i];
      if (!pkg_name_ok(f->mil_file, PKG_NAME_PLAIN, why, sizeof why)) abort();
      for (uint32_t k = 0; k < f->noutputs; k++)
        if (!pkg_name_ok(f->outputs[k].name, PKG_NAME_PLAIN, why, sizeof why)) abort();
      for (uint32_t k = 0; k < f->nweights; k++) {
        const PkgTensor *w = &f->weights[k];
        uint64_t n = orion_dtype_size(w->dtype);
        for (uint32_t r = 0; r < w->rank; r++) n *= (uint64_t)w->dims[r];
        if (n != w->bytes) abort();
      }
    }
    package_free(&pkg);
  } else if (!diags.len) {
    abort(); /* a rejection must say why */
  }
  sb_free(&diags);
  free(manifest);
  for (int i = 0; i < NFIELDS; i++) free(copies[i]);
  free(text);
  return 0;
}
