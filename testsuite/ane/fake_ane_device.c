/* The fake ANE device (fake_ane_device.h). */
#include "fake_ane_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fake_init(FakeDevice *f) {
  memset(f, 0, sizeof *f);
  sb_init(&f->log);
  for (int i = 0; i < FAKE_WEIGHTS; i++) {
    f->old_w.w[i] = (uint16_t)(0x3c00 + i); /* 1.0, 1.0009765625, ... */
    f->new_w.w[i] = (uint16_t)(0x4000 + i); /* 2.0, ... */
  }
  f->sources[0] = fake_source("probe-old", "mil probe", &f->old_w);
  f->sources[1] = fake_source("probe-new", "mil probe", &f->new_w);
  f->sources[2] = fake_source("probe-old-inputs", "mil probe with weights as inputs", &f->old_w);
  f->sources[3] = fake_source("probe-new-inputs", "mil probe with weights as inputs", &f->new_w);
  f->sources[2].weights_as_inputs = f->sources[3].weights_as_inputs = true;
}

void fake_free(FakeDevice *f) { sb_free(&f->log); }

AneProgramSource fake_source(const char *name, const char *mil, const FakeWeights *w) {
  return (AneProgramSource){.name = name, .mil_text = mil, .mil_len = strlen(mil), .weights = w,
                            .weights_len = sizeof *w, .os_build = "25F84", .ane_arch = "h16"};
}

void fake_sleep(void *ctx, uint32_t ms) { sb_printf(&((FakeDevice *)ctx)->log, "sleep %u; ", ms); }

static bool scripted_failure(FakeDevice *f, AneDeviceError *err) {
  uint32_t n = f->compiles++;
  if (n < FAKE_MAX_SCRIPT && f->compile_fails[n].code) {
    *err = f->compile_fails[n];
    return true;
  }
  return false;
}

static bool compile(void *ctx, const AneProgramSource *src, void **program, AneDeviceError *err) {
  FakeDevice *f = ctx;
  sb_printf(&f->log, "compile %s; ", src->name);
  if (scripted_failure(f, err)) return false;
  if (src->weights_as_inputs && !f->inputs_supported) {
    *err = (AneDeviceError){.code = 0x50001, .kind = ANE_FAILURE_REJECTED};
    snprintf(err->message, sizeof err->message, "weights as inputs are not supported");
    return false;
  }
  FakeProgram *p = xcalloc(1, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", src->name);
  p->as_inputs = src->weights_as_inputs;
  memcpy(&p->image, src->weights, sizeof p->image);
  p->files = p->image;
  f->live++;
  *program = p;
  return true;
}

static bool recompile(void *ctx, void *program, AneDeviceError *err) {
  FakeDevice *f = ctx;
  FakeProgram *p = program;
  sb_printf(&f->log, "recompile %s; ", p->name);
  if (scripted_failure(f, err)) return false;
  if (!f->recompile_reuses_image) p->image = p->files;
  return true;
}

static bool load(void *ctx, void *program, AneDeviceError *err) {
  FakeDevice *f = ctx;
  FakeProgram *p = program;
  sb_printf(&f->log, "load %s; ", p->name);
  if (f->fail_loads) {
    *err = (AneDeviceError){.code = 0x20004, .kind = ANE_FAILURE_TRANSIENT};
    snprintf(err->message, sizeof err->message, "address space exhausted");
    return false;
  }
  if (f->reload_reads_files) p->image = p->files;
  if (f->load_reads_patched_data && p->data_patched) p->image = p->data;
  p->loaded = true;
  return true;
}

static void unload(void *ctx, void *program) {
  FakeProgram *p = program;
  sb_printf(&((FakeDevice *)ctx)->log, "unload %s; ", p->name);
  p->loaded = false;
}

static void release(void *ctx, void *program) {
  FakeDevice *f = ctx;
  FakeProgram *p = program;
  sb_printf(&f->log, "release %s; ", p->name);
  f->live--;
  free(p);
}

AneDeviceOps fake_device_ops(FakeDevice *f) { return (AneDeviceOps){f, compile, recompile, load, unload, release}; }

static const AneProgramSource *probe_source(void *ctx, const void *weights, bool as_inputs) {
  FakeDevice *f = ctx;
  bool is_new = weights == &f->new_w;
  return &f->sources[(as_inputs ? 2 : 0) + (is_new ? 1 : 0)];
}

static bool write_weight_files(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)err;
  FakeProgram *p = program;
  sb_printf(&((FakeDevice *)ctx)->log, "write-files %s; ", p->name);
  memcpy(&p->files, weights, sizeof p->files);
  return true;
}

static bool patch_data(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)err;
  FakeProgram *p = program;
  sb_printf(&((FakeDevice *)ctx)->log, "patch-data %s; ", p->name);
  memcpy(&p->data, weights, sizeof p->data);
  p->data_patched = true;
  return true;
}

static bool bind_weights(void *ctx, void *program, const void *weights, AneDeviceError *err) {
  (void)err;
  FakeProgram *p = program;
  sb_printf(&((FakeDevice *)ctx)->log, "bind %s; ", p->name);
  memcpy(&p->bound, weights, sizeof p->bound);
  return true;
}

static bool evaluate(void *ctx, void *program, uint16_t *out, size_t n, AneDeviceError *err) {
  FakeProgram *p = program;
  sb_printf(&((FakeDevice *)ctx)->log, "eval %s; ", p->name);
  if (!p->loaded || n != FAKE_WEIGHTS) {
    *err = (AneDeviceError){.code = 0x1, .kind = ANE_FAILURE_REJECTED};
    snprintf(err->message, sizeof err->message, "program not loaded or wrong output count");
    return false;
  }
  /* Weights as inputs start as the compiled ones until new buffers are bound. */
  const FakeWeights *w = p->as_inputs && p->bound.w[0] ? &p->bound : &p->image;
  memcpy(out, w->w, sizeof w->w);
  return true;
}

AneUpdateOps fake_update_ops(FakeDevice *f) {
  return (AneUpdateOps){f, probe_source, write_weight_files, patch_data, bind_weights, evaluate};
}

void fake_budget_init(AneBudget *b) {
  AneLimit limit = {.value = 119};
  snprintf(limit.origin, sizeof limit.origin, "constraint ANE005 (compiles_per_process)");
  ane_budget_init(b, &limit);
}
