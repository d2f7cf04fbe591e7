/*
 * The CPU backend's fused kernels (linear chains, groups, epilogues, row
 * groups) give the bits of the unfused statements, and softmax over masked
 * rows. (Split from test_cpu.c; the helpers are cpu_check.c's.)
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_check.h"
#include "orion/blob.h"
#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"

/* ---- fusion ---- */

/* A literal [O, K, 1, 1] weight ((o * 7 + k * 3) % 17 - 8) / 16 and [O] bias (o % 5 - 2) / 8, in dtype dt. */
static void put_weights(StrBuf *sb, const char *dt, const char *w, const char *b, int O, int K) {
  sb_printf(sb, "        tensor<%s, [%d, %d, 1, 1]> %s = const()[name = string(\"%s\"), val = tensor<%s, [%d, %d, 1, 1]>([", dt, O,
            K, w, w, dt, O, K);
  for (int i = 0; i < O * K; i++) sb_printf(sb, "%s%g", i ? ", " : "", ((i / K * 7 + i % K * 3) % 17 - 8) / 16.0);
  sb_printf(sb, "])];\n        tensor<%s, [%d]> %s = const()[name = string(\"%s\"), val = tensor<%s, [%d]>([", dt, O, b, b, dt, O);
  for (int i = 0; i < O; i++) sb_printf(sb, "%s%g", i ? ", " : "", (i % 5 - 2) / 8.0);
  sb_puts(sb, "])];\n");
}

#define I32_(n, ...) "tensor<int32, [" #n "]>([" #__VA_ARGS__ "])"

/* Three linear layers as lower-linear writes them (transpose, reshape, 1x1
 * conv, bias add, reshape, transpose), the bias as add's x or y or absent,
 * chained, and a conv whose transposed input is also returned (not fused):
 * the fused run gives the bits of the unfused one (check_finite fuses
 * nothing), with 1 and 3 threads, in both modes, and matches a reference. */
Test(cpu, fused_linear_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, MIL_HEAD "    func main<ios18>(tensor<%s, [1, 6, 24]> x) {\n", dt);
    put_weights(&sb, dt, "w1", "b1", 20, 24);
    put_weights(&sb, dt, "w2", "b2", 16, 20);
    put_weights(&sb, dt, "w3", "b3", 12, 16);
    char *body = with_dtype(
        "        tensor<$F, [1, 24, 6]> t1 = transpose(perm = " I32_(3, 0, 2, 1) ", x = x)[name = " S_("t1") "];\n"
        "        tensor<$F, [1, 24, 1, 6]> v1 = reshape(shape = " I32_(4, 1, 24, 1, 6) ", x = t1)[name = " S_("v1") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> r1 = conv(dilations = " I32_(2, 1, 1) ", groups = int32(1), pad = " I32_(4, 0, 0, 0, 0) ", pad_type = " S_("custom") ", strides = " I32_(2, 1, 1) ", weight = w1, x = v1)[name = " S_("r1") "];\n"
        "        tensor<$F, [1, 20, 1, 1]> c1 = reshape(shape = " I32_(4, 1, 20, 1, 1) ", x = b1)[name = " S_("c1") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> a1 = add(x = r1, y = c1)[name = " S_("a1") "];\n"
        "        tensor<$F, [1, 20, 6]> s1 = reshape(shape = " I32_(3, 1, 20, 6) ", x = a1)[name = " S_("s1") "];\n"
        "        tensor<$F, [1, 6, 20]> y1 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s1)[name = " S_("y1") "];\n"
        "        tensor<$F, [1, 20, 6]> t2 = transpose(perm = " I32_(3, -3, -1, -2) ", x = y1)[name = " S_("t2") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> v2 = reshape(shape = " I32_(4, 1, 20, 1, 6) ", x = t2)[name = " S_("v2") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> r2 = conv(pad_type = " S_("same") ", weight = w2, x = v2)[name = " S_("r2") "];\n"
        "        tensor<$F, [16, 1, 1]> c2 = reshape(shape = " I32_(3, 16, 1, 1) ", x = b2)[name = " S_("c2") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> a2 = add(x = c2, y = r2)[name = " S_("a2") "];\n"
        "        tensor<$F, [1, 16, 6]> s2 = reshape(shape = " I32_(3, 1, 16, 6) ", x = a2)[name = " S_("s2") "];\n"
        "        tensor<$F, [1, 6, 16]> y2 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s2)[name = " S_("y2") "];\n"
        "        tensor<$F, [1, 16, 6]> t3 = transpose(perm = " I32_(3, 0, 2, 1) ", x = y2)[name = " S_("t3") "];\n"
        "        tensor<$F, [1, 16, 1, 6]> v3 = reshape(shape = " I32_(4, 1, 16, 1, 6) ", x = t3)[name = " S_("v3") "];\n"
        "        tensor<$F, [1, 12, 1, 6]> r3 = conv(pad_type = " S_("valid") ", weight = w3, x = v3)[name = " S_("r3") "];\n"
        "        tensor<$F, [1, 12, 6]> s3 = reshape(shape = " I32_(3, 1, 12, 6) ", x = r3)[name = " S_("s3") "];\n"
        "        tensor<$F, [1, 6, 12]> y3 = transpose(perm = " I32_(3, 0, 2, 1) ", x = s3)[name = " S_("y3") "];\n"
        "        tensor<$F, [1, 24, 6]> t4 = transpose(perm = " I32_(3, 0, 2, 1) ", x = x)[name = " S_("t4") "];\n"
        "        tensor<$F, [1, 24, 1, 6]> v4 = reshape(shape = " I32_(4, 1, 24, 1, 6) ", x = t4)[name = " S_("v4") "];\n"
        "        tensor<$F, [1, 20, 1, 6]> r4 = conv(weight = w1, x = v4)[name = " S_("r4") "];\n"
        "    } -> (y3, y1, t4, r4);\n}\n",
        dt);
    sb_puts(&sb, body);
    free(body);
    write_bare(sb.data);
    sb_free(&sb);
    float xf[144];
    uint16_t xh[144];
    fill_random(xf, 144, 11, true);
    for (int i = 0; i < 144; i++) xh[i] = fp16_from_float(xf[i]);
    CpuTensor in = {.dtype = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32, .rank = 3, .dims = {1, 6, 24},
                    .data = mode == 0 ? (void *)xh : (void *)xf};
    CpuTensor fused[4], unfused[4];
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    run_twice(nm, &in, fused, 4);
    /* What was fused (profiled: an elided statement never runs), then the unfused run. */
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    const char *elided = " t1 v1 a1 s1 y1 t2 v2 a2 s2 y2 t3 v3 s3 y3 ";
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      char key[16];
      snprintf(key, sizeof key, " %s ", e->name);
      cr_assert_eq(e->runs, strstr(elided, key) ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 4; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 4; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(fused[k].dtype);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
    }
    /* The reference, in double: y1 = x w1^T + b1, y2 = y1 w2^T + b2, y3 = y2 w3^T; r4 = w1 x^T. */
    double y1[6][20], y2[6][16], y3[6][12];
    for (int p = 0; p < 6; p++) {
      for (int o = 0; o < 20; o++) {
        double s = (o % 5 - 2) / 8.0;
        for (int k = 0; k < 24; k++) s += (double)xf[p * 24 + k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y1[p][o] = s;
        double r4 = cpu_elem(&fused[3], (uint64_t)(o * 6 + p)), want = s - (o % 5 - 2) / 8.0;
        cr_assert(fabs(r4 - want) <= 2e-2 * fmax(1, fabs(want)), "%s: r4[%d][%d] = %g, want %g", dt, o, p, r4, want);
      }
      for (int o = 0; o < 16; o++) {
        double s = (o % 5 - 2) / 8.0;
        for (int k = 0; k < 20; k++) s += y1[p][k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y2[p][o] = s;
      }
      for (int o = 0; o < 12; o++) {
        double s = 0;
        for (int k = 0; k < 16; k++) s += y2[p][k] * (((o * 7 + k * 3) % 17 - 8) / 16.0);
        y3[p][o] = s;
      }
    }
    double tol = mode == 0 ? 2e-2 : 1e-5;
    for (int p = 0; p < 6; p++) {
      for (int o = 0; o < 12; o++) {
        double g = cpu_elem(&fused[0], (uint64_t)(p * 12 + o));
        cr_assert(fabs(g - y3[p][o]) <= tol * fmax(1, fabs(y3[p][o])), "%s: y3[%d][%d] = %g, want %g", dt, p, o, g, y3[p][o]);
      }
      for (int o = 0; o < 20; o++) {
        double g = cpu_elem(&fused[1], (uint64_t)(p * 20 + o));
        cr_assert(fabs(g - y1[p][o]) <= tol * fmax(1, fabs(y1[p][o])), "%s: y1[%d][%d] = %g, want %g", dt, p, o, g, y1[p][o]);
      }
      for (int k = 0; k < 24; k++)
        cr_assert(cpu_elem(&fused[2], (uint64_t)(k * 6 + p)) == (double)(mode == 0 ? fp16_to_float(xh[p * 24 + k]) : xf[p * 24 + k]));
    }
    for (int k = 0; k < 4; k++) cpu_tensor_free(&fused[k]), cpu_tensor_free(&unfused[k]);
    cleanup();
  }
}

/* An element-wise group: unary and binary ops of one result shape, with a
 * row-broadcast operand (rows of 1001 cross the tiles of 2048 elements), a
 * scalar, a view among them, results used only inside (one of them twice by
 * one op) and one returned, run tile by tile: the bits of the unfused run
 * (check_finite fuses nothing), with 1 and 3 threads, in both modes; only
 * the first member is timed. */
Test(cpu, fused_group_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    char *mil = with_dtype(
        MIL_HEAD "    func main<ios18>(tensor<$F, [3, 1001]> x, tensor<$F, [1001]> b) {\n"
        "        tensor<$F, [3, 1001]> a = add(x = x, y = b)[name = " S_("a") "];\n"
        "        tensor<$F, [3, 1001]> m = mul(x = a, y = a)[name = " S_("m") "];\n"
        "        tensor<$F, [3, 1001]> t = tanh(x = m)[name = " S_("t") "];\n"
        "        tensor<$F, [1, 1001]> g = reshape(shape = " I32_(2, 1, 1001) ", x = b)[name = " S_("g") "];\n"
        "        tensor<$F, [3, 1001]> s = sub(x = t, y = g)[name = " S_("s") "];\n"
        "        tensor<$F, [3, 1001]> e = exp(x = s)[name = " S_("e") "];\n"
        "        tensor<$F, [3, 1001]> q = rsqrt(epsilon = $F(0.25), x = e)[name = " S_("q") "];\n"
        "        tensor<$F, [3, 1001]> d = real_div(x = q, y = e)[name = " S_("d") "];\n"
        "        tensor<$F, [3, 1001]> z = maximum(x = d, y = $F(0.75))[name = " S_("z") "];\n"
        "        tensor<$F, [3, 1001]> w = mul(x = z, y = a)[name = " S_("w") "];\n"
        "    } -> (w, t);\n}\n",
        dt);
    write_bare(mil);
    free(mil);
    float xf[3003], bf[1001];
    uint16_t xh[3003], bh[1001];
    fill_random(xf, 3003, 21, false);
    fill_random(bf, 1001, 22, false);
    for (int i = 0; i < 3003; i++) xh[i] = fp16_from_float(xf[i]);
    for (int i = 0; i < 1001; i++) bh[i] = fp16_from_float(bf[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in[2] = {{.dtype = mdt, .rank = 2, .dims = {3, 1001}, .data = mode == 0 ? (void *)xh : (void *)xf},
                       {.dtype = mdt, .rank = 1, .dims = {1001}, .data = mode == 0 ? (void *)bh : (void *)bf}};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      cr_assert_eq(e->runs, strcmp(e->name, "a") ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      cr_assert(memcmp(fused[k].data, unfused[k].data, 3003 * cpu_dtype_size(mdt)) == 0,
                "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* Element-wise ops right after a fused linear run as its epilogue, on each
 * row of each piece (a group reading the linear's result twice and another
 * input; a single add), but not after a linear whose rows are not a
 * multiple of 4 long (a vectors-of-4 split would differ): the bits of the
 * unfused run, with 1 and 3 threads, in both modes. */
Test(cpu, fused_linear_epilogue_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, MIL_HEAD "    func main<ios18>(tensor<%s, [1, 6, 24]> x, tensor<%s, [1, 6, 20]> r, tensor<%s, [1, 6, 16]> q) {\n",
              dt, dt, dt);
    put_weights(&sb, dt, "w1", "b1", 20, 24);
    put_weights(&sb, dt, "w2", "b2", 16, 20);
    put_weights(&sb, dt, "w3", "b3", 10, 16);
    /* linear(IN [1, 6, K]) -> OUT [1, 6, O] as lower-linear writes it */
    static const char *lin =
        "        tensor<$F, [1, K, 6]> tI = transpose(perm = " I32_(3, 0, 2, 1) ", x = IN)[name = " S_("tI") "];\n"
        "        tensor<$F, [1, K, 1, 6]> vI = reshape(shape = tensor<int32, [4]>([1, K, 1, 6]), x = tI)[name = " S_("vI") "];\n"
        "        tensor<$F, [1, O, 1, 6]> rI = conv(pad_type = " S_("valid") ", weight = wI, x = vI)[name = " S_("rI") "];\n"
        "        tensor<$F, [1, O, 1, 1]> cI = reshape(shape = tensor<int32, [4]>([1, O, 1, 1]), x = bI)[name = " S_("cI") "];\n"
        "        tensor<$F, [1, O, 1, 6]> aI = add(x = rI, y = cI)[name = " S_("aI") "];\n"
        "        tensor<$F, [1, O, 6]> sI = reshape(shape = tensor<int32, [3]>([1, O, 6]), x = aI)[name = " S_("sI") "];\n"
        "        tensor<$F, [1, 6, O]> OUT = transpose(perm = " I32_(3, 0, 2, 1) ", x = sI)[name = " S_("OUT") "];\n";
    const char *subst[3][5] = {{"1", "24", "20", "x", "y1"}, {"2", "20", "16", "h", "y2"}, {"3", "16", "10", "e2", "y3"}};
    const char *eps[3] = {
        "        tensor<$F, [1, 6, 20]> m = mul(x = y1, y = y1)[name = " S_("m") "];\n"
        "        tensor<$F, [1, 6, 20]> t = tanh(x = m)[name = " S_("t") "];\n"
        "        tensor<$F, [1, 6, 20]> s = add(x = t, y = r)[name = " S_("s") "];\n"
        "        tensor<$F, [1, 6, 20]> h = mul(x = s, y = y1)[name = " S_("h") "];\n",
        "        tensor<$F, [1, 6, 16]> e2 = add(x = q, y = y2)[name = " S_("e2") "];\n",
        "        tensor<$F, [1, 6, 10]> g3 = relu(x = y3)[name = " S_("g3") "];\n"};
    for (int L = 0; L < 3; L++) {
      for (const char *p = lin; *p; p++) {
        if (*p == 'I' && (p[1] == ' ' || p[1] == ')' || p[1] == ',' || p[1] == '"')) sb_puts(&sb, subst[L][0]);
        else if (*p == 'K' && (p[1] == ',' || p[1] == ']')) sb_puts(&sb, subst[L][1]);
        else if (*p == 'O' && (p[1] == ',' || p[1] == ']')) sb_puts(&sb, subst[L][2]);
        else if (!strncmp(p, "IN)", 3)) sb_puts(&sb, subst[L][3]), p += 1;
        else if (!strncmp(p, "OUT", 3)) sb_puts(&sb, subst[L][4]), p += 2;
        else if (!strncmp(p, "$F", 2)) sb_puts(&sb, dt), p++;
        else sb_putc(&sb, *p);
      }
      char *e = with_dtype(eps[L], dt);
      sb_puts(&sb, e);
      free(e);
    }
    sb_puts(&sb, "    } -> (g3, h);\n}\n");
    write_bare(sb.data);
    sb_free(&sb);
    float xf[144], rf[120], qf[96];
    uint16_t xh[144], rh[120], qh[96];
    fill_random(xf, 144, 31, false);
    fill_random(rf, 120, 32, false);
    fill_random(qf, 96, 33, false);
    for (int i = 0; i < 144; i++) xh[i] = fp16_from_float(xf[i]);
    for (int i = 0; i < 120; i++) rh[i] = fp16_from_float(rf[i]);
    for (int i = 0; i < 96; i++) qh[i] = fp16_from_float(qf[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in[3] = {{.dtype = mdt, .rank = 3, .dims = {1, 6, 24}, .data = mode == 0 ? (void *)xh : (void *)xf},
                       {.dtype = mdt, .rank = 3, .dims = {1, 6, 20}, .data = mode == 0 ? (void *)rh : (void *)rf},
                       {.dtype = mdt, .rank = 3, .dims = {1, 6, 16}, .data = mode == 0 ? (void *)qh : (void *)qf}};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    const char *ran = " r1 c1 r2 c2 r3 c3 g3 ";
    for (uint32_t i = 0; i < cpu_profile_count(l.c); i++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, i);
      char key[16];
      snprintf(key, sizeof key, " %s ", e->name);
      cr_assert_eq(e->runs, strstr(ran, key) ? 1u : 0u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(mdt);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* A row group: reductions over the last dim (mean, sum, max) among element-
 * wise ops on the rows and on one value per row, tiles of whole rows (10
 * rows of 1000: the last tile short): the bits of the unfused run, with 1
 * and 3 threads, in both modes; only the first statement is timed. */
Test(cpu, fused_row_group_gives_the_unfused_bits) {
  for (int mode = 0; mode < 2; mode++) {
    const char *dt = mode == 0 ? "fp16" : "fp32";
    char *mil = with_dtype(
        MIL_HEAD "    func main<ios18>(tensor<$F, [10, 1000]> x) {\n"
        "        tensor<$F, [10, 1]> m = reduce_mean(axes = " I32_(1, -1) ", keep_dims = bool(true), x = x)[name = " S_("m") "];\n"
        "        tensor<$F, [10, 1000]> c = sub(x = x, y = m)[name = " S_("c") "];\n"
        "        tensor<$F, [10, 1000]> q = mul(x = c, y = c)[name = " S_("q") "];\n"
        "        tensor<$F, [10, 1]> v = reduce_sum(axes = " I32_(1, 1) ", keep_dims = bool(true), x = q)[name = " S_("v") "];\n"
        "        tensor<$F, [10, 1]> w = mul(x = v, y = $F(0.001))[name = " S_("w") "];\n"
        "        tensor<$F, [10, 1]> i = rsqrt(epsilon = $F(0.001), x = w)[name = " S_("i") "];\n"
        "        tensor<$F, [10, 1000]> n = mul(x = c, y = i)[name = " S_("n") "];\n"
        "        tensor<$F, [10, 1000]> t = tanh(x = n)[name = " S_("t") "];\n"
        "        tensor<$F, [10, 1]> mx = reduce_max(axes = " I32_(1, -1) ", keep_dims = bool(true), x = t)[name = " S_("mx") "];\n"
        "        tensor<$F, [10, 1000]> y = sub(x = t, y = mx)[name = " S_("y") "];\n"
        "    } -> (y, i);\n}\n",
        dt);
    write_bare(mil);
    free(mil);
    float xf[10000];
    uint16_t xh[10000];
    fill_random(xf, 10000, 41, false);
    for (int i = 0; i < 10000; i++) xh[i] = fp16_from_float(xf[i] * (1 + 0.1f * (float)(i / 1000)));
    for (int i = 0; i < 10000; i++) xf[i] = fp16_to_float(xh[i]);
    MilDType mdt = mode == 0 ? MIL_DT_FP16 : MIL_DT_FP32;
    CpuTensor in = {.dtype = mdt, .rank = 2, .dims = {10, 1000}, .data = mode == 0 ? (void *)xh : (void *)xf};
    CpuNumerics nm = mode == 0 ? CPU_NUMERICS_ANE : CPU_NUMERICS_FP32;
    CpuTensor fused[2], unfused[2];
    run_twice(nm, &in, fused, 2);
    Loaded l;
    CpuOptions opt = {.numerics = nm, .threads = 2, .profile = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    for (uint32_t k = 0; k < cpu_profile_count(l.c); k++) {
      const CpuStmtTime *e = cpu_profile_stmt(l.c, k);
      cr_assert_eq(e->runs, strcmp(e->name, "m") ? 0u : 1u, "%s: statement %s ran %u times", dt, e->name, e->runs);
    }
    for (int k = 0; k < 2; k++) cpu_tensor_free(&unfused[k]);
    unload(&l);
    opt = (CpuOptions){.numerics = nm, .threads = 2, .check_finite = true};
    load_opts(&l, &opt);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, &in, unfused, &l.d), "%s", l.diags.data);
    unload(&l);
    for (int k = 0; k < 2; k++) {
      size_t bytes = (size_t)prod(fused[k].dims, fused[k].rank) * cpu_dtype_size(mdt);
      cr_assert(memcmp(fused[k].data, unfused[k].data, bytes) == 0, "%s: output %d differs from the unfused run", dt, k);
      cpu_tensor_free(&fused[k]);
      cpu_tensor_free(&unfused[k]);
    }
    cleanup();
  }
}

/* softmax with blocks of very negative scores (a causal mask's -65504), which
 * skip computing their exps, a row that is all masked but one, and a NaN row. */
Test(cpu, softmax_masked_rows) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp32, [3, 12]> x) {\n"
                      "        tensor<fp32, [3, 12]> y = softmax(axis = int32(-1), x = x)[name = " S_("y") "];\n"
                      "    } -> (y);\n}\n");
  float x[36];
  for (int i = 0; i < 36; i++) x[i] = -65504;
  x[0] = 0, x[1] = 1, x[2] = 2, x[3] = 3, x[9] = -1;   /* row 0: blocks of 4 mixed, masked, mixed */
  x[12 + 11] = 5;                                      /* row 1: one score */
  x[24 + 5] = NAN;                                     /* row 2: NaN */
  CpuTensor in = f32_tensor(x, 2, (int64_t[]){3, 12}), out;
  run_twice(CPU_NUMERICS_FP32, &in, &out, 1);
  const float *y = out_f32(&out);
  double sum = exp(0.0) + exp(1.0) + exp(2.0) + exp(3.0) + exp(-1.0);
  for (int i = 0; i < 12; i++) {
    double want = i < 4 ? exp((double)i) / sum : i == 9 ? exp(-1.0) / sum : 0;
    cr_assert_float_eq((double)y[i], want, 1e-7, "y[0][%d] = %g, want %g", i, (double)y[i], want);
    cr_assert(y[12 + i] == (i == 11 ? 1.0f : 0.0f), "y[1][%d] = %g", i, (double)y[12 + i]);
    cr_assert(isnan(y[24 + i]), "y[2][%d] = %g", i, (double)y[24 + i]);
  }
  cpu_tensor_free(&out);
  cleanup();
}

/* An unfused fp16 add (broadcast) and sqrt in ANE mode round their results
 * piece by piece as they make them (run.c's pass after the statement is
 * skipped for them): a later cast to fp32, which copies, sees each value
 * rounded to fp16, with 1 and 3 threads. */
Test(cpu, unfused_fp16_ops_round_their_results) {
  write_bare(MIL_HEAD "    func main<ios18>(tensor<fp16, [3, 4099]> x, tensor<fp16, [1, 4099]> y) {\n"
                      "        tensor<fp16, [3, 4099]> z = add(x = x, y = y)[name = " S_("z") "];\n"
                      "        tensor<fp16, [1, 4099]> s = sqrt(x = y)[name = " S_("s") "];\n"
                      "        tensor<fp32, [3, 4099]> zc = cast(dtype = " S_("fp32") ", x = z)[name = " S_("zc") "];\n"
                      "        tensor<fp32, [1, 4099]> sc = cast(dtype = " S_("fp32") ", x = s)[name = " S_("sc") "];\n"
                      "    } -> (zc, sc);\n}\n");
  static uint16_t xh[3 * 4099], yh[4099];
  static float xf[3 * 4099], yf[4099];
  fill_random(xf, 3 * 4099, 5, false);
  fill_random(yf, 4099, 6, false);
  for (int i = 0; i < 3 * 4099; i++) xf[i] = fp16_to_float(xh[i] = fp16_from_float(xf[i] * 3.0f));
  for (int i = 0; i < 4099; i++) yf[i] = fp16_to_float(yh[i] = fp16_from_float(fabsf(yf[i]) * 0.37f));
  CpuTensor in[2] = {{.dtype = MIL_DT_FP16, .rank = 2, .dims = {3, 4099}, .data = xh},
                     {.dtype = MIL_DT_FP16, .rank = 2, .dims = {1, 4099}, .data = yh}};
  CpuTensor out[2];
  run_twice(CPU_NUMERICS_ANE, in, out, 2);
  const float *zc = out[0].data, *sc = out[1].data;
  for (int i = 0; i < 3 * 4099; i++) {
    float want = fp16_to_float(fp16_from_float(xf[i] + yf[i % 4099]));
    cr_assert(!memcmp(&zc[i], &want, sizeof want), "z[%d] = %a, want %a", i, (double)zc[i], (double)want);
  }
  for (int i = 0; i < 4099; i++) {
    float want = fp16_to_float(fp16_from_float(sqrtf(yf[i])));
    cr_assert(!memcmp(&sc[i], &want, sizeof want), "s[%d] = %a, want %a", i, (double)sc[i], (double)want);
  }
  cpu_tensor_free(&out[0]);
  cpu_tensor_free(&out[1]);
  cleanup();
}
