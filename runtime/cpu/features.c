/*
 * CPU feature detection, done once per process (pthread_once), whichever
 * thread asks first: the kernels choose their F16C, AVX2 and AVX-512 paths from it.
 * Nothing else in the process is touched.
 */
#include "cpu_internal.h"

#if HAVE_X86
#include <cpuid.h>

/* CPUID leaf 1, ECX bit 29. Asked directly: clang before 15 does not know
 * "f16c" as a __builtin_cpu_supports feature. */
static bool cpuid_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

static CpuFeatures detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void) {
#if HAVE_X86
  __builtin_cpu_init();
  detected.f16c = cpuid_has_f16c() && __builtin_cpu_supports("avx");
  detected.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  /* The matrix-vector kernels' masked fp16 loads need BW and VL besides F. */
  detected.avx512 = detected.f16c && detected.avx2 && __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
}

const CpuFeatures *cpu_features(void) {
  pthread_once(&detect_once, detect);
  return &detected;
}
