/*
 * orionc's spelling of the options that shape a package. orionc parses its
 * command line with it, and the manifest records what it took
 * (CompileArguments) so that `orion-run patch --verify` can parse the same
 * arguments again and compile the same program.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <stdlib.h>
#include <string.h>

#include "orion/compile.h"

void orion_compile_args_init(OrionCompileArgs *a) {
  memset(a, 0, sizeof *a);
  orion_compile_options_init(&a->options);
  a->options.compile_args = a->compile_args;
  a->options.plugins = a->plugins;
  a->options.allow = a->allow;
  a->options.overrides = a->overrides;
  a->options.passes.pass_options.lora = a->lora;
  a->options.autodiff.trainable = a->trainable;
  a->options.autodiff.frozen = a->frozen;
}

void orion_compile_args_free(OrionCompileArgs *a) {
  OrionCompileOptions *o = &a->options;
  for (uint32_t i = 0; i < o->ncompile_args; i++) free((void *)(uintptr_t)a->compile_args[i]);
  for (uint32_t i = 0; i < o->noverrides; i++) free(a->override_names[i]);
  for (uint32_t i = 0; i < o->passes.pass_options.nlora; i++) free(a->lora_patterns[i]);
  o->ncompile_args = o->noverrides = o->passes.pass_options.nlora = 0;
}

/* Options naming files are recorded with absolute paths. */
static void record(OrionCompileArgs *a, const char *arg, const char *path) {
  OrionCompileOptions *o = &a->options;
  if (o->ncompile_args >= ORION_COMPILE_MAX_ARGS) return;
  char *abs = path ? realpath(path, NULL) : NULL;
  if (!abs) {
    a->compile_args[o->ncompile_args++] = xstrdup(arg);
    return;
  }
  size_t n = (size_t)(path - arg) + strlen(abs) + 1;
  char *s = xmalloc(n);
  snprintf(s, n, "%.*s%s", (int)(path - arg), arg, abs);
  free(abs);
  a->compile_args[o->ncompile_args++] = s;
}

static OrionArgStatus parse_lora(OrionCompileArgs *a, const char *arg, char *err, size_t errlen) {
  PassOptions *po = &a->options.passes.pass_options;
  const char *v = arg + 7, *colon = strchr(v, ':');
  if (po->nlora >= ORION_COMPILE_MAX_LORA) {
    snprintf(err, errlen, "too many --lora options (limit is %d)", ORION_COMPILE_MAX_LORA);
    return ORION_ARG_INVALID;
  }
  char *end = NULL;
  long rank = colon ? strtol(colon + 1, &end, 10) : 0;
  double alpha = (double)rank;
  if (end && *end == ':') {
    char *aend;
    alpha = strtod(end + 1, &aend);
    if (aend == end + 1 || *aend || !(alpha > 0) || alpha > 1e6) {
      snprintf(err, errlen, "invalid LoRA alpha in '%s'", arg);
      return ORION_ARG_INVALID;
    }
    end = aend;
  }
  if (!colon || colon == v || !end || *end || rank < 1 || rank > 4096) {
    snprintf(err, errlen, "'%s' is not --lora=PATTERN:RANK[:ALPHA] (RANK from 1 to 4096)", arg);
    return ORION_ARG_INVALID;
  }
  uint32_t k = po->nlora++;
  a->lora_patterns[k] = strndup(v, (size_t)(colon - v));
  a->lora[k] = (LoraSpec){.pattern = a->lora_patterns[k], .rank = (uint32_t)rank, .alpha = alpha};
  record(a, arg, NULL);
  return ORION_ARG_TAKEN;
}

static OrionArgStatus parse_override(OrionCompileArgs *a, const char *arg, char *err, size_t errlen) {
  OrionCompileOptions *o = &a->options;
  bool npy = arg[8] == '-'; /* --weight-override=NAME=FILE.npy, not --weights-override=FILE */
  const char *v = arg + (npy ? 18 : 19), *eq = npy ? strchr(v, '=') : NULL;
  if (npy && (!eq || eq == v || !eq[1])) {
    snprintf(err, errlen, "'%s' is not --weight-override=NAME=FILE.npy", arg);
    return ORION_ARG_INVALID;
  }
  if (!npy && !*v) {
    snprintf(err, errlen, "%s needs a file", arg);
    return ORION_ARG_INVALID;
  }
  if (o->noverrides >= ORION_COMPILE_MAX_OVERRIDES) {
    snprintf(err, errlen, "too many weight overrides (limit is %d)", ORION_COMPILE_MAX_OVERRIDES);
    return ORION_ARG_INVALID;
  }
  uint32_t k = o->noverrides++;
  a->override_names[k] = npy ? strndup(v, (size_t)(eq - v)) : NULL;
  a->overrides[k] = (OrionWeightOverride){.name = a->override_names[k], .file = npy ? eq + 1 : v};
  record(a, arg, npy ? eq + 1 : v);
  return ORION_ARG_TAKEN;
}

/* A repeatable option naming something, kept in `list` of at most `limit`. */
static OrionArgStatus add_to(OrionCompileArgs *a, const char **list, uint32_t *n, uint32_t limit, const char *what,
                             const char *arg, const char *value, const char *path, char *err, size_t errlen) {
  if (*n >= limit) {
    snprintf(err, errlen, "too many %s options (limit is %u)", what, limit);
    return ORION_ARG_INVALID;
  }
  list[(*n)++] = value;
  record(a, arg, path);
  return ORION_ARG_TAKEN;
}

OrionArgStatus orion_compile_args_parse(OrionCompileArgs *a, const char *arg, char *err, size_t errlen) {
  OrionCompileOptions *o = &a->options;
  if (!strncmp(arg, "--target=", 9)) {
    if (!mil_target_from_name(arg + 9, &o->target)) {
      snprintf(err, errlen, "unknown target '%s' (expected ios16, ios17 or ios18)", arg + 9);
      return ORION_ARG_INVALID;
    }
    o->target_given = true;
  } else if (!strncmp(arg, "--chip=", 7)) {
    o->chip = arg + 7; /* checked against the constraint table by orion_compile_options_resolve */
  } else if (!strcmp(arg, "-O0") || !strcmp(arg, "-O1")) {
    o->passes.pipeline = arg + 1;
  } else if (!strncmp(arg, "-O", 2)) {
    snprintf(err, errlen, "unknown optimization level '%s' (expected -O0 or -O1)", arg);
    return ORION_ARG_INVALID;
  } else if (!strncmp(arg, "--passes=", 9)) {
    o->passes.passes = arg + 9;
  } else if (!strncmp(arg, "--lora=", 7)) {
    return parse_lora(a, arg, err, errlen);
  } else if (!strcmp(arg, "--fp16-range-guard")) {
    o->passes.pass_options.fp16_range_guard = true;
  } else if (!strncmp(arg, "--load-pass=", 12)) {
    return add_to(a, a->plugins, &o->nplugins, ORION_COMPILE_MAX_PLUGINS, "--load-pass", arg, arg + 12, arg + 12, err,
                  errlen);
  } else if (!strncmp(arg, "--allow=", 8)) {
    return add_to(a, a->allow, &o->nallow, ORION_COMPILE_MAX_ALLOW, "--allow", arg, arg + 8, NULL, err, errlen);
  } else if (!strcmp(arg, "--no-lint")) {
    o->no_lint = true;
  } else if (!strcmp(arg, "--no-dedup")) {
    o->no_dedup = true;
  } else if (!strcmp(arg, "--clamp-fp16")) {
    o->clamp_fp16 = true;
  } else if (!strncmp(arg, "--weights-override=", 19) || !strncmp(arg, "--weight-override=", 18)) {
    return parse_override(a, arg, err, errlen);
  } else if (!strcmp(arg, "--train") || !strncmp(arg, "--train=", 8)) {
    o->train = true;
    o->train_function = arg[7] ? arg + 8 : NULL;
    if (o->train_function && !o->train_function[0]) {
      snprintf(err, errlen, "--train= needs a function name (or --train alone: the one with an output 'loss')");
      return ORION_ARG_INVALID;
    }
  } else if (!strncmp(arg, "--gather-grad=", 14)) {
    bool rows = !strcmp(arg + 14, "rows");
    if (!rows && strcmp(arg + 14, "onehot")) {
      snprintf(err, errlen, "unknown --gather-grad form '%s' (expected onehot or rows)", arg + 14);
      return ORION_ARG_INVALID;
    }
    o->autodiff.gather_rows = rows;
    a->gather_grad = arg;
  } else if (!strncmp(arg, "--trainable=", 12) || !strncmp(arg, "--frozen=", 9)) {
    bool trainable = arg[2] == 't';
    const char *glob = arg + (trainable ? 12 : 9);
    if (!glob[0]) {
      snprintf(err, errlen, "%s needs a glob (a param name pattern, e.g. 'layers.*')", trainable ? "--trainable" : "--frozen");
      return ORION_ARG_INVALID;
    }
    return trainable ? add_to(a, a->trainable, &o->autodiff.ntrainable, ORION_COMPILE_MAX_GLOBS, "--trainable", arg,
                              glob, NULL, err, errlen)
                     : add_to(a, a->frozen, &o->autodiff.nfrozen, ORION_COMPILE_MAX_GLOBS, "--frozen", arg, glob,
                              NULL, err, errlen);
  } else {
    return ORION_ARG_NOT_MINE;
  }
  record(a, arg, NULL);
  return ORION_ARG_TAKEN;
}
