/*
 * The training loop (orion/train_loop.h): optimizer steps over a package's
 * forward and backward programs with the weights updated in place every
 * step, checkpoints, resume, evaluation and the export. Setting up (the
 * working copy, bindings, masters) is loop_setup.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop_internal.h"
#include "orion/train_checkpoint.h"

void orion_train_options_init(OrionTrainOptions *o) {
  *o = (OrionTrainOptions){0};
  o->backend = "cpu";
  o->numerics = ORION_NUMERICS_ANE;
  o->optimizer = train_optimizer_defaults(TRAIN_OPT_ADAMW);
  o->schedule = (TrainSchedule){.kind = TRAIN_SCHEDULE_CONSTANT, .lr = 3e-4};
  o->accum = 1;
}

void orion_train_report_free(OrionTrainReport *r) {
  free(r->work_package);
  r->work_package = NULL;
  for (int p = 0; p < 2; p++) {
    for (uint32_t i = 0; i < r->nprofile[p]; i++) {
      free((void *)(uintptr_t)r->profile[p][i].op); /* the copies take_profiles made */
      free((void *)(uintptr_t)r->profile[p][i].name);
    }
    free(r->profile[p]);
    r->profile[p] = NULL;
    r->nprofile[p] = 0;
  }
}

/* The programs' profiles into the report, as copies that outlive the programs. */
static void take_profiles(const Loop *L, OrionTrainReport *r) {
  const OrionExec *exec[2] = {L->fwd_exec, L->bwd_exec};
  for (int p = 0; p < 2; p++) {
    if (!exec[p]) continue;
    uint32_t n = orion_exec_profile_count(exec[p]);
    r->profile[p] = xcalloc(n + 1, sizeof *r->profile[p]);
    for (uint32_t i = 0; i < n; i++) {
      OrionStmtTime e = *orion_exec_profile_stmt(exec[p], i);
      e.op = xstrdup(e.op);
      e.name = xstrdup(e.name);
      r->profile[p][i] = e;
      if (e.runs > r->profile_runs[p]) r->profile_runs[p] = e.runs;
    }
    r->nprofile[p] = n;
  }
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The masters, checked (finite; within fp16's range for fp16 weights) and
 * converted straight into the working copy's mapped weight data, then taken
 * up by the backend: no compile, no manifest, no checksum (the working copy
 * is made to verify at checkpoints and at the end, commit_weights). Nothing
 * is written unless every value fits. `counted`: right after the optimizer
 * step, whose counts of misfits (L->fits) stand for the check pass; else
 * (a resume) the write reads the values to check them. */
static bool write_weights(Loop *L, OrionTrainReport *r, bool counted, Diag *d) {
  if (L->lora) return loop_lora_write(L, d); /* the adapters are inputs: no weight changes */
  for (uint32_t k = 0; k < L->nparams; k++) L->writes[k].fit = counted ? &L->fits[k] : NULL;
  if (!orion_backend_write_weights(L->backend, L->prog, L->writes, L->nparams, d)) return false;
  if (L->nparams) r->weight_updates++;
  return true;
}

/* The working copy verifies again: the written blobs' checksums and a new
 * generation in its manifest. */
static bool commit_weights(Loop *L, Diag *d) { return orion_commit_weights(L->prog, d); }

static bool run_forward(Loop *L, double *loss, Diag *d) {
  if (!orion_exec_run(L->fwd_exec, L->fwd_in, L->fwd_out, d)) return false;
  loop_join_groups(&L->fwd_joins, L->fwd_out);
  *loss = (double)*(const float *)L->fwd_out[L->loss_out].data;
  return true;
}

/* The mean forward loss over every window of the evaluation data (rows in
 * order, the last batch wrapping around to the first windows). */
static bool evaluate(Loop *L, double *mean, Diag *d) {
  int64_t w = train_data_windows(L->eval);
  uint64_t batches = (uint64_t)((w + L->batch - 1) / L->batch);
  double sum = 0;
  for (uint64_t b = 0; b < batches; b++) {
    train_data_batch(L->eval, b, L->fwd_in[L->tokens_in].data, L->fwd_in[L->targets_in].data);
    double loss;
    if (!run_forward(L, &loss, d)) return false;
    sum += loss;
  }
  *mean = sum / (double)batches;
  return true;
}

static const char *optimizer_name(TrainOptimizerKind k) { return k == TRAIN_OPT_SGD ? "sgd" : "adamw"; }

static const char *slot_name(TrainOptimizerKind k, uint32_t s) {
  return k == TRAIN_OPT_SGD ? "momentum" : s == 0 ? "exp_avg" : "exp_avg_sq";
}

static bool save_checkpoint(Loop *L, const OrionTrainOptions *o, uint64_t step, Diag *d) {
  OrionCheckpoint c = {.step = step, .package_id = L->package_id, .optimizer = optimizer_name(o->optimizer.kind)};
  uint8_t pos[TRAIN_DATA_POSITION_BYTES];
  TrainDataPosition dp = train_data_position(L->data);
  train_data_position_encode(&dp, pos);
  c.data_position = pos;
  c.data_position_len = sizeof pos;
  c.loss_scale = (OrionCkptLossScale){(double)L->scaler.scale, L->scaler.growth_tracker, L->scaler.skipped};
  c.hyper[c.nhyper++] = (OrionCkptHyper){"lr", (double)o->schedule.lr};
  c.hyper[c.nhyper++] = (OrionCkptHyper){"steps", (double)train_optimizer_steps(L->opt)};
  c.hyper[c.nhyper++] = (OrionCkptHyper){"has_state", train_optimizer_has_state(L->opt) ? 1.0 : 0.0};
  c.weights = xcalloc(L->nparams, sizeof *c.weights);
  c.nweights = L->nparams;
  for (uint32_t k = 0; k < L->nparams; k++) {
    c.weights[k] = (OrionCkptTensor){.name = L->params[k].name, .rank = L->params[k].rank, .data = L->params[k].value};
    memcpy(c.weights[k].dims, L->params[k].dims, sizeof c.weights[k].dims);
  }
  c.nslots = train_optimizer_slots(L->opt);
  for (uint32_t s = 0; s < c.nslots; s++) {
    c.slot_names[s] = slot_name(o->optimizer.kind, s);
    c.state[s] = xcalloc(L->nparams, sizeof *c.state[s]);
    for (uint32_t k = 0; k < L->nparams; k++) c.state[s][k] = train_optimizer_slot(L->opt, k, s);
  }
  bool ok = orion_ckpt_write(o->checkpoint_dir, &c, NULL, NULL, d);
  for (uint32_t s = 0; s < c.nslots; s++) free(c.state[s]);
  free(c.weights);
  return ok;
}

static double hyper(const OrionCheckpoint *c, const char *name) {
  for (uint32_t i = 0; i < c->nhyper; i++)
    if (!strcmp(c->hyper[i].name, name)) return c->hyper[i].value;
  return 0;
}

/* Puts a checkpoint's masters, optimizer state, loss scale and data position
 * back; *next gets the step to run next. */
static bool resume(Loop *L, const OrionTrainOptions *o, uint64_t *next, Diag *d) {
  OrionCheckpoint c;
  if (!orion_ckpt_load(o->resume, L->package_id, &c, d)) return false;
  bool ok = true;
  if (strcmp(c.optimizer, optimizer_name(o->optimizer.kind)) || c.nslots != train_optimizer_slots(L->opt)) {
    diag_error(d, (SrcSpan){0}, "checkpoint '%s' was made with the optimizer %s (%u state slots); resume with the "
               "same --optimizer and --momentum", o->resume, c.optimizer, c.nslots);
    ok = false;
  }
  for (uint32_t k = 0; ok && k < L->nparams; k++) {
    const TrainParam *p = &L->params[k];
    uint32_t i = 0;
    while (i < c.nweights && strcmp(c.weights[i].name, p->name)) i++;
    if (i == c.nweights || orion_ckpt_tensor_count(&c.weights[i]) != p->count) {
      diag_error(d, (SrcSpan){0}, "checkpoint '%s' has no weight '%s' of %zu values", o->resume, p->name, p->count);
      ok = false;
      break;
    }
    memcpy(p->value, c.weights[i].data, p->count * sizeof(float));
    for (uint32_t s = 0; s < c.nslots; s++) memcpy(train_optimizer_slot(L->opt, k, s), c.state[s][i], p->count * sizeof(float));
  }
  TrainDataPosition pos;
  if (ok && (c.data_position_len != TRAIN_DATA_POSITION_BYTES || !train_data_position_decode(c.data_position, &pos))) {
    diag_error(d, (SrcSpan){0}, "checkpoint '%s' has no data position this version reads", o->resume);
    ok = false;
  }
  ok = ok && train_data_seek(L->data, &pos, d);
  if (ok) {
    train_optimizer_restore(L->opt, (uint64_t)hyper(&c, "steps"), hyper(&c, "has_state") != 0);
    L->scaler.scale = (float)c.loss_scale.scale;
    L->scaler.growth_tracker = (uint32_t)c.loss_scale.good_steps;
    L->scaler.skipped = c.loss_scale.skipped_steps;
    *next = c.step + 1;
  }
  orion_ckpt_free(&c);
  return ok;
}

/* The param's gradient buffer and the backward's output buffer trade
 * places: the backward writes the next step's gradient into the old one.
 * Both stay owned where they were allocated (each is freed once). */
static void swap_gradient(TrainParam *p, OrionTensor *out) {
  size_t n = 1;
  for (uint32_t r = 0; r < out->rank; r++) n *= (size_t)out->dims[r];
  if (out->dtype != MIL_DT_FP32 || n != p->count || !p->count) { /* not one fp32 buffer of the param's size */
    train_grads_zero(p, 1);
    train_grad_add(p, out->data);
    return;
  }
  float *mine = p->grad;
  p->grad = out->data;
  out->data = mine;
}

typedef struct StepResult {
  OrionTrainLogEntry log;
  double ms;
} StepResult;

/* One optimizer step s: accum batches forward and backward, then the update. */
static bool train_step(Loop *L, const OrionTrainOptions *o, uint64_t s, OrionTrainReport *r, StepResult *out,
                       Diag *d) {
  bool scaled = o->numerics == ORION_NUMERICS_ANE;
  float scale = scaled ? L->scaler.scale : 1.0f;
  L->scale_value = scale;
  double t0 = now_ms(), fwd_ms = 0, bwd_ms = 0;
  double lr = train_schedule_lr(&o->schedule, s), loss_sum = 0;
  /* One batch: a param's gradient is its backward output itself, swapped
   * in, not added to zeros (a memset and an add over every gradient, a
   * tenth of GPT-2's step); the rows, if any, are added into it. */
  bool swap = o->accum == 1;
  for (uint32_t p = 0; p < L->nparams; p++)
    if (!swap || !L->pinfo[p].grad) train_grads_zero(&L->params[p], 1);
  for (uint32_t k = 0; k < o->accum; k++) {
    train_data_next(L->data, L->fwd_in[L->tokens_in].data, L->fwd_in[L->targets_in].data);
    double a = now_ms(), loss;
    if (!run_forward(L, &loss, d)) return false;
    double b = now_ms();
    if (!orion_exec_run(L->bwd_exec, L->bwd_in, L->bwd_out, d)) return false;
    loop_join_groups(&L->bwd_joins, L->bwd_out);
    double c = now_ms();
    fwd_ms += b - a;
    bwd_ms += c - b;
    loss_sum += loss;
    for (uint32_t p = 0; p < L->nparams; p++) { /* no gradient output: its rows alone (loop_rows_add) */
      OrionTensor *gout = L->pinfo[p].grad;
      if (!gout) continue;
      if (swap) swap_gradient(&L->params[p], gout);
      else train_grad_add(&L->params[p], gout->data);
    }
    if (!loop_rows_add(L, d)) return false;
  }
  double t1 = now_ms();
  train_grads_mean(L->params, L->nparams, o->accum);
  double norm = 0;
  /* One read of the gradients for their norm and finiteness; the unscaling
   * and the clipping happen as the optimizer reads them (the same bits as
   * passes of their own, a write of every gradient fewer). */
  bool finite = train_grads_measure_unscaled(L->params, L->nparams, scale, &norm);
  if (finite) {
    TrainGradScale gs = train_grad_scale(scale, o->clip_grad, norm);
    for (uint32_t k = 0; k < L->nparams; k++)
      L->fits[k].limit = orion_fit_limit(!L->lora && L->pinfo[k].dtype == ORION_DT_FP16);
    train_optimizer_step_counted(L->opt, L->params, L->nparams, lr, &gs, L->fits);
  }
  if (scaled) train_loss_scaler_update(&L->scaler, !finite);
  else if (!finite) L->scaler.skipped++;
  double t2 = now_ms();
  if (finite && !write_weights(L, r, true, d)) return false;
  double t3 = now_ms();
  out->ms = t3 - t0;
  double tokens = (double)(L->batch * L->seq) * o->accum;
  out->log = (OrionTrainLogEntry){.step = s, .loss = loss_sum / o->accum, .lr = lr,
                                  .tokens_per_s = out->ms > 0 ? tokens / (out->ms / 1e3) : 0, .skipped = !finite,
                                  .loss_scale = (double)scale, .has_grad_norm = finite, .grad_norm = norm, .has_times = true,
                                  .forward_ms = fwd_ms, .backward_ms = bwd_ms, .optimizer_ms = t2 - t1,
                                  .update_ms = t3 - t2};
  r->forward_ms += fwd_ms;
  r->backward_ms += bwd_ms;
  r->optimizer_ms += t2 - t1;
  r->update_ms += t3 - t2;
  r->total_ms += out->ms;
  r->tokens += (uint64_t)tokens;
  r->steps_run++;
  r->last_loss = out->log.loss;
  return true;
}

static bool check_options(const OrionTrainOptions *o, Diag *d) {
  const char *bad = !o->package ? "no package" : !o->work_dir ? "no working directory" : !o->data ? "no --data"
                  : o->steps == 0 ? "--steps must be at least 1" : o->accum == 0 ? "--accum must be at least 1"
                  : !(o->schedule.lr >= 0) ? "--lr must not be negative" : NULL;
  if (bad) diag_error(d, (SrcSpan){0}, "orion_train_run: %s", bad);
  return !bad;
}

/* The data, the optimizer and the loss scaler (after the programs are set up). */
static bool open_state(Loop *L, const OrionTrainOptions *o, Diag *d) {
  TrainDataOptions dopt = {.batch = L->batch, .seq = L->seq,
                           .vocab = L->contract->vocabulary ? (int64_t)L->contract->vocabulary : INT32_MAX,
                           .shuffle = o->shuffle, .seed = o->seed};
  if (!train_data_open(o->data, &dopt, &L->data, d)) return false;
  if (o->eval_data) {
    TrainDataOptions eopt = dopt;
    eopt.shuffle = false;
    if (!train_data_open(o->eval_data, &eopt, &L->eval, d)) return false;
  }
  L->opt = train_optimizer_new(&o->optimizer, L->params, L->nparams, d);
  if (!L->opt) return false;
  L->fits = xcalloc(L->nparams + 1, sizeof *L->fits);
  TrainLossScaleConfig sc = train_loss_scale_defaults();
  return train_loss_scaler_init(&L->scaler, &sc, d);
}

bool orion_train_run(const OrionTrainOptions *o, OrionTrainReport *r, Diag *d) {
  *r = (OrionTrainReport){0};
  if (!check_options(o, d)) return false;
  OrionTrainOptions opt = *o;
  opt.schedule.steps = o->steps;
  o = &opt;
  Loop L = {0};
  OrionTrainLog *log = NULL;
  bool ok = loop_setup(&L, o, d);
  if (L.work) r->work_package = xstrdup(L.work);
  ok = ok && open_state(&L, o, d);
  uint64_t next = 1;
  if (ok && L.lora) ok = loop_lora_write(&L, d); /* the start values, bound before the first forward */
  if (ok && o->resume) ok = resume(&L, o, &next, d) && write_weights(&L, r, false, d);
  r->first_step = next;
  if (ok && o->log) ok = (log = orion_train_log_open(o->log, o->resume != NULL, d)) != NULL;
  /* --stop-after: the run ends early, as if interrupted, at a checkpoint; the schedule is still the N steps'. */
  uint64_t last = o->stop_after && o->stop_after < o->steps ? o->stop_after : o->steps;
  if (ok && o->stop_after && last < next) {
    diag_error(d, (SrcSpan){0}, "--stop-after %llu is before the resumed run's first step %llu",
               (unsigned long long)last, (unsigned long long)next);
    ok = false;
  }
  for (uint64_t s = next; ok && s <= last; s++) {
    StepResult st;
    ok = train_step(&L, o, s, r, &st, d);
    if (!ok) break;
    bool eval_now = L.eval && ((o->eval_every && s % o->eval_every == 0) || (!o->eval_every && s == o->steps));
    if (eval_now) {
      ok = evaluate(&L, &st.log.eval_loss, d);
      st.log.has_eval = ok;
      r->has_eval = ok;
      r->last_eval_loss = st.log.eval_loss;
    }
    if (ok && log) ok = orion_train_log_write(log, &st.log, d);
    if (ok && o->on_step) o->on_step(o->ctx, &st.log, o->steps);
    bool ckpt_now = o->checkpoint_dir && ((o->checkpoint_every && s % o->checkpoint_every == 0) || s == last);
    if (ok && ckpt_now) ok = save_checkpoint(&L, o, s, d) && commit_weights(&L, d);
  }
  if (ok && o->export_path) {
    OrionCkptTensor *t = xcalloc(L.nparams, sizeof *t);
    for (uint32_t k = 0; k < L.nparams; k++) {
      t[k] = (OrionCkptTensor){.name = L.params[k].name, .rank = L.params[k].rank, .data = L.params[k].value};
      memcpy(t[k].dims, L.params[k].dims, sizeof t[k].dims);
    }
    ok = orion_train_export_safetensors(o->export_path, t, L.nparams, d);
    free(t);
  }
  if (ok && o->export_adapter) ok = loop_lora_export(&L, o->export_adapter, d);
  if (ok) ok = commit_weights(&L, d);
  r->skipped = L.scaler.skipped;
  r->loss_scale = o->numerics == ORION_NUMERICS_ANE ? L.scaler.scale : 1.0f;
  if (log && !orion_train_log_close(log, d)) ok = false;
  if (o->profile) take_profiles(&L, r);
  loop_teardown(&L);
  return ok;
}
