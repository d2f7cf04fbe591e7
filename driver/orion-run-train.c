/*
 * `orion-run train`: trains a package that has a training contract. Parses
 * options into OrionTrainOptions, makes the working directory, prints
 * progress and the summary; the loop is the training runtime's
 * (orion/train_loop.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "orion-run.h"
#include "orion/train_loop.h"

enum {
  OPT_DATA = 1, OPT_STEPS, OPT_LR, OPT_OPTIMIZER, OPT_MOMENTUM, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_WEIGHT_DECAY,
  OPT_WARMUP, OPT_SCHEDULE, OPT_MIN_LR, OPT_CLIP_GRAD, OPT_ACCUM, OPT_NUMERICS, OPT_BACKEND, OPT_SEED, OPT_SHUFFLE,
  OPT_INPUT, OPT_LOG, OPT_CHECKPOINT_DIR, OPT_CHECKPOINT_EVERY, OPT_STOP_AFTER, OPT_RESUME, OPT_EXPORT, OPT_EVAL_DATA,
  OPT_EVAL_EVERY, OPT_PROFILE, OPT_LORA, OPT_ADAPTER, OPT_EXPORT_ADAPTER, OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP, OPT_VERBOSE,
  OPT_HELP,
};

static const CliOption train_options[] = {
    {OPT_DATA, 0, "data", CLI_VALUE, 0, " FILE",
     "token ids (required): a 1-D integer .npy, or raw little-endian\n"
     "uint16 (any other name, llama2.c's .bin)",
     "a file"},
    {OPT_STEPS, 0, "steps", CLI_VALUE, 0, " N", "optimizer steps to run (required)", "a number"},
    {OPT_LR, 0, "lr", CLI_VALUE, 0, " LR", "peak learning rate (required)", "a number"},
    {OPT_OPTIMIZER, 0, "optimizer", CLI_VALUE, CLI_WORD, " NAME", "adamw (default) or sgd", "adamw or sgd"},
    {OPT_MOMENTUM, 0, "momentum", CLI_VALUE, 0, " M", "SGD momentum (default: 0)", "a number"},
    {OPT_BETA1, 0, "beta1", CLI_VALUE, 0, " B1", "AdamW beta1 (default: 0.9)", "a number"},
    {OPT_BETA2, 0, "beta2", CLI_VALUE, 0, " B2", "AdamW beta2 (default: 0.999)", "a number"},
    {OPT_EPS, 0, "eps", CLI_VALUE, 0, " E", "AdamW epsilon (default: 1e-8)", "a number"},
    {OPT_WEIGHT_DECAY, 0, "weight-decay", CLI_VALUE, 0, " WD",
     "weight decay of params of rank >= 2 (default: 0.01 with\n"
     "adamw, decoupled; 0 with sgd)",
     "a number"},
    {OPT_WARMUP, 0, "warmup", CLI_VALUE, 0, " K", "linear warmup over the first K steps (default: 0)", "a number"},
    {OPT_SCHEDULE, 0, "schedule", CLI_VALUE, CLI_WORD, " NAME",
     "constant (default) or cosine (to --min-lr at the last step)", "constant or cosine"},
    {OPT_MIN_LR, 0, "min-lr", CLI_VALUE, 0, " LR", "the cosine schedule's floor (default: 0)", "a number"},
    {OPT_CLIP_GRAD, 0, "clip-grad", CLI_VALUE, 0, " NORM", "clip gradients to this global L2 norm (default: off)",
     "a number"},
    {OPT_ACCUM, 0, "accum", CLI_VALUE, 0, " K", "batches per optimizer step (default: 1)", "a number"},
    {OPT_NUMERICS, 0, "numerics", CLI_VALUE, CLI_WORD, " MODE",
     "ane (default: fp16 results as on the device, dynamic loss\n"
     "scaling) or fp32 (no loss scaling)",
     "ane or fp32"},
    {OPT_BACKEND, 0, "backend", CLI_VALUE, CLI_WORD, " NAME", "the backend (default: cpu)", "a backend name"},
    ORION_RUN_ANE_LIMIT_OPTIONS(OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP),
    {OPT_SEED, 0, "seed", CLI_VALUE, 0, " S", "the shuffle's seed (default: 0)", "a number"},
    {OPT_SHUFFLE, 0, "shuffle", CLI_NO_VALUE, 0, NULL, "permute the windows once per epoch (default: in order)", NULL},
    {OPT_INPUT, 0, "input", CLI_VALUE, 0, " NAME=FILE.npy", "a fixed forward input other than tokens and targets;\n"
     "repeatable", "NAME=FILE.npy"},
    {OPT_LOG, 0, "log", CLI_VALUE, 0, " FILE.jsonl", "one JSON object per step, appended to when resuming\n"
     "(default: none)", "a file"},
    {OPT_CHECKPOINT_DIR, 0, "checkpoint-dir", CLI_VALUE, 0, " DIR", "write checkpoints there (default: none)",
     "a directory"},
    {OPT_CHECKPOINT_EVERY, 0, "checkpoint-every", CLI_VALUE, 0, " K",
     "a checkpoint every K steps and at the end (default: 0, only\n"
     "at the end)",
     "a number"},
    {OPT_STOP_AFTER, 0, "stop-after", CLI_VALUE, 0, " K",
     "stop after step K with a checkpoint, as an interrupted run\n"
     "(the schedule stays that of --steps; --resume continues)",
     "a number"},
    {OPT_RESUME, 0, "resume", CLI_VALUE, 0, " DIR",
     "continue from a checkpoint (or a directory's latest one) of\n"
     "this package, bit-identical to an uninterrupted run (default:\n"
     "start from the package's weights)",
     "a checkpoint"},
    {OPT_EXPORT, 0, "export", CLI_VALUE, 0, " FILE.safetensors",
     "write the trained fp32 weights by param name at the end\n"
     "(orion-run patch takes the file; default: none)",
     "a file"},
    {OPT_EVAL_DATA, 0, "eval-data", CLI_VALUE, 0, " FILE", "token ids to evaluate on (forward only, mean loss;\n"
     "default: none)",
     "a file"},
    {OPT_EVAL_EVERY, 0, "eval-every", CLI_VALUE, 0, " K",
     "evaluate every K steps (default: 0, after the last step)", "a number"},
    {OPT_PROFILE, 0, "profile", CLI_NO_VALUE, 0, NULL,
     "time every op of the forward and the backward program; at the end,\n"
     "print each program's time per op kind and its 10 slowest statements\n"
     "to stderr (the steps are slower while timed)", NULL},
    {OPT_LORA, 0, "lora", CLI_NO_VALUE, 0, NULL,
     "train the LoRA adapter inputs of a package compiled with\n"
     "orionc --train --lora (its weights stay as they are)",
     NULL},
    {OPT_ADAPTER, 0, "adapter", CLI_VALUE, 0, " FILE.safetensors",
     "--lora: the adapters' start values, PEFT names (default:\n"
     "PEFT's init, lora_A uniform from --seed, lora_B zero)",
     "a file"},
    {OPT_EXPORT_ADAPTER, 0, "export-adapter", CLI_VALUE, 0, " DIR",
     "--lora: write the trained adapters as a PEFT adapter\n"
     "directory (adapter_model.safetensors, fp32, and\n"
     "adapter_config.json) at the end",
     "a directory"},
    {OPT_VERBOSE, 'v', "verbose", CLI_NO_VALUE, 0, NULL,
     "name the backend and what it says of itself before the\n"
     "run, and what it used after (as orion-run -v)",
     NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec train_spec = {
    .program = "orion-run train",
    .usage = "usage: orion-run train PACKAGE --data FILE --steps N --lr LR [options]\n",
    .description = "Trains a package that has a training contract (orionc --train, or\n"
                   "--train-contract): per step the forward and backward programs run on the\n"
                   "backend, the optimizer updates fp32 master weights on the CPU, and the\n"
                   "changed weights go into a working copy of the package, which the backend\n"
                   "takes up without compiling. The package itself is not changed; the working\n"
                   "copy lives in a temporary directory orion-train-XXXXXX under $TMPDIR (or\n"
                   "/tmp), removed at the end. With --lora only the adapter inputs of a LoRA\n"
                   "package train, bound as inputs each step: no weight changes at all.\n"
                   "docs/training.md and docs/lora.md have the details.\n",
    .options = train_options,
    .noptions = sizeof train_options / sizeof *train_options,
    .epilogue = "exit status: 0 success, 1 errors (data, package, a step), 2 usage error\n",
    .help_column = 30,
};

#define usage_error(...) cli_usage_error("orion-run train", __VA_ARGS__)
#define MAX_INPUTS 64

typedef struct TrainArgs {
  OrionTrainOptions o;
  bool data, steps, lr, weight_decay_given, verbose;
  OrionTrainInputFile inputs[MAX_INPUTS];
  char *input_names[MAX_INPUTS];
} TrainArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  TrainArgs *a = ctx;
  OrionTrainOptions *o = &a->o;
  double x;
  uint64_t n;
  switch (id) {
  case OPT_HELP: cli_print_help(&train_spec, stdout); return 0;
  case OPT_DATA: o->data = v, a->data = true; return -1;
  case OPT_EVAL_DATA: o->eval_data = v; return -1;
  case OPT_LOG: o->log = v; return -1;
  case OPT_CHECKPOINT_DIR: o->checkpoint_dir = v; return -1;
  case OPT_RESUME: o->resume = v; return -1;
  case OPT_EXPORT: o->export_path = v; return -1;
  case OPT_BACKEND: o->backend = v; return -1;
  case OPT_SHUFFLE: o->shuffle = true; return -1;
  case OPT_LORA: o->lora = true; return -1;
  case OPT_PROFILE: o->profile = true; return -1;
  case OPT_ADAPTER: o->adapter_init = v; return -1;
  case OPT_EXPORT_ADAPTER: o->export_adapter = v; return -1;
  case OPT_VERBOSE: a->verbose = true; return -1;
  case OPT_COMPILE_BUDGET:
    return orion_run_take_ane_limit("orion-run train", "--ane-compile-budget", v, &o->backend_options.compile_budget);
  case OPT_RESIDENT_CAP:
    return orion_run_take_ane_limit("orion-run train", "--ane-resident-cap", v, &o->backend_options.resident_cap);
  case OPT_OPTIMIZER:
    if (strcmp(v, "adamw") && strcmp(v, "sgd")) return usage_error("--optimizer is adamw or sgd, not '%s'", v);
    {
      TrainOptimizerConfig c = train_optimizer_defaults(!strcmp(v, "sgd") ? TRAIN_OPT_SGD : TRAIN_OPT_ADAMW);
      c.beta1 = o->optimizer.beta1, c.beta2 = o->optimizer.beta2, c.eps = o->optimizer.eps;
      c.momentum = o->optimizer.momentum;
      if (a->weight_decay_given) c.weight_decay = o->optimizer.weight_decay;
      o->optimizer = c;
    }
    return -1;
  case OPT_SCHEDULE:
    if (strcmp(v, "constant") && strcmp(v, "cosine")) return usage_error("--schedule is constant or cosine, not '%s'", v);
    o->schedule.kind = !strcmp(v, "cosine") ? TRAIN_SCHEDULE_COSINE : TRAIN_SCHEDULE_CONSTANT;
    return -1;
  case OPT_NUMERICS:
    if (strcmp(v, "ane") && strcmp(v, "fp32")) return usage_error("--numerics is ane or fp32, not '%s'", v);
    o->numerics = !strcmp(v, "fp32") ? ORION_NUMERICS_FP32 : ORION_NUMERICS_ANE;
    return -1;
  case OPT_INPUT: {
    const char *e = strchr(v, '=');
    if (!e || e == v || !e[1]) return usage_error("--input needs NAME=FILE.npy, not '%s'", v);
    if (o->ninputs >= MAX_INPUTS) return usage_error("too many --input (limit is %d)", MAX_INPUTS);
    char *name = xstrdup(v);
    name[e - v] = '\0';
    a->input_names[o->ninputs] = name;
    a->inputs[o->ninputs++] = (OrionTrainInputFile){name, e + 1};
    return -1;
  }
  case OPT_LR: case OPT_MOMENTUM: case OPT_BETA1: case OPT_BETA2: case OPT_EPS: case OPT_WEIGHT_DECAY:
  case OPT_MIN_LR: case OPT_CLIP_GRAD:
    if (!cli_value_double(v, &x) || x < 0) return usage_error("%s needs a number of at least 0 (not '%s')", spelling, v);
    if (id == OPT_LR) o->schedule.lr = x, a->lr = true;
    else if (id == OPT_MOMENTUM) o->optimizer.momentum = x;
    else if (id == OPT_BETA1) o->optimizer.beta1 = x;
    else if (id == OPT_BETA2) o->optimizer.beta2 = x;
    else if (id == OPT_EPS) o->optimizer.eps = x;
    else if (id == OPT_WEIGHT_DECAY) o->optimizer.weight_decay = x, a->weight_decay_given = true;
    else if (id == OPT_MIN_LR) o->schedule.min_lr = x;
    else o->clip_grad = x;
    return -1;
  case OPT_STEPS: case OPT_WARMUP: case OPT_ACCUM: case OPT_SEED: case OPT_CHECKPOINT_EVERY: case OPT_EVAL_EVERY:
  case OPT_STOP_AFTER:
    if (!cli_value_count(v, &n)) return usage_error("%s needs a whole number (not '%s')", spelling, v);
    if ((id == OPT_STEPS || id == OPT_ACCUM || id == OPT_STOP_AFTER) && n == 0)
      return usage_error("%s must be at least 1", spelling);
    if (id == OPT_ACCUM && n > UINT32_MAX) return usage_error("%s is at most %u", spelling, UINT32_MAX);
    if (id == OPT_STEPS) o->steps = n, a->steps = true;
    else if (id == OPT_WARMUP) o->schedule.warmup = n;
    else if (id == OPT_ACCUM) o->accum = (uint32_t)n;
    else if (id == OPT_SEED) o->seed = n;
    else if (id == OPT_CHECKPOINT_EVERY) o->checkpoint_every = n;
    else if (id == OPT_STOP_AFTER) o->stop_after = n;
    else o->eval_every = n;
    return -1;
  default: return -1;
  }
}

static int parse(int argc, char **argv, TrainArgs *a) {
  *a = (TrainArgs){0};
  orion_train_options_init(&a->o);
  a->o.inputs = a->inputs;
  int rc = cli_parse_one_operand(&train_spec, argc, argv, take_option, a, "package", &a->o.package, "no package");
  if (rc >= 0) return rc;
  if (!a->data) return usage_error("%s", "--data FILE is required");
  if (!a->steps) return usage_error("%s", "--steps N is required");
  if (!a->lr) return usage_error("%s", "--lr LR is required");
  if (a->o.eval_every && !a->o.eval_data) return usage_error("%s", "--eval-every goes with --eval-data");
  if (a->o.checkpoint_every && !a->o.checkpoint_dir) return usage_error("%s", "--checkpoint-every goes with --checkpoint-dir");
  if ((a->o.adapter_init || a->o.export_adapter) && !a->o.lora)
    return usage_error("%s goes with --lora", a->o.adapter_init ? "--adapter" : "--export-adapter");
  if (a->o.lora && a->o.export_path)
    return usage_error("%s", "--export writes trained weights; with --lora the adapters leave through --export-adapter DIR");
  if (a->o.stop_after && !a->o.checkpoint_dir) return usage_error("%s", "--stop-after goes with --checkpoint-dir");
  return -1;
}

typedef struct Progress {
  bool tty;
  double elapsed_ms;
} Progress;

static void on_step(void *ctx, const OrionTrainLogEntry *e, uint64_t total) {
  Progress *p = ctx;
  double step_ms = e->forward_ms + e->backward_ms + e->optimizer_ms + e->update_ms;
  p->elapsed_ms += step_ms;
  double eta_s = step_ms * (double)(total - e->step) / 1e3;
  char eval[64] = "";
  if (e->has_eval) snprintf(eval, sizeof eval, "  eval %.4f", e->eval_loss);
  if (p->tty)
    fprintf(stderr, "\rstep %llu/%llu  loss %.4f%s  lr %.3g  %.0f tok/s  ETA %.0f s%s\033[K",
            (unsigned long long)e->step, (unsigned long long)total, e->loss, eval, e->lr, e->tokens_per_s, eta_s,
            e->skipped ? "  (skipped)" : "");
  else
    fprintf(stderr, "step %llu/%llu loss %.6g%s lr %.6g tokens/s %.0f%s\n", (unsigned long long)e->step,
            (unsigned long long)total, e->loss, eval, e->lr, e->tokens_per_s, e->skipped ? " skipped" : "");
}

int orion_run_train(int argc, char **argv) {
  TrainArgs a;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) {
    for (uint32_t i = 0; i < a.o.ninputs; i++) free(a.input_names[i]);
    return rc;
  }
  RunDiag rd;
  run_diag_open(&rd, "orion-run");
  Diag *d = &rd.d;
  const char *tmp = getenv("TMPDIR");
  StrBuf work;
  sb_init(&work);
  sb_printf(&work, "%s/orion-train-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  rc = 1;
  OrionTrainReport r = {0};
  Progress prog = {.tty = isatty(STDERR_FILENO) == 1};
  OrionBackend *backend = NULL;
  if (a.verbose) { /* the run's own backend, so that its usage afterwards is this run's */
    backend = orion_backend_open(a.o.backend ? a.o.backend : "cpu", &a.o.backend_options, d);
    if (!backend) goto done;
    char about[2048];
    bool has = orion_backend_describe(backend, about, sizeof about);
    fprintf(stderr, "orion-run: backend %s%s%s\n", orion_backend_name(backend), has ? ": " : "", has ? about : "");
    if (orion_backend_device(backend, about, sizeof about))
      fprintf(stderr, "orion-run: backend %s device: %s\n", orion_backend_name(backend), about);
    a.o.opened_backend = backend;
  }
  if (!mkdtemp(work.data)) {
    diag_error(d, (SrcSpan){0}, "cannot make the working directory '%s': %s", work.data, strerror(errno));
    goto done;
  }
  a.o.work_dir = work.data;
  a.o.on_step = on_step;
  a.o.ctx = &prog;
  bool ok = orion_train_run(&a.o, &r, d);
  if (prog.tty && r.steps_run) fputc('\n', stderr);
  remove_tree(work.data);
  if (!ok) goto done;
  double share = r.total_ms > 0 ? 100.0 * r.update_ms / r.total_ms : 0;
  printf("trained steps %llu-%llu of %llu: final loss %.6g", (unsigned long long)r.first_step,
         (unsigned long long)(r.first_step + r.steps_run - 1), (unsigned long long)a.o.steps, r.last_loss);
  if (r.has_eval) printf(", eval loss %.6g", r.last_eval_loss);
  printf("\n");
  printf("compiles: %llu; weight updates: %llu (%.2f%% of step time: %.1f of %.1f ms)\n", (unsigned long long)r.compiles,
         (unsigned long long)r.weight_updates, share, r.update_ms, r.total_ms);
  printf("tokens/s: %.0f; skipped steps: %llu; loss scale: %g\n",
         r.total_ms > 0 ? (double)r.tokens / (r.total_ms / 1e3) : 0.0, (unsigned long long)r.skipped,
         (double)r.loss_scale);
  printf("step time: forward %.1f ms, backward %.1f ms, optimizer %.1f ms, weight update %.1f ms\n", r.forward_ms,
         r.backward_ms, r.optimizer_ms, r.update_ms);
  printf("working copy: %s (removed)\n", r.work_package ? r.work_package : work.data);
  if (a.o.profile) {
    /* The working copy is gone: its MIL is the package's. */
    char *pkg = xstrdup(a.o.package);
    for (size_t n = strlen(pkg); n > 1 && pkg[n - 1] == '/';) pkg[--n] = '\0';
    orion_run_print_profile("forward profile", r.profile[0], r.nprofile[0], &rd.sources, r.profile_runs[0],
                            r.work_package, pkg);
    orion_run_print_profile("backward profile", r.profile[1], r.nprofile[1], &rd.sources, r.profile_runs[1],
                            r.work_package, pkg);
    free(pkg);
  }
  rc = 0;
done:
  if (backend) {
    char used[2048];
    if (orion_backend_usage(backend, used, sizeof used))
      fprintf(stderr, "orion-run: backend %s used: %s\n", orion_backend_name(backend), used);
    orion_backend_close(backend);
  }
  orion_train_report_free(&r);
  for (uint32_t i = 0; i < a.o.ninputs; i++) free(a.input_names[i]);
  sb_free(&work);
  run_diag_close(&rd);
  return rc;
}
