/*
 * An example out-of-tree pass, built by the test suite and loaded with
 * `orionc --load-pass=`: "relu-to-max" rewrites relu(x) as maximum(x, 0),
 * using only the public IR API. See docs/writing-a-pass.md.
 */
#include "orion/pass_plugin.h"

const uint32_t orion_pass_plugin_api_version = ORION_PASS_PLUGIN_API_VERSION;
bool orion_pass_plugin_init(const OrionPassHost *host);

static bool relu_to_max(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    for (IrOpId op = ir_func(m, f)->first, next; !ir_id_is_none(op); op = next) {
      next = ir_op(m, op)->next;
      if (ir_op(m, op)->kind != OP_RELU) continue;
      IrValueId x = ir_op(m, op)->inputs[0], out = ir_op(m, op)->results[0];
      IrType scalar = {.dtype = ir_value(m, x)->type.dtype, .rank = 0};
      double zero = 0;
      IrValueId c = ir_const_new(m, f, ir_unique_name(m, f, "zero"), &scalar, &zero, 1, ir_op(m, op)->loc);
      const char *name = ir_unique_name(m, f, "relu_max");
      IrValueId ins[2] = {x, c};
      IrOpId mx = ir_op_new(m, f, OP_MAXIMUM, ins, 2, 1, &name, ir_op(m, op)->loc);
      ir_op_move_before(m, mx, op);
      ir_replace_all_uses(m, out, ir_op(m, mx)->results[0]);
      ir_op_erase(m, op);
      ctx->changed = true;
    }
  }
  return true;
}

/* A deliberately wrong pass, so the tests can show --verify-each naming the
 * pass that broke the IR: it moves each function's last op to the front. */
static bool break_order(IrModule *m, PassCtx *ctx) {
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead || ir_id_eq(fn->first, fn->last)) continue;
    ir_op_move_before(m, fn->last, fn->first);
    ctx->changed = true;
  }
  return true;
}

/* A pass that never settles (it claims a change every run without making
 * one), so the tests can show a fixed-point group stopping at its limit. */
static bool never_settles(IrModule *m, PassCtx *ctx) {
  (void)m;
  ctx->changed = true;
  return true;
}

bool orion_pass_plugin_init(const OrionPassHost *host) {
  static const PassInfo relu = {"relu-to-max", "relu(x) -> maximum(x, 0) (an example plugin)", ANALYSIS_TYPES,
                                ANALYSIS_TYPES, relu_to_max};
  static const PassInfo broken = {"break-order", "moves the last op first (a broken pass, for tests)", 0, 0,
                                  break_order};
  static const PassInfo restless = {"never-settles", "claims a change every run (for tests of fixed points)", 0, 0,
                                    never_settles};
  return host->register_pass(&relu, host->diag) && host->register_pass(&broken, host->diag) &&
         host->register_pass(&restless, host->diag);
}
