/*
 * orionc: the orion compiler driver. Parses options and calls the libraries;
 * no compiler logic lives here.
 *
 * Exit codes: 0 success, 1 errors in the input, 2 usage errors.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "orion/frontend.h"
#include "orion/passes.h"
#include "orion/weights.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef enum Emit { EMIT_NONE, EMIT_OIR } Emit;

typedef struct Options {
  const char *input;
  const char *output;
  Emit emit;
  bool inline_calls;
  bool summary;
  bool check_weights;
  bool werror;
  bool no_warnings;
  uint32_t error_limit;
} Options;

static void usage(FILE *out) {
  fputs("usage: orionc [options] FILE.oir\n"
        "\n"
        "Compiles an orion graph (.oir) for Apple's Neural Engine.\n"
        "This version parses, builds and verifies the graph, checks its weight files,\n"
        "and prints the canonical IR and a summary.\n"
        "\n"
        "options:\n"
        "  --emit=oir           print the canonical .oir of the verified graph\n"
        "  -o FILE              write the emitted text to FILE (atomically) instead of stdout\n"
        "  --inline             expand function calls before emitting\n"
        "  --summary            print functions, inputs, outputs, weights and op counts\n"
        "                       (of the graph with calls expanded)\n"
        "  --no-weight-check    do not open the safetensors/npy files that params name\n"
        "  -Werror              treat warnings as errors\n"
        "  -w                   do not print warnings\n"
        "  -ferror-limit=N      stop after N errors (default 20; 0 = no limit)\n"
        "  -h, --help           show this help\n"
        "  --version            show the version\n"
        "\n"
        "FILE may be '-' for standard input.\n"
        "exit status: 0 success, 1 errors in the input, 2 usage error\n",
        out);
}

static int usage_error(const char *fmt, ...) ORION_PRINTF(1, 2);
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("orionc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry 'orionc --help' for more information.\n", stderr);
  return EXIT_USAGE;
}

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  *o = (Options){.check_weights = true, .error_limit = DEFAULT_ERROR_LIMIT};
  bool only_files = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_files || a[0] != '-' || !strcmp(a, "-")) {
      if (o->input) return usage_error("more than one input file ('%s')", a);
      o->input = a;
    } else if (!strcmp(a, "--")) {
      only_files = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return EXIT_OK;
    } else if (!strcmp(a, "--version")) {
      printf("orionc %s\n", ORION_VERSION);
      return EXIT_OK;
    } else if (!strncmp(a, "--emit=", 7)) {
      if (!strcmp(a + 7, "oir")) o->emit = EMIT_OIR;
      else return usage_error("unknown --emit kind '%s' (expected oir)", a + 7);
    } else if (!strcmp(a, "--emit")) {
      return usage_error("%s needs a value, e.g. --emit=oir", a);
    } else if (!strcmp(a, "-o")) {
      if (++i >= argc) return usage_error("%s needs a file name", a);
      o->output = argv[i];
    } else if (!strcmp(a, "--inline")) {
      o->inline_calls = true;
    } else if (!strcmp(a, "--summary")) {
      o->summary = true;
    } else if (!strcmp(a, "--no-weight-check")) {
      o->check_weights = false;
    } else if (!strcmp(a, "-Werror")) {
      o->werror = true;
    } else if (!strcmp(a, "-w")) {
      o->no_warnings = true;
    } else if (!strncmp(a, "-ferror-limit=", 14)) {
      char *end;
      long n = strtol(a + 14, &end, 10);
      if (!a[14] || *end || n < 0 || n > 1000000) return usage_error("invalid error limit '%s'", a + 14);
      o->error_limit = (uint32_t)n;
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  if (!o->input) return usage_error("%s", "no input file");
  if (o->output && o->emit == EMIT_NONE) return usage_error("%s", "-o needs something to write; add --emit=oir");
  return -1;
}

/* "512 B", "14.2 KiB", "27.04 MiB": sizes people read at a glance. */
static const char *human_bytes(uint64_t n, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)n);
    return buf;
  }
  double v = (double)n / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

static void print_summary(IrModule *m, const char *input, FILE *out) {
  uint32_t nfuncs = 0;
  for (IrFuncId f = 1; f < m->nfuncs; f++) nfuncs += !m->funcs[f].dead;
  fprintf(out, "%s: %u function%s\n", input, nfuncs, nfuncs == 1 ? "" : "s");
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    uint64_t nparams = 0, elements = 0, bytes = 0, nconsts = 0;
    for (uint32_t i = 0; i < fn->ndecls; i++) {
      IrValue *v = ir_value(m, fn->decls[i]);
      if (v->kind != VK_PARAM) {
        nconsts++;
        continue;
      }
      nparams++;
      elements += ir_type_elements(&v->type);
      bytes += ir_type_elements(&v->type) * ir_dtype_size(v->type.dtype);
    }
    char size[32];
    fprintf(out, "func %s: %u input%s, %u output%s, %u ops, %llu params (%llu weights, %s), %llu consts\n", fn->name,
            fn->ninputs, fn->ninputs == 1 ? "" : "s", fn->noutputs, fn->noutputs == 1 ? "" : "s", fn->nops,
            (unsigned long long)nparams, (unsigned long long)elements, human_bytes(bytes, size, sizeof size),
            (unsigned long long)nconsts);
    StrBuf sb;
    sb_init(&sb);
    for (uint32_t i = 0; i < fn->ninputs; i++) {
      IrValue *v = ir_value(m, fn->inputs[i]);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      fprintf(out, "  input  %s: %s\n", v->name, sb.data);
    }
    for (uint32_t i = 0; i < fn->noutputs; i++) {
      IrValue *v = ir_value(m, fn->outputs[i].value);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      fprintf(out, "  output %s: %s\n", fn->outputs[i].name, sb.data);
    }
    uint32_t counts[OP_COUNT] = {0};
    IR_FOR_EACH_OP(m, f, op) counts[ir_op(m, op)->kind]++;
    sb.len = 0;
    for (int k = 0; k < OP_COUNT; k++)
      if (counts[k]) sb_printf(&sb, "%s%s %u", sb.len ? ", " : "", ir_op_info((IrOpKind)k)->name, counts[k]);
    if (sb.len) fprintf(out, "  ops: %s\n", sb.data);
    sb_free(&sb);
  }
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) return rc;

  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.warnings_as_errors = o.werror;
  d.error_limit = o.error_limit;
  d.suppress_warnings = o.no_warnings;

  rc = EXIT_INPUT;
  StrBuf text;
  sb_init(&text);
  IrModule *m = oir_parse_file(o.input, &d);
  if (!m) goto done;
  if (o.emit == EMIT_OIR && !o.inline_calls) ir_print_module(m, &text);
  bool need_flat = o.inline_calls || o.summary || o.check_weights;
  if (need_flat && (!pass_inline(m, &d) || !ir_verify(m, &d))) goto done;
  if (o.check_weights && !weights_check_sources(m, &d)) goto done;
  if (o.emit == EMIT_OIR && o.inline_calls) ir_print_module(m, &text);
  if (diag_has_errors(&d)) goto done;
  if (o.emit != EMIT_NONE) {
    const char *err;
    if (o.output) {
      if (!write_file_atomic(o.output, text.data ? text.data : "", text.len, &err)) {
        fprintf(stderr, "orionc: error: cannot write '%s': %s\n", o.output, err);
        goto done;
      }
    } else {
      fwrite(text.data ? text.data : "", 1, text.len, stdout);
    }
  }
  if (o.summary) print_summary(m, o.input, stdout);
  rc = EXIT_OK;
done:
  sb_free(&text);
  ir_module_free(m);
  srcset_free(&sources);
  return rc;
}
