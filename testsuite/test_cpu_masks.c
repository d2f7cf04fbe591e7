/*
 * The CPU backend's mask kernels, as a backward uses them for one-hot
 * matrices and masks (runtime/cpu/k_elementwise.c): int32 add/sub with
 * broadcasting (saturating), cast to bool and to fp32, select with a
 * broadcast condition, in pieces over two threads, against values computed
 * here exactly.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/cpu.h"
#include "orion/package.h"
#include "orion/passes.h"

enum { B = 4, T = 64, C = 300 }; /* [B, T, C] = 76,800 elements: several pieces */

/* The one-hot of the cross-entropy gradient and a float mask, as the rules write them. */
#define MASKS                                                                  \
  "func main(t: int32[4,64], x: fp32[4,64,300], big: int32[4,64]) {\n"          \
  "  const one: fp32[] = 1;\n"                                                 \
  "  const zero: fp32[] = 0;\n"                                                \
  "  tc = reshape(t, shape=[4,64,1]);\n"                                        \
  "  d = sub(tc, classes);\n"                                                   \
  "  other = cast(d, dtype=\"bool\");\n"                                       \
  "  oh = select(other, zero, one);\n"                                          \
  "  keep = cast(x, dtype=\"bool\");\n"                                        \
  "  kept = select(keep, x, oh);\n"                                             \
  "  back = cast(d, dtype=\"fp32\");\n"                                        \
  "  s = add(big, big);\n"                                                      \
  "  n = sub(tc, big3);\n"                                                      \
  "  return oh, kept, back, s, n;\n"                                            \
  "}\n"

static char *program(void) {
  StrBuf sb;
  sb_init(&sb);
  const char *at = strstr(MASKS, "  const one");
  sb_putn(&sb, MASKS, (size_t)(at - MASKS));
  sb_puts(&sb, "  const classes: int32[300] = [");
  for (int i = 0; i < C; i++) sb_printf(&sb, "%s%d", i ? ", " : "", i);
  sb_puts(&sb, "];\n  const big3: int32[4,64,1] = -2147483500;\n");
  sb_puts(&sb, at);
  return sb.data;
}

Test(cpu_masks, one_hot_masks_and_saturation) {
  char dir[] = "/tmp/orion-cpu-masks-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  char *text = program();
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);

  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  OrionProgram *prog = orion_open(path, NULL, &d);
  cr_assert_not_null(prog, "%s", msgs.data);
  CpuOptions opt = {.numerics = CPU_NUMERICS_FP32, .threads = 2};
  CpuProgram *c = cpu_prepare_with(prog, 0, &opt, &d);
  cr_assert_not_null(c, "%s", msgs.data);

  static int32_t t[B * T], big[B * T];
  static float x[B * T * C];
  for (int i = 0; i < B * T; i++) {
    t[i] = (i * 37) % (C + 20) - 10; /* some below 0 and at or past C: no class */
    big[i] = i % 3 == 0 ? 2147483000 : i % 3 == 1 ? -2147483000 : i;
  }
  for (int i = 0; i < B * T * C; i++) x[i] = i % 5 == 0 ? 0.0f : i % 7 == 0 ? NAN : (float)i * 0.5f;
  CpuTensor in[3] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {B, T}, .data = t},
                     {.dtype = MIL_DT_FP32, .rank = 3, .dims = {B, T, C}, .data = x},
                     {.dtype = MIL_DT_INT32, .rank = 2, .dims = {B, T}, .data = big}};
  CpuTensor out[5] = {0};
  cr_assert(cpu_run(c, in, out, &d), "%s", msgs.data);
  const float *oh = out[0].data, *kept = out[1].data, *back = out[2].data;
  const int32_t *s = out[3].data, *n = out[4].data;
  for (int r = 0; r < B * T; r++) {
    for (int k = 0; k < C; k++) {
      int i = r * C + k;
      float want = t[r] == k ? 1.0f : 0.0f;
      cr_assert_eq(oh[i], want, "one-hot [%d, %d]", r, k);
      if (isnan(x[i])) cr_assert(isnan(kept[i]), "NaN is not 0: kept [%d]", i);
      else cr_assert_eq(kept[i], x[i] != 0 ? x[i] : want, "kept [%d]", i);
      cr_assert_eq(back[i], (float)(t[r] - k), "cast to fp32 [%d]", i);
    }
    int64_t twice = 2 * (int64_t)big[r], diff = (int64_t)t[r] + 2147483500;
    cr_assert_eq(s[r], twice > INT32_MAX ? INT32_MAX : twice < INT32_MIN ? INT32_MIN : (int32_t)twice, "add [%d]", r);
    cr_assert_eq(n[r], diff > INT32_MAX ? INT32_MAX : (int32_t)diff, "sub [%d]", r);
  }
  for (int o = 0; o < 5; o++) cpu_tensor_free(&out[o]);
  cpu_free(c);
  orion_close(prog);
  srcset_free(&sources);
  sb_free(&msgs);
  free(text);
  remove_tree(dir);
}
