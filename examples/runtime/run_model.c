/*
 * run_model: the runtime's C API from end to end, as a small program (see
 * docs/runtime-api.md, which walks through it).
 *
 *   run_model PROGRAM [--function NAME] [--numerics fp32|ane] [--threads N]
 *             [--input NAME=FILE.npy ...] [--output-dir DIR] [--reload]
 *
 * It opens a compiled package (or a model directory holding model.mil),
 * lists its functions with their inputs, outputs and weights, fills the
 * inputs (from .npy files, or with a synthetic pattern), runs the function on
 * the CPU backend into buffers it owns, and prints a summary of each output
 * (optionally writing NAME.npy). With --reload it then waits for a line on
 * standard input — patch the package's weights meanwhile, e.g. with
 * `orion-run patch` — reloads the weights without re-reading the MIL, and
 * runs again. Exit status 0 on success, 1 on any error.
 */
#define _GNU_SOURCE /* getopt_long */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/cpu.h"
#include "orion/fp16.h"
#include "orion/npy.h"
#include "orion/runtime.h"

enum { MAX_INPUTS = 32 };

typedef struct Args {
  const char *program, *function, *output_dir;
  const char *input_names[MAX_INPUTS], *input_files[MAX_INPUTS];
  uint32_t ninputs, threads;
  CpuNumerics numerics;
  bool reload;
} Args;

/* libc's getopt_long: --opt VALUE and --opt=VALUE alike, as the orion tools take them. */
static bool parse(int argc, char **argv, Args *a) {
  *a = (Args){.numerics = CPU_NUMERICS_ANE};
  enum { RELOAD = 256, FUNCTION, OUTPUT_DIR, THREADS, NUMERICS, INPUT };
  static const struct option longopts[] = {
      {"reload", no_argument, NULL, RELOAD},         {"function", required_argument, NULL, FUNCTION},
      {"output-dir", required_argument, NULL, OUTPUT_DIR}, {"threads", required_argument, NULL, THREADS},
      {"numerics", required_argument, NULL, NUMERICS}, {"input", required_argument, NULL, INPUT},
      {NULL, 0, NULL, 0},
  };
  int c;
  opterr = 0; /* the usage text says it all */
  /* "-": operands in order, wherever they are. */
  while ((c = getopt_long(argc, argv, "-", longopts, NULL)) != -1) {
    const char *v = optarg;
    if (c == 1 && !a->program) a->program = v;
    else if (c == RELOAD) a->reload = true;
    else if (c == FUNCTION) a->function = v;
    else if (c == OUTPUT_DIR) a->output_dir = v;
    else if (c == THREADS) a->threads = (uint32_t)strtoul(v, NULL, 10);
    else if (c == NUMERICS && (!strcmp(v, "fp32") || !strcmp(v, "ane")))
      a->numerics = !strcmp(v, "fp32") ? CPU_NUMERICS_FP32 : CPU_NUMERICS_ANE;
    else if (c == INPUT && strchr(v, '=') && a->ninputs < MAX_INPUTS) {
      a->input_names[a->ninputs] = v; /* NAME=FILE: the name ends at '=' */
      a->input_files[a->ninputs++] = strchr(v, '=') + 1;
    } else return false;
  }
  return a->program != NULL && optind == argc;
}

static uint64_t elements(const OrionTensorInfo *t) {
  uint64_t n = 1;
  for (uint32_t k = 0; k < t->rank; k++) n *= (uint64_t)t->dims[k];
  return n;
}

static void print_type(const OrionTensorInfo *t) {
  printf("%s[", mil_dtype_name(t->dtype));
  for (uint32_t k = 0; k < t->rank; k++) printf(k ? ", %lld" : "%lld", (long long)t->dims[k]);
  putchar(']');
}

/* Element i of a CpuTensor as a double. */
static double value(const CpuTensor *t, uint64_t i) {
  switch (t->dtype) {
  case MIL_DT_FP16: return (double)fp16_to_float(((const uint16_t *)t->data)[i]);
  case MIL_DT_FP32: return (double)((const float *)t->data)[i];
  case MIL_DT_INT32: return (double)((const int32_t *)t->data)[i];
  case MIL_DT_BOOL: return ((const bool *)t->data)[i] ? 1.0 : 0.0;
  default: return (double)NAN;
  }
}

/* A buffer for tensor `info`, owned by the caller (cpu_run_into writes into it). */
static CpuTensor alloc_tensor(const OrionTensorInfo *info) {
  CpuTensor t = {.dtype = info->dtype, .rank = info->rank};
  memcpy(t.dims, info->dims, sizeof(int64_t) * info->rank);
  t.data = calloc(elements(info) ? elements(info) : 1, cpu_dtype_size(info->dtype));
  return t;
}

/* Fills input `info` from its .npy file (fp32 data converted for an fp16
 * input), or, with no file, with a fixed pattern: small integers for int32
 * (valid token ids and indices), a slow sine for floats. */
static bool fill_input(const OrionTensorInfo *info, const char *file, CpuTensor *t, Diag *d) {
  *t = alloc_tensor(info);
  uint64_t n = elements(info);
  if (!file) {
    for (uint64_t i = 0; i < n; i++) {
      float v = (float)sin(0.37 * (double)i);
      switch (info->dtype) {
      case MIL_DT_FP16: ((uint16_t *)t->data)[i] = fp16_from_float(v); break;
      case MIL_DT_FP32: ((float *)t->data)[i] = v; break;
      case MIL_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)(i % 97); break;
      case MIL_DT_BOOL: ((bool *)t->data)[i] = i % 2; break;
      default: break;
      }
    }
    return true;
  }
  NpyArray a, c;
  if (!npy_read(file, &a, d)) return false;
  /* The input's own dtype (MilDType is the file formats' OrionDType): the
   * API takes fp16, fp32, int32 and bool. */
  OrionDType want = info->dtype == MIL_DT_FP16 || info->dtype == MIL_DT_FP32 || info->dtype == MIL_DT_INT32
                        ? info->dtype
                        : MIL_DT_BOOL;
  bool ok = npy_convert(&a, want, &c, d);
  npy_free(&a);
  if (!ok) return false;
  if (c.nbytes != n * cpu_dtype_size(info->dtype)) {
    fprintf(stderr, "run_model: '%s' has %zu bytes; input '%s' needs %llu\n", file, c.nbytes, info->name,
            (unsigned long long)(n * cpu_dtype_size(info->dtype)));
    npy_free(&c);
    return false;
  }
  memcpy(t->data, c.data, c.nbytes);
  npy_free(&c);
  return true;
}

static void summarize(const OrionTensorInfo *info, const CpuTensor *t) {
  uint64_t n = elements(info);
  double lo = (double)INFINITY, hi = -(double)INFINITY, sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    double v = value(t, i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    sum += v;
  }
  printf("  %s: min %.6g max %.6g mean %.6g first", info->name, lo, hi, sum / (double)n);
  for (uint64_t i = 0; i < n && i < 4; i++) printf(" %.6g", value(t, i));
  putchar('\n');
}

static bool write_output(const char *dir, const OrionTensorInfo *info, const CpuTensor *t, Diag *d) {
  NpyArray a = {.dtype = info->dtype, .rank = info->rank, .data = t->data,
                .nbytes = elements(info) * cpu_dtype_size(info->dtype)};
  memcpy(a.dims, info->dims, sizeof(int64_t) * info->rank);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.npy", dir, info->name);
  return npy_write(path, &a, d);
}

static bool run_and_report(CpuProgram *cpu, const OrionProgram *p, uint32_t fn, const CpuTensor *in, CpuTensor *out,
                           const char *output_dir, Diag *d) {
  if (!cpu_run_into(cpu, in, out, d)) return false;
  printf("outputs:\n");
  for (uint32_t i = 0; i < orion_output_count(p, fn); i++) {
    summarize(orion_output(p, fn, i), &out[i]);
    if (output_dir && !write_output(output_dir, orion_output(p, fn, i), &out[i], d)) return false;
  }
  fflush(stdout);
  return true;
}

int main(int argc, char **argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    fputs("usage: run_model PROGRAM [--function NAME] [--numerics fp32|ane] [--threads N]\n"
          "                 [--input NAME=FILE.npy ...] [--output-dir DIR] [--reload]\n",
          stderr);
    return 1;
  }
  /* Messages about MIL statements point into files the SourceSet holds. */
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.program = "run_model";
  int rc = 1;
  CpuProgram *cpu = NULL;
  CpuTensor in[MAX_INPUTS] = {{0}}, out[MAX_INPUTS] = {{0}};

  /* 1. Open: the manifest and checksums are verified, the MIL parsed, the weights mapped. */
  OrionProgram *p = orion_open(a.program, NULL, &d);
  if (!p) goto done;

  /* 2. Describe: functions, then the chosen function's inputs, outputs and weights. */
  printf("%s: %u function(s)\n", a.program, orion_function_count(p));
  for (uint32_t f = 0; f < orion_function_count(p); f++)
    printf("  [%u] %s%s\n", f, orion_function_name(p, f),
           orion_function_has_dynamic_shapes(p, f) ? " (flexible shapes)" : "");
  uint32_t fn = a.function ? orion_function_find(p, a.function) : 0;
  if (fn == UINT32_MAX) {
    fprintf(stderr, "run_model: no function '%s'\n", a.function);
    goto done;
  }
  uint32_t nin = orion_input_count(p, fn), nout = orion_output_count(p, fn);
  if (nin > MAX_INPUTS || nout > MAX_INPUTS) {
    fprintf(stderr, "run_model: more than %d inputs or outputs\n", MAX_INPUTS);
    goto done;
  }
  printf("function %s: %u input(s), %u output(s), %u weight(s), generation %llu\n", orion_function_name(p, fn), nin,
         nout, orion_weight_count(p, fn), (unsigned long long)orion_weights_generation(p));
  for (uint32_t i = 0; i < nin; i++) {
    const OrionTensorInfo *t = orion_input(p, fn, i);
    printf("  input  %s: ", t->name);
    print_type(t);
    printf(" binding %u, %llu bytes\n", t->binding, (unsigned long long)t->bytes);
  }
  for (uint32_t i = 0; i < nout; i++) {
    const OrionTensorInfo *t = orion_output(p, fn, i);
    printf("  output %s: ", t->name);
    print_type(t);
    printf(" binding %u, %llu bytes\n", t->binding, (unsigned long long)t->bytes);
  }

  /* 3. Bind: one caller-owned buffer per input (filled) and per output. */
  for (uint32_t i = 0; i < nin; i++) {
    const OrionTensorInfo *t = orion_input(p, fn, i);
    const char *file = NULL;
    for (uint32_t k = 0; k < a.ninputs; k++)
      if (!strncmp(a.input_names[k], t->name, strlen(t->name)) && a.input_names[k][strlen(t->name)] == '=')
        file = a.input_files[k];
    if (!fill_input(t, file, &in[i], &d)) goto done;
    printf("  %s: %s\n", t->name, file ? file : "synthetic");
  }
  for (uint32_t i = 0; i < nout; i++) out[i] = alloc_tensor(orion_output(p, fn, i));

  /* 4. Prepare once (ops checked, buffers planned, threads started), then evaluate. */
  CpuOptions opt = {.numerics = a.numerics, .threads = a.threads};
  cpu = cpu_prepare_with(p, fn, &opt, &d);
  if (!cpu) goto done;
  printf("prepared: %s numerics, %u thread(s), %zu planned bytes\n", a.numerics == CPU_NUMERICS_FP32 ? "fp32" : "ane",
         cpu_threads(cpu), cpu_planned_bytes(cpu));
  if (!run_and_report(cpu, p, fn, in, out, a.output_dir, &d)) goto done;

  /* 5. Optionally: new weights patched into the package, picked up without re-planning. */
  if (a.reload) {
    printf("waiting: patch the package's weights, then press Enter\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) printf("(end of input)\n");
    bool changed = false;
    if (!orion_reload_weights(p, NULL, &changed, &d)) goto done;
    printf("reload: %s, generation %llu\n", changed ? "new weights" : "unchanged",
           (unsigned long long)orion_weights_generation(p));
    if (changed && (!cpu_reload_weights(cpu, &d) || !run_and_report(cpu, p, fn, in, out, a.output_dir, &d)))
      goto done;
  }
  rc = 0;

done:
  /* 6. Close: the backend first (it reads the program's weights), then the program. */
  cpu_free(cpu);
  for (uint32_t i = 0; i < MAX_INPUTS; i++) {
    free(in[i].data);
    free(out[i].data);
  }
  orion_close(p);
  srcset_free(&sources);
  return rc;
}
