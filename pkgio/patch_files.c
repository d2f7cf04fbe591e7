/*
 * The file steps of a weight update: see patch_files.h.
 */
#define _GNU_SOURCE
#include "patch_files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orion/patch.h"
#include "orion/pkg_paths.h"
#include "orion/temporaries.h"

double patch_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

char *patch_pkg_path(const char *pkg, const char *name) {
  size_t n = strlen(pkg) + strlen(name) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", pkg, name);
  return p;
}

/* Fault injection for the crash tests: every durable step counts. */
static long fault_at = -1, fault_step;

void patch_fault_init(void) {
  const char *e = getenv(PATCH_FAULT_ENV);
  fault_at = e && *e ? strtol(e, NULL, 10) : 0;
  fault_step = 0;
}

void patch_step(void) {
  if (fault_at > 0 && ++fault_step == fault_at) raise(SIGKILL);
}

void patch_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t patch_get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

bool patch_write_all(int fd, const uint8_t *p, uint64_t n, uint64_t off) {
  while (n) {
    size_t piece = n < WRITE_PIECE ? (size_t)n : WRITE_PIECE;
    patch_step();
    ssize_t w = pwrite(fd, p, piece, (off_t)off);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    off += (uint64_t)w;
    n -= (uint64_t)w;
  }
  return true;
}

bool patch_sync_fd(int fd) {
  patch_step();
  return fdatasync(fd) == 0;
}

bool patch_sync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return false;
  patch_step();
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

/* The package's files are written, renamed and removed relative to
 * descriptors opened by the package rule (orion/pkg_paths.h), so that a
 * directory of the package swapped for a link cannot redirect an update. */

/* The directory holding package file `name`, and name's last component; -1 with errno. */
int patch_open_parent(const char *pkg, const char *name, const char **base) {
  PkgDir dir;
  const char *err;
  if (!pkg_dir_open(&dir, pkg, &err)) return -1;
  int fd = pkg_open_parent(&dir, name, base);
  int saved = errno;
  pkg_dir_close(&dir);
  errno = saved;
  return fd;
}

/* Opens package file `name` with `flags` by the package rule; -1 with errno (ELOOP when it leads outside). */
int patch_open_member(const char *pkg, const char *name, int flags) {
  PkgDir dir;
  const char *err;
  if (!pkg_dir_open(&dir, pkg, &err)) return -1;
  bool outside;
  char why[4096 + 128];
  int fd = pkg_open_file(&dir, name, flags, &outside, why, sizeof why);
  int saved = outside ? ELOOP : errno;
  pkg_dir_close(&dir);
  errno = saved;
  return fd;
}

bool patch_sync_parent(const char *pkg, const char *sub) {
  int fd = patch_open_member(pkg, sub, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return false;
  patch_step();
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

/* A patch's temporary files have fixed names in the package: registered
 * while they are only temporaries, so that SIGINT/SIGTERM removes them
 * (orion/temporaries.h); after a kill, the next update or open removes them
 * under the package's lock (remove_leftovers), which proves no updater is left. */
void patch_track_in(const char *pkg, const char *name) {
  char *p = patch_pkg_path(pkg, name);
  temp_track(p);
  free(p);
}

void patch_untrack_in(const char *pkg, const char *name) {
  char *p = patch_pkg_path(pkg, name);
  temp_untrack(p);
  free(p);
}

/* Both names in one directory of the package (a temporary beside its file). */
bool patch_rename_in(const char *pkg, const char *from, const char *to) {
  const char *a, *b;
  int fd = patch_open_parent(pkg, from, &a);
  if (fd < 0) return false;
  b = strrchr(to, '/') ? strrchr(to, '/') + 1 : to;
  if ((size_t)(a - from) != (size_t)(b - to) || strncmp(from, to, (size_t)(a - from)))
    ice("patch_rename_in: %s and %s differ in directory", from, to);
  patch_step();
  bool ok = renameat(fd, a, fd, b) == 0;
  int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

bool patch_unlink_in(const char *pkg, const char *name) {
  const char *base;
  int fd = patch_open_parent(pkg, name, &base);
  if (fd < 0) return false;
  bool ok = unlinkat(fd, base, 0) == 0;
  int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

/* Writes a whole file under a temporary name in the package, synced; a
 * link planted under that name is refused, not followed (O_NOFOLLOW). */
bool patch_write_new_file(const char *pkg, const char *name, const uint8_t *const *parts, const uint64_t *lens,
                           uint32_t nparts) {
  const char *base;
  int dir = patch_open_parent(pkg, name, &base);
  if (dir < 0) return false;
  int fd = openat(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  close(dir);
  if (fd < 0) return false;
  uint64_t off = 0;
  bool ok = true;
  for (uint32_t i = 0; ok && i < nparts; i++) {
    ok = patch_write_all(fd, parts[i], lens[i], off);
    off += lens[i];
  }
  ok = ok && patch_sync_fd(fd);
  return close(fd) == 0 && ok;
}

bool patch_read_member(const char *pkg, const char *name, char **text, size_t *len, const char **err) {
  int fd = patch_open_member(pkg, name, O_RDONLY);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  bool ok = read_fd(fd, SIZE_MAX / 2, text, len, err);
  close(fd);
  return ok;
}
