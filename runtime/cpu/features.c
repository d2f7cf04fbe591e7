/*
 * CPU feature detection, done once per process (pthread_once), whichever
 * thread asks first: the kernels choose their F16C, AVX2, AVX-512 and AMX
 * paths from it. Where the CPU has AMX, the kernel is asked once for the
 * tile data state (arch_prctl ARCH_REQ_XCOMP_PERM), which Linux grants per
 * process; nothing else in the process is touched. ORION_CPU_AMX=0 (read
 * once, here) turns the AMX path off.
 */
#define _GNU_SOURCE /* syscall */
#include "cpu_internal.h"

#include <stdlib.h>

#if HAVE_X86
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* CPUID leaf 1, ECX bit 29. Asked directly: clang before 15 does not know
 * "f16c" as a __builtin_cpu_supports feature. */
static bool cpuid_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

/* CPUID leaf 7 EDX bits 22 (AMX-BF16) and 24 (AMX-TILE); XCR0 bits 17-18
 * (the OS saves the tile state); then the kernel's permission to use it. */
static bool amx_usable(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE: xgetbv works */
  if (__get_cpuid_max(0, NULL) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(d & (1u << 22)) || !(d & (1u << 24))) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
  return false;
#endif
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
  const char *e = getenv("ORION_CPU_AMX");
  detected.amx = detected.avx512 && !(e && !strcmp(e, "0")) && amx_usable();
#endif
}

const CpuFeatures *cpu_features(void) {
  pthread_once(&detect_once, detect);
  return &detected;
}
