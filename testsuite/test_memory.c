/*
 * The allocation funnel's advice on large buffers (support/memory.c): a
 * buffer of at least 4 MiB from xmalloc, xcalloc, xrealloc and the try_
 * forms is marked for transparent huge pages (its mapping's VmFlags in
 * /proc/self/smaps hold "hg", which madvise(MADV_HUGEPAGE) sets whether or
 * not a huge page is then found); a small one is not. Skipped where the
 * kernel has no transparent huge pages.
 */
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/support.h"

static void require_thp(void) {
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) != 0)
    cr_skip_test("this kernel has no transparent huge pages");
}

/* Whether the mapping holding address p is advised for huge pages ("hg" in its VmFlags). */
static bool advised_huge(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  cr_assert_not_null(f, "cannot read /proc/self/smaps");
  char line[1024];
  bool inside = false, found = false, advised = false;
  uintptr_t a = (uintptr_t)p;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line; the others fail at '-' */
      inside = a >= lo && a < hi;
      found |= inside;
      continue;
    }
    if (inside && !strncmp(line, "VmFlags:", 8)) advised = strstr(line, " hg") != NULL;
  }
  fclose(f);
  cr_assert(found, "no mapping holds %p", p);
  return advised;
}

/* An address inside the buffer's whole pages (its first bytes may share a page with malloc's header). */
static const void *middle(const void *p, size_t n) { return (const char *)p + n / 2; }

#define BIG ((size_t)16 << 20)

Test(memory, large_buffers_are_advised_for_huge_pages) {
  require_thp();
  void *a = xmalloc(BIG), *b = xcalloc(BIG / 4, 4), *c = try_malloc(BIG), *d = try_calloc(1, BIG);
  void *e = try_aligned_alloc(64, BIG);
  void *f = xrealloc(xmalloc(1024), BIG);
  void *all[] = {a, b, c, d, e, f};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    cr_assert_not_null(all[i]);
    cr_expect(advised_huge(middle(all[i], BIG)), "buffer %zu of 16 MiB is not advised for huge pages", i);
    free(all[i]);
  }
}

Test(memory, small_buffers_are_not) {
  require_thp();
  size_t n = (size_t)1 << 20; /* above malloc's mmap threshold: a mapping of its own */
  void *p = xmalloc(n);
  cr_expect(!advised_huge(middle(p, n)), "a 1 MiB buffer is advised for huge pages");
  free(p);
}
